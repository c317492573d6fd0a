package arrowjson

import (
	"math"
	"strconv"
	"strings"
	"time"
)

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped as serde_json escapes it
// (serde_json/src/ser.rs, ESCAPE table and format_escaped_str_contents):
// '"' and '\' get a backslash; \b \t \n \f \r their short forms; other
// bytes below 0x20 \u00XX with lowercase hex; everything else, including
// '/', DEL and non-ASCII, is written as is. arrow-json writes strings and
// field names through serde_json (arrow-json/src/writer/encoder.rs,
// encode_string).
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\t':
			out = append(out, '\\', 't')
		case '\n':
			out = append(out, '\\', 'n')
		case '\f':
			out = append(out, '\\', 'f')
		case '\r':
			out = append(out, '\\', 'r')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// shortest returns the shortest decimal digits that round-trip f (f > 0)
// and the decimal exponent of the first digit (f = d.ddd × 10^exp).
func shortest(f float64, bitSize int) (string, int) {
	s := strconv.FormatFloat(f, 'e', -1, bitSize) // d.ddde±XX
	e := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[e+1:])
	digits := strings.Replace(s[:e], ".", "", 1)
	return digits, exp
}

// appendFixed writes digits × 10^(exp-len(digits)+1) without an exponent,
// with ".0" after an integer.
func appendFixed(out []byte, digits string, exp int) []byte {
	switch {
	case exp < 0:
		out = append(out, "0."...)
		out = append(out, strings.Repeat("0", -exp-1)...)
		return append(out, digits...)
	case len(digits) <= exp+1:
		out = append(out, digits...)
		out = append(out, strings.Repeat("0", exp+1-len(digits))...)
		return append(out, ".0"...)
	default:
		out = append(out, digits[:exp+1]...)
		out = append(out, '.')
		return append(out, digits[exp+1:]...)
	}
}

// appendLexicalFloat appends f as arrow-json writes floats: lexical-core's
// default format (arrow-json/src/writer/encoder.rs float_encode; rust-lexical
// lexical-write-float/src/algorithm.rs and shared.rs write_float). NaN and
// ±Inf are null. Shortest round-trip digits; plain notation when the
// decimal exponent is within [-5, 9] ("10.0", "0.00001", "1000000000.0");
// otherwise scientific with at least one fraction digit and an unsigned
// positive exponent ("1.0e10", "1.5e-7"). Zero is "0.0" or "-0.0".
func appendLexicalFloat(out []byte, f float64, bitSize int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(out, "null"...)
	}
	if math.Signbit(f) {
		out = append(out, '-')
		f = -f
	}
	if f == 0 {
		return append(out, "0.0"...)
	}
	digits, exp := shortest(f, bitSize)
	if exp >= -5 && exp <= 9 {
		return appendFixed(out, digits, exp)
	}
	out = append(out, digits[0], '.')
	if len(digits) == 1 {
		out = append(out, '0')
	} else {
		out = append(out, digits[1:]...)
	}
	out = append(out, 'e')
	return strconv.AppendInt(out, int64(exp), 10)
}

// appendSerdeFloat appends a finite f as serde_json 1.0.151 writes it, with
// zmij (zmij/src/lib.rs write): shortest round-trip digits; plain notation
// when the decimal exponent is within [-5, 15] ("100.0", "0.00001");
// otherwise scientific with a signed exponent, and no fraction for one
// digit ("1e+16", "1.5e-7").
func appendSerdeFloat(out []byte, f float64) []byte {
	if math.Signbit(f) {
		out = append(out, '-')
		f = -f
	}
	if f == 0 {
		return append(out, "0.0"...)
	}
	digits, exp := shortest(f, 64)
	if exp >= -5 && exp <= 15 {
		return appendFixed(out, digits, exp)
	}
	out = append(out, digits[0])
	if len(digits) > 1 {
		out = append(out, '.')
		out = append(out, digits[1:]...)
	}
	out = append(out, 'e')
	if exp >= 0 {
		out = append(out, '+')
	}
	return strconv.AppendInt(out, int64(exp), 10)
}

