package arrowjson

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// unixTime converts v in unit since the Unix epoch to a time, rounding
// towards the past as arrow-rs's as_datetime does (euclidean division).
func unixTime(v int64, unit arrow.TimeUnit) time.Time {
	per := int64(unit.Multiplier()) // nanoseconds per unit
	perSec := int64(time.Second) / per
	sec, rem := v/perSec, v%perSec
	if rem < 0 {
		sec--
		rem += perSec
	}
	return time.Unix(sec, rem*per)
}

// timestampEnc writes timestamps quoted (arrow-cast/src/display.rs,
// write_timestamp): without a time zone as chrono's NaiveDateTime Debug
// ("1970-01-01T00:00:00.001"); with one, in that zone as RFC 3339 with
// AutoSi fractions and "Z" for a zero offset ("1970-01-01T05:30:00+05:30").
// The zone is a fixed offset (±HH:MM, ±HHMM, ±HH) or an IANA name; another
// is an error, as arrow-rs fails to parse it.
func timestampEnc(a *array.Timestamp) (encFn, error) {
	ts := a.DataType().(*arrow.TimestampType)
	var loc *time.Location
	if ts.TimeZone != "" {
		var err error
		if loc, err = parseZone(ts.TimeZone); err != nil {
			return nil, err
		}
	}
	return func(out []byte, i int) ([]byte, error) {
		t := unixTime(int64(a.Value(i)), ts.Unit)
		out = append(out, '"')
		if loc == nil {
			out = appendDateTime(out, t.UTC())
		} else {
			t = t.In(loc)
			out = appendDateTime(out, t)
			out = appendOffset(out, t)
		}
		return append(out, '"'), nil
	}, nil
}

// parseZone parses an Arrow time zone as arrow-rs's Tz does
// (arrow-array/src/timezone.rs): fixed offsets first, then IANA names.
func parseZone(tz string) (*time.Location, error) {
	var d [4]byte
	b := []byte(tz)
	switch {
	case len(b) == 6 && b[3] == ':':
		d = [4]byte{b[1], b[2], b[4], b[5]}
	case len(b) == 5:
		d = [4]byte{b[1], b[2], b[3], b[4]}
	case len(b) == 3:
		d = [4]byte{b[1], b[2], '0', '0'}
	}
	if (len(b) == 6 && b[3] == ':') || len(b) == 5 || len(b) == 3 {
		ok := b[0] == '+' || b[0] == '-'
		for _, c := range d {
			ok = ok && c >= '0' && c <= '9'
		}
		if ok {
			secs := (int(d[0]-'0')*10+int(d[1]-'0'))*3600 + (int(d[2]-'0')*10+int(d[3]-'0'))*60
			if b[0] == '-' {
				secs = -secs
			}
			return time.FixedZone(tz, secs), nil
		}
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" || tz == "Local" {
		return nil, fmt.Errorf("time zone %q is neither an offset nor a known IANA name", tz)
	}
	return loc, nil
}

// timeEnc writes a time of day quoted as chrono's NaiveTime Debug does
// ("12:34:56.789"). A value outside one day is an error; arrow-rs writes an
// error text in its place.
func timeEnc(v func(int) int64, unit arrow.TimeUnit) encFn {
	perSec := int64(time.Second) / int64(unit.Multiplier())
	return func(out []byte, i int) ([]byte, error) {
		x := v(i)
		if x < 0 || x >= 86400*perSec {
			return nil, fmt.Errorf("time of day %d%s outside one day", x, unit)
		}
		sec := int(x / perSec)
		nanos := int(x%perSec) * int(unit.Multiplier())
		out = append(out, '"')
		out = appendClock(out, sec/3600, sec/60%60, sec%60, nanos)
		return append(out, '"'), nil
	}
}
