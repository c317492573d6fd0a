package arrowjson

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects in one value, as
// serde_json's default recursion limit (128) bounds ArkFlow's parser.
const maxDepth = 128

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt   // integer literal in int64 range
	kFloat // any other number
	kStr
	kArr
	kObj
)

// node is one parsed JSON value. Objects keep their keys in order of first
// appearance with duplicate keys collapsed (the last value wins), as
// serde_json with preserve_order does.
type node struct {
	k    kind
	b    bool
	i    int64
	f    float64
	s    string // string value; number literal for kInt and kFloat
	arr  []node
	keys []string
	vals []node
}

// describe names the JSON type of n for error messages.
func (n *node) describe() string {
	switch n.k {
	case kNull:
		return "null"
	case kBool:
		return "a boolean"
	case kInt, kFloat:
		return "a number"
	case kStr:
		return "a string"
	case kArr:
		return "an array"
	default:
		return "an object"
	}
}

type parser struct {
	data []byte
	pos  int
	path []string // keys ("[]" for array elements) down to the current value
	sh   *shared
}

// shared is what the parses of one batch's rows share: the keys seen (a
// row's keys are mostly the row before's, so each is allocated once) and
// the number of keys of the last top-level object, to size the next.
type shared struct {
	keys  map[string]string
	width int
	// literals keeps each number's text in node.s (Debezium's decoding
	// writes integers beyond int64 as they were written).
	literals bool
}

// maxInterned bounds the keys a batch's parses keep.
const maxInterned = 4096

// parseValue parses data as exactly one JSON value (surrounding whitespace
// allowed), keeping numbers' text. Invalid UTF-8, lone surrogate escapes,
// numbers beyond float64 and nesting deeper than maxDepth are errors.
func parseValue(data []byte) (node, error) {
	return parseShared(&shared{literals: true}, data)
}

// parseAll parses data as JSON values one after the other, separated by
// whitespace (newline-delimited JSON, or one value): ArkFlow joins the
// payloads of a batch with newlines and reads them so. Only whitespace
// gives none.
func parseAll(sh *shared, data []byte) ([]node, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid JSON: not valid UTF-8")
	}
	p := parser{data: data, sh: sh}
	var out []node
	for {
		p.skipSpace()
		if p.pos == len(data) {
			return out, nil
		}
		n, err := p.value(0)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
}

// parseShared is parseValue for one of several values sharing sh.
func parseShared(sh *shared, data []byte) (node, error) {
	if !utf8.Valid(data) {
		return node{}, errors.New("invalid JSON: not valid UTF-8")
	}
	p := parser{data: data, sh: sh}
	p.skipSpace()
	if p.pos == len(data) {
		return node{}, errors.New("invalid JSON: empty value")
	}
	n, err := p.value(0)
	if err != nil {
		return node{}, err
	}
	p.skipSpace()
	if p.pos != len(data) {
		return node{}, p.errorf("trailing data after the JSON value")
	}
	return n, nil
}

