// Package humantime parses durations as ArkFlow's configs write them
// (Rust's humantime crate): "10ms", "1s", "1h 30m", "1day".
package humantime

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// humantime's units, in nanoseconds. A month is 30.44 days and a year
// 365.25 days, as in humantime.
var durationUnits = map[string]int64{
	"nsec": 1, "ns": 1,
	"usec": 1e3, "us": 1e3, "µs": 1e3,
	"msec": 1e6, "ms": 1e6,
	"seconds": 1e9, "second": 1e9, "sec": 1e9, "s": 1e9,
	"minutes": 60e9, "minute": 60e9, "min": 60e9, "m": 60e9,
	"hours": 3600e9, "hour": 3600e9, "hr": 3600e9, "h": 3600e9,
	"days": 86400e9, "day": 86400e9, "d": 86400e9,
	"weeks": 7 * 86400e9, "week": 7 * 86400e9, "w": 7 * 86400e9,
	"months": 2_630_016e9, "month": 2_630_016e9, "M": 2_630_016e9,
	"years": 31_557_600e9, "year": 31_557_600e9, "y": 31_557_600e9,
}

// Parse parses a duration as ArkFlow writes them (Rust's
// humantime): one or more whole numbers each followed by a unit, with
// optional spaces: "10ms", "1s", "1h 30m", "1day", "2 days", "100us".
// Units: ns, us (µs), ms, s (sec, second, seconds), m (min, minute,
// minutes), h (hr, hour, hours), d (day, days), w (week, weeks), M (month,
// months: 30.44 days), y (year, years: 365.25 days). Unlike Go's
// time.ParseDuration, "m" is a minute and fractions are refused.
func Parse(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("empty duration (write e.g. 1s, 500ms or 1h 30m)")
	}
	var total int64
	for rest != "" {
		n := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		if n == 0 {
			return 0, fmt.Errorf("invalid duration %q: expected a whole number at %q", s, rest)
		}
		num, err := strconv.ParseInt(rest[:n], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: number %s too large", s, rest[:n])
		}
		rest = strings.TrimLeft(rest[n:], " \t")
		u := len(rest) - len(strings.TrimLeftFunc(rest, isUnitRune))
		if u == 0 {
			return 0, fmt.Errorf("invalid duration %q: unit missing after %d (e.g. ms, s, m, h, d)", s, num)
		}
		unit, ok := durationUnits[rest[:u]]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q (ns, us, ms, s, m, h, d, w, M, y)", s, rest[:u])
		}
		if num > math.MaxInt64/unit || total > math.MaxInt64-num*unit {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		total += num * unit
		rest = strings.TrimLeft(rest[u:], " \t")
	}
	return time.Duration(total), nil
}

func isUnitRune(r rune) bool { return r == 'µ' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
