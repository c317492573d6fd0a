// Package rowjson is the JSON-lines row codec shared by the file and stdout
// connectors: one JSON object per line, one line per row.
//
// # Decoding
//
// A Decoder turns one line (a JSON object) into one value per column of a
// declared schema, appended to Arrow builders. Supported column types are
// the declarable ones: int64, float32, float64, string, bool and timestamp
// (any unit).
//
//   - Keys that are not columns are ignored (their values must still be
//     valid JSON). When a key occurs twice, the last value wins, as in
//     encoding/json.
//   - A missing key or JSON null gives null when the column is nullable and
//     is an error otherwise.
//   - int64 takes a JSON integer literal (no fraction, no exponent) in int64
//     range; 1.5, 1e3 and "1" are errors.
//   - float32 and float64 take any JSON number, and the strings "NaN",
//     "+Inf" and "-Inf" (which the encoder writes for those values). A number
//     out of the column's range is an error.
//   - string takes a JSON string holding valid UTF-8 (escapes of lone
//     surrogates become U+FFFD, as in encoding/json).
//   - bool takes true or false.
//   - timestamp takes an integer (already in the column's unit) or an
//     RFC 3339 string, converted to the unit; digits below the unit are
//     truncated towards the past, and an instant the unit cannot hold is an
//     error.
//
// A line that fails decoding appends nothing. Errors name the field:
// `field "amount": must be a number (got string "x")`.
//
// # Encoding
//
// AppendRecord writes one JSON object per row, keys in schema order, see its
// documentation for the formats.
package rowjson

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Error is a problem with one line. Field is the column at fault, or empty
// for problems with the line as a whole (such as invalid JSON).
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + strconv.Quote(e.Field) + ": " + e.Reason
}

type colKind uint8

const (
	colInt64 colKind = iota
	colFloat32
	colFloat64
	colString
	colBool
	colTimestamp
)

// Decoder decodes JSON lines into Arrow builders for one schema. It keeps
// scratch state between lines, so a Decoder must not be used by several
// goroutines at once.
type Decoder struct {
	names    []string
	kinds    []colKind
	units    []arrow.TimeUnit
	nullable []bool
	index    map[string]int
	slots    []slot
	p        parser
}

// NewDecoder returns a decoder for rows of schema. Columns of types other
// than int64, float32, float64, string, bool and timestamp are an error
// naming the column.
func NewDecoder(schema *arrow.Schema) (*Decoder, error) {
	n := schema.NumFields()
	d := &Decoder{
		names:    make([]string, n),
		kinds:    make([]colKind, n),
		units:    make([]arrow.TimeUnit, n),
		nullable: make([]bool, n),
		index:    make(map[string]int, n),
		slots:    make([]slot, n),
	}
	for i, f := range schema.Fields() {
		d.names[i] = f.Name
		d.nullable[i] = f.Nullable
		d.index[f.Name] = i
		switch t := f.Type.(type) {
		case *arrow.Int64Type:
			d.kinds[i] = colInt64
		case *arrow.Float32Type:
			d.kinds[i] = colFloat32
		case *arrow.Float64Type:
			d.kinds[i] = colFloat64
		case *arrow.StringType:
			d.kinds[i] = colString
		case *arrow.BooleanType:
			d.kinds[i] = colBool
		case *arrow.TimestampType:
			d.kinds[i] = colTimestamp
			d.units[i] = t.Unit
		default:
			return nil, fmt.Errorf("rowjson: column %q: type %s cannot be decoded from JSON", f.Name, f.Type)
		}
	}
	return d, nil
}

// NumFields is the number of columns the decoder fills.
func (d *Decoder) NumFields() int { return len(d.names) }