// errorf reports a syntax error at p.pos, naming the field it is in (as
// inference names fields: "a.b", "l[]") when it is inside one.
func (p *parser) errorf(format string, args ...any) error {
	msg := fmt.Sprintf("invalid JSON at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
	if len(p.path) == 0 {
		return errors.New(msg)
	}
	var field strings.Builder
	for i, k := range p.path {
		if i > 0 && k != "[]" {
			field.WriteByte('.')
		}
		field.WriteString(k)
	}
	return fmt.Errorf("field %q: %s", field.String(), msg)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (node, error) {
	if p.pos >= len(p.data) {
		return node{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return node{}, p.errorf("nesting deeper than %d levels", maxDepth)
		}
		if c == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return node{k: kStr, s: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range [...]struct {
		text string
		n    node
	}{{"true", node{k: kBool, b: true}}, {"false", node{k: kBool}}, {"null", node{}}} {
		if len(p.data)-p.pos >= len(lit.text) && string(p.data[p.pos:p.pos+len(lit.text)]) == lit.text {
			p.pos += len(lit.text)
			return lit.n, nil
		}
	}
	return node{}, p.errorf("unexpected character %q", rune(p.data[p.pos]))
}

func (p *parser) object(depth int) (node, error) {
	p.pos++ // '{'
	n := node{k: kObj}
	if depth == 1 && p.sh.width > 0 {
		n.keys, n.vals = make([]string, 0, p.sh.width), make([]node, 0, p.sh.width)
		defer func() { p.sh.width = len(n.keys) }()
	} else if depth == 1 {
		defer func() { p.sh.width = len(n.keys) }()
	}
	var index map[string]int
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return node{}, p.errorf("expected a string key")
		}
		key, err := p.key()
		if err != nil {
			return node{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return node{}, p.errorf("expected ':' after an object key")
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, key)
		v, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return node{}, err
		}
		if index == nil && len(n.keys) >= 8 {
			index = make(map[string]int, 16)
			for i, k := range n.keys {
				index[k] = i
			}
		}
		if i, dup := lookupKey(n.keys, index, key); dup {
			n.vals[i] = v
		} else {
			if index != nil {
				index[key] = len(n.keys)
			}
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, v)
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unexpected end of input in an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or '}' in an object")
		}
	}
}

func lookupKey(keys []string, index map[string]int, key string) (int, bool) {
	if index != nil {
		i, ok := index[key]
		return i, ok
	}
	for i, k := range keys {
		if k == key {
			return i, true
		}
	}
	return 0, false
}

func (p *parser) array(depth int) (node, error) {
	p.pos++ // '['
	n := node{k: kArr}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	for {
		p.skipSpace()
		p.path = append(p.path, "[]")
		v, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return node{}, err
		}
		n.arr = append(n.arr, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return node{}, p.errorf("unexpected end of input in an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return n, nil
		default:
			return node{}, p.errorf("expected ',' or ']' in an array")
		}
	}
}

// number parses a JSON number. An integer literal (no fraction, no
// exponent) in int64 range is kInt; everything else is kFloat, including
// "-0" and integers beyond int64, as serde_json classifies them (arrow-json
// then infers Float64 for them).
func (p *parser) number() (node, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(p.data) {
		return node{}, p.errorf("unexpected end of input in a number")
	}
	if p.data[p.pos] == '0' {
		p.pos++
	} else if d := p.data[p.pos]; d >= '1' && d <= '9' {
		p.digits()
	} else {
		return node{}, p.errorf("invalid number")
	}
	isInt := true
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		isInt = false
		p.pos++
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number: no digits after '.'")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		isInt = false
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return node{}, p.errorf("invalid number: no digits in the exponent")
		}
	}
	raw := p.data[start:p.pos]
	var lit string
	if p.sh.literals {
		lit = string(raw)
	}
	if isInt && string(raw) != "-0" {
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return node{k: kInt, i: i, s: lit}, nil
		}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && (math.IsInf(f, 0) || !errors.Is(err, strconv.ErrRange)) {
		p.pos = start
		lit = string(raw)
		if len(lit) > 40 {
			lit = lit[:40] + "…"
		}
		return node{}, p.errorf("number %s out of range", lit)
	}
	return node{k: kFloat, f: f, s: lit}, nil
}

// key parses an object key: a string, interned when it has no escapes.
func (p *parser) key() (string, error) {
	start := p.pos + 1
	for i := start; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '"':
			if k, ok := p.sh.keys[string(p.data[start:i])]; ok {
				p.pos = i + 1
				return k, nil
			}
			k, err := p.str()
			if err == nil && p.sh.keys != nil && len(p.sh.keys) < maxInterned {
				p.sh.keys[k] = k
			}
			return k, err
		case c == '\\' || c < 0x20:
			return p.str()
		}
	}
	return p.str()
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// str parses a JSON string; p.pos is at the opening quote.
func (p *parser) str() (string, error) {
	p.pos++
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character in a string")
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		var err error
		if buf, err = p.escape(buf); err != nil {
			return "", err
		}
	}
	return "", p.errorf("unterminated string")
}

var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape decodes the escape sequence at p.pos (a backslash) onto buf.
func (p *parser) escape(buf []byte) ([]byte, error) {
	if p.pos+1 >= len(p.data) {
		return nil, p.errorf("unterminated string")
	}
	c := p.data[p.pos+1]
	if r, ok := simpleEscapes[c]; ok {
		p.pos += 2
		return append(buf, r), nil
	}
	if c != 'u' {
		return nil, p.errorf("invalid escape \\%c", c)
	}
	r, err := p.hex4(p.pos + 2)
	if err != nil {
		return nil, err
	}
	if utf16.IsSurrogate(r) {
		next := p.pos + 6
		if r >= 0xDC00 || next+1 >= len(p.data) || p.data[next] != '\\' || p.data[next+1] != 'u' {
			return nil, p.errorf("lone surrogate in a \\u escape")
		}
		r2, err := p.hex4(next + 2)
		if err != nil {
			return nil, err
		}
		if r2 < 0xDC00 || r2 > 0xDFFF {
			return nil, p.errorf("lone surrogate in a \\u escape")
		}
		p.pos += 6
		r = utf16.DecodeRune(r, r2)
	}
	p.pos += 6
	return utf8.AppendRune(buf, r), nil
}

func (p *parser) hex4(at int) (rune, error) {
	if at+4 > len(p.data) {
		return 0, p.errorf("truncated \\u escape")
	}
	v, err := strconv.ParseUint(string(p.data[at:at+4]), 16, 32)
	if err != nil {
		return 0, p.errorf("invalid \\u escape")
	}
	return rune(v), nil
}
