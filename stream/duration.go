package stream

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/humantime"
)

// ParseDuration parses a duration as ArkFlow writes them (Rust's
// humantime): one or more whole numbers each followed by a unit, with
// optional spaces: "10ms", "1s", "1h 30m", "1day", "2 days", "100us".
// Units: ns, us (µs), ms, s (sec, second, seconds), m (min, minute,
// minutes), h (hr, hour, hours), d (day, days), w (week, weeks), M (month,
// months: 30.44 days), y (year, years: 365.25 days). Unlike Go's
// time.ParseDuration, "m" is a minute and fractions are refused.
func ParseDuration(s string) (time.Duration, error) { return humantime.Parse(s) }

// duration is a humantime duration in a component's config.
type duration time.Duration

// UnmarshalJSON reads a humantime string (see ParseDuration).
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("must be a duration string such as 1s, 500ms or 1h 30m (got %s)", b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

func (d duration) ms() int64 { return time.Duration(d).Milliseconds() }