// DecodeLine decodes one JSON object and appends one value to each of the
// first NumFields builders, which must match the schema's columns (extra
// builders are left alone). Leading and trailing JSON whitespace is
// allowed. On error nothing is appended.
func (d *Decoder) DecodeLine(line []byte, builders []array.Builder) error {
	if len(builders) < len(d.names) {
		return fmt.Errorf("rowjson: %d builders for %d columns", len(builders), len(d.names))
	}
	for i := range d.slots {
		d.slots[i] = slot{}
	}
	d.p.reset(line)
	if err := d.p.object(d); err != nil {
		return err
	}
	// Convert every value before appending any, so a bad line leaves the
	// builders untouched.
	var vals [16]value
	vs := vals[:0]
	if len(d.names) > len(vals) {
		vs = make([]value, 0, len(d.names))
	}
	for i := range d.names {
		v, err := d.convert(i)
		if err != nil {
			return err
		}
		vs = append(vs, v)
	}
	// Check builder types before appending any value.
	for i, b := range builders[:len(d.names)] {
		if !builderMatches(d.kinds[i], b) {
			return fmt.Errorf("rowjson: builder %d (%T) does not match column %q", i, b, d.names[i])
		}
	}
	for i, b := range builders[:len(d.names)] {
		v := vs[i]
		if v.null {
			b.AppendNull()
			continue
		}
		switch d.kinds[i] {
		case colInt64:
			b.(*array.Int64Builder).Append(v.i)
		case colFloat32:
			b.(*array.Float32Builder).Append(float32(v.f))
		case colFloat64:
			b.(*array.Float64Builder).Append(v.f)
		case colString:
			b.(*array.StringBuilder).BinaryBuilder.Append(v.s)
		case colBool:
			b.(*array.BooleanBuilder).Append(v.i != 0)
		case colTimestamp:
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.i))
		}
	}
	return nil
}

func builderMatches(k colKind, b array.Builder) bool {
	switch k {
	case colInt64:
		_, ok := b.(*array.Int64Builder)
		return ok
	case colFloat32:
		_, ok := b.(*array.Float32Builder)
		return ok
	case colFloat64:
		_, ok := b.(*array.Float64Builder)
		return ok
	case colString:
		_, ok := b.(*array.StringBuilder)
		return ok
	case colBool:
		_, ok := b.(*array.BooleanBuilder)
		return ok
	case colTimestamp:
		_, ok := b.(*array.TimestampBuilder)
		return ok
	}
	return false
}

type value struct {
	null bool
	i    int64
	f    float64
	s    []byte
}

func (d *Decoder) fail(col int, format string, args ...any) error {
	return &Error{Field: d.names[col], Reason: fmt.Sprintf(format, args...)}
}

func (d *Decoder) convert(col int) (value, error) {
	s := &d.slots[col]
	if s.kind == jNone || s.kind == jNull {
		if d.nullable[col] {
			return value{null: true}, nil
		}
		if s.kind == jNone {
			return value{}, d.fail(col, "is missing (the field is not nullable)")
		}
		return value{}, d.fail(col, "must not be null (the field is not nullable)")
	}
	raw := d.p.bytes(s)
	switch d.kinds[col] {
	case colInt64:
		if s.kind != jNumber || !s.integer {
			return value{}, d.fail(col, "must be an integer (got %s)", describe(s.kind, raw))
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return value{}, d.fail(col, "must be an integer in int64 range (got %s)", describe(s.kind, raw))
		}
		return value{i: n}, nil
	case colFloat32, colFloat64:
		bits := 64
		if d.kinds[col] == colFloat32 {
			bits = 32
		}
		switch s.kind {
		case jNumber:
			f, err := strconv.ParseFloat(string(raw), bits)
			if err != nil {
				return value{}, d.fail(col, "number out of range for float%d (got %s)", bits, describe(s.kind, raw))
			}
			return value{f: f}, nil
		case jString:
			switch string(raw) {
			case "NaN":
				return value{f: math.NaN()}, nil
			case "+Inf":
				return value{f: math.Inf(1)}, nil
			case "-Inf":
				return value{f: math.Inf(-1)}, nil
			}
		}
		return value{}, d.fail(col, "must be a number (got %s)", describe(s.kind, raw))
	case colString:
		if s.kind != jString {
			return value{}, d.fail(col, "must be a string (got %s)", describe(s.kind, raw))
		}
		if !utf8.Valid(raw) {
			return value{}, d.fail(col, "must be valid UTF-8 (got %s)", describe(s.kind, raw))
		}
		return value{s: raw}, nil
	case colBool:
		switch s.kind {
		case jTrue:
			return value{i: 1}, nil
		case jFalse:
			return value{i: 0}, nil
		}
		return value{}, d.fail(col, "must be true or false (got %s)", describe(s.kind, raw))
	case colTimestamp:
		switch {
		case s.kind == jNumber && s.integer:
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return value{}, d.fail(col, "must be an integer in int64 range (got %s)", describe(s.kind, raw))
			}
			return value{i: n}, nil
		case s.kind == jString:
			t, err := time.Parse(time.RFC3339Nano, string(raw))
			if err != nil {
				return value{}, d.fail(col, "must be an RFC 3339 timestamp or an integer (got %s)", describe(s.kind, raw))
			}
			n, ok := FromTime(t, d.units[col])
			if !ok {
				return value{}, d.fail(col, "timestamp out of range for unit %s (got %s)", d.units[col], describe(s.kind, raw))
			}
			return value{i: n}, nil
		}
		return value{}, d.fail(col, "must be an RFC 3339 timestamp or an integer (got %s)", describe(s.kind, raw))
	}
	return value{}, d.fail(col, "unsupported column")
}