// appendDecimal appends the unscaled integer digits (with optional '-') at
// scale as arrow-rs formats decimals (arrow-data/src/decimal.rs
// format_decimal_str): digits beyond precision are cut from the end, a
// negative scale appends zeros, a positive one inserts the point, padding
// with zeros ("0.05").
func appendDecimal(out []byte, digits string, precision, scale int) []byte {
	sign := ""
	rest := digits
	if strings.HasPrefix(digits, "-") {
		sign, rest = "-", digits[1:]
	}
	digits = digits[:min(precision, len(rest))+len(sign)]
	switch {
	case scale == 0:
		return append(out, digits...)
	case scale < 0:
		out = append(out, digits...)
		return append(out, strings.Repeat("0", -scale)...)
	case len(rest) > scale:
		cut := len(digits) - scale
		out = append(out, digits[:cut]...)
		out = append(out, '.')
		return append(out, digits[cut:]...)
	default:
		out = append(out, sign...)
		out = append(out, "0."...)
		out = append(out, strings.Repeat("0", scale-len(rest))...)
		return append(out, rest...)
	}
}

// appendDate appends t's date as chrono's NaiveDate Debug does: four-digit
// years within 0..=9999, otherwise a signed year of at least four digits.
func appendDate(out []byte, t time.Time) []byte {
	y := t.Year()
	if y >= 0 && y <= 9999 {
		out = appendPadded(out, int64(y), 4)
	} else {
		if y < 0 {
			out = append(out, '-')
			y = -y
		} else {
			out = append(out, '+')
		}
		out = appendPadded(out, int64(y), 4)
	}
	out = append(out, '-')
	out = appendPadded(out, int64(t.Month()), 2)
	out = append(out, '-')
	return appendPadded(out, int64(t.Day()), 2)
}

// appendClock appends HH:MM:SS and the fraction of nanos as chrono's
// NaiveTime Debug (and RFC 3339 with SecondsFormat::AutoSi) does: none when
// zero, else 3, 6 or 9 digits, the fewest that are exact.
func appendClock(out []byte, h, m, s, nanos int) []byte {
	out = appendPadded(out, int64(h), 2)
	out = append(out, ':')
	out = appendPadded(out, int64(m), 2)
	out = append(out, ':')
	out = appendPadded(out, int64(s), 2)
	switch {
	case nanos == 0:
	case nanos%1_000_000 == 0:
		out = append(out, '.')
		out = appendPadded(out, int64(nanos/1_000_000), 3)
	case nanos%1000 == 0:
		out = append(out, '.')
		out = appendPadded(out, int64(nanos/1000), 6)
	default:
		out = append(out, '.')
		out = appendPadded(out, int64(nanos), 9)
	}
	return out
}

// appendDateTime appends t (in its own location) as chrono's NaiveDateTime
// Debug does: date 'T' clock.
func appendDateTime(out []byte, t time.Time) []byte {
	out = appendDate(out, t)
	out = append(out, 'T')
	return appendClock(out, t.Hour(), t.Minute(), t.Second(), t.Nanosecond())
}

// appendOffset appends t's UTC offset as chrono's to_rfc3339_opts with
// use_z does: "Z" for zero, else ±HH:MM, with :SS when not whole minutes.
func appendOffset(out []byte, t time.Time) []byte {
	_, off := t.Zone()
	if off == 0 {
		return append(out, 'Z')
	}
	if off < 0 {
		out = append(out, '-')
		off = -off
	} else {
		out = append(out, '+')
	}
	out = appendPadded(out, int64(off/3600), 2)
	out = append(out, ':')
	out = appendPadded(out, int64(off/60%60), 2)
	if off%60 != 0 {
		out = append(out, ':')
		out = appendPadded(out, int64(off%60), 2)
	}
	return out
}

func appendPadded(out []byte, v int64, width int) []byte {
	s := strconv.FormatInt(v, 10)
	for i := len(s); i < width; i++ {
		out = append(out, '0')
	}
	return append(out, s...)
}