// FromTime converts t to a count of unit since the Unix epoch, truncating
// towards the past. ok is false when the result does not fit in an int64.
func FromTime(t time.Time, unit arrow.TimeUnit) (v int64, ok bool) {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	per := unitsPerSecond(unit)
	frac := ns / (int64(time.Second) / per)
	// sec*per + frac, with frac in [0, per), without intermediate overflow.
	if sec < 0 && frac > 0 {
		sec++
		frac -= per
	}
	m, ok := mulInt64(sec, per)
	if !ok {
		return 0, false
	}
	return addInt64(m, frac)
}

func unitsPerSecond(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1e3
	case arrow.Microsecond:
		return 1e6
	default:
		return 1e9
	}
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

func addInt64(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// describe names a JSON value for "got …" parts of messages.
func describe(k jkind, raw []byte) string {
	switch k {
	case jNull:
		return "null"
	case jTrue:
		return "true"
	case jFalse:
		return "false"
	case jNumber:
		return "number " + truncate(raw)
	case jString:
		return "string " + strconv.Quote(truncate(raw))
	case jArray:
		return "a list"
	case jObject:
		return "an object"
	}
	return "nothing"
}

func truncate(b []byte) string {
	const max = 40
	if len(b) <= max {
		return string(b)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

// ---- JSON scanning ----

type jkind uint8

const (
	jNone jkind = iota
	jNull
	jTrue
	jFalse
	jNumber
	jString
	jArray
	jObject
)

// slot is the value found for one column: its kind and where its text is
// (a number literal, or a string's decoded bytes in the line or in the
// parser's scratch buffer).
type slot struct {
	kind       jkind
	integer    bool
	scratch    bool
	start, end int
}

const maxDepth = 1000

type parser struct {
	b       []byte
	i       int
	scratch []byte
}

var errDepth = &Error{Reason: "invalid JSON: nesting too deep"}

func (p *parser) reset(b []byte) {
	p.b, p.i = b, 0
	p.scratch = p.scratch[:0]
}

func (p *parser) bytes(s *slot) []byte {
	if s.scratch {
		return p.scratch[s.start:s.end]
	}
	return p.b[s.start:s.end]
}

func (p *parser) syntax(what string) error {
	if p.i >= len(p.b) {
		return &Error{Reason: "invalid JSON: unexpected end of line, " + what}
	}
	return &Error{Reason: fmt.Sprintf("invalid JSON at byte %d: %s, got %s", p.i+1, what, quoteChar(p.b[p.i]))}
}

func quoteChar(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// object parses the whole line: one object and nothing after it.
func (p *parser) object(d *Decoder) error {
	p.ws()
	if p.i >= len(p.b) {
		return &Error{Reason: "empty line: expected a JSON object"}
	}
	if p.b[p.i] != '{' {
		var s slot
		if err := p.value(&s, 0); err != nil {
			return err
		}
		return &Error{Reason: "must be a JSON object (got " + describe(s.kind, p.bytes(&s)) + ")"}
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return p.syntax("expected a string key")
			}
			var key slot
			if err := p.str(&key); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return p.syntax("expected ':'")
			}
			p.i++
			p.ws()
			col, known := d.index[string(p.bytes(&key))]
			if known {
				if err := p.value(&d.slots[col], 1); err != nil {
					return err
				}
			} else {
				var skip slot
				if err := p.value(&skip, 1); err != nil {
					return err
				}
			}
			p.ws()
			if p.i >= len(p.b) {
				return p.syntax("expected ',' or '}'")
			}
			if p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.b[p.i] == '}' {
				p.i++
				break
			}
			return p.syntax("expected ',' or '}'")
		}
	}
	p.ws()
	if p.i < len(p.b) {
		return p.syntax("expected end of line after the object")
	}
	return nil
}

// value parses one JSON value at p.i (after whitespace) into s.
func (p *parser) value(s *slot, depth int) error {
	if p.i >= len(p.b) {
		return p.syntax("expected a value")
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str(s)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(s)
	case c == '{':
		*s = slot{kind: jObject}
		return p.skipObject(depth + 1)
	case c == '[':
		*s = slot{kind: jArray}
		return p.skipArray(depth + 1)
	case c == 't':
		*s = slot{kind: jTrue}
		return p.literal("true")
	case c == 'f':
		*s = slot{kind: jFalse}
		return p.literal("false")
	case c == 'n':
		*s = slot{kind: jNull}
		return p.literal("null")
	}
	return p.syntax("expected a value")
}

func (p *parser) literal(lit string) error {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return p.syntax("expected " + lit)
	}
	p.i += len(lit)
	return nil
}

func (p *parser) skipObject(depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	p.i++ // '{'
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.syntax("expected a string key")
		}
		var key slot
		if err := p.str(&key); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.syntax("expected ':'")
		}
		p.i++
		p.ws()
		var v slot
		if err := p.value(&v, depth); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) {
			return p.syntax("expected ',' or '}'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.syntax("expected ',' or '}'")
		}
	}
}

func (p *parser) skipArray(depth int) error {
	if depth > maxDepth {
		return errDepth
	}
	p.i++ // '['
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		p.ws()
		var v slot
		if err := p.value(&v, depth); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) {
			return p.syntax("expected ',' or ']'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.syntax("expected ',' or ']'")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) number(s *slot) error {
	start := p.i
	integer := true
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	default:
		return p.syntax("expected a digit")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		integer = false
		p.i++
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return p.syntax("expected a digit after '.'")
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return p.syntax("expected a digit in the exponent")
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	*s = slot{kind: jNumber, integer: integer, start: start, end: p.i}
	return nil
}

// str parses a string at p.i (on the opening quote). Strings without
// escapes point into the line; others are decoded into scratch.
func (p *parser) str(s *slot) error {
	p.i++ // '"'
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			*s = slot{kind: jString, start: start, end: p.i}
			p.i++
			return nil
		}
		if c == '\\' {
			return p.strEscaped(s, start)
		}
		if c < 0x20 {
			return p.syntax("control character in string")
		}
		p.i++
	}
	return p.syntax("unterminated string")
}

func (p *parser) strEscaped(s *slot, start int) error {
	sstart := len(p.scratch)
	p.scratch = append(p.scratch, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			*s = slot{kind: jString, scratch: true, start: sstart, end: len(p.scratch)}
			p.i++
			return nil
		case c < 0x20:
			return p.syntax("control character in string")
		case c != '\\':
			p.scratch = append(p.scratch, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			return p.syntax("unterminated string")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			p.scratch = append(p.scratch, e)
		case 'b':
			p.scratch = append(p.scratch, '\b')
		case 'f':
			p.scratch = append(p.scratch, '\f')
		case 'n':
			p.scratch = append(p.scratch, '\n')
		case 'r':
			p.scratch = append(p.scratch, '\r')
		case 't':
			p.scratch = append(p.scratch, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return p.syntax("expected 4 hex digits after \\u")
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by a low one is one rune;
				// anything else is U+FFFD, as in encoding/json.
				if r < 0xdc00 && p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return p.syntax("expected 4 hex digits after \\u")
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						p.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			p.scratch = utf8.AppendRune(p.scratch, r)
		default:
			p.i--
			return p.syntax("invalid escape")
		}
	}
	return p.syntax("unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// IsBlank reports whether a line holds only JSON whitespace.
func IsBlank(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}
