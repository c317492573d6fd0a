package expr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokInt
	tokFloat
	tokString
	tokIdent       // bare identifier (also function names)
	tokQuotedIdent // `backquoted identifier`, always a column
	tokAnd         // and, &&
	tokOr          // or, ||
	tokNot         // not, !
	tokIs
	tokIn
	tokNull
	tokTrue
	tokFalse
	tokEq // ==, =
	tokNe // !=, <>
	tokLt
	tokLe
	tokGt
	tokGe
	tokPlus
	tokMinus
	tokStar
	tokSlash
	tokPercent
	tokLParen
	tokRParen
	tokComma
)

// token is one lexical token. pos and end are byte offsets into the source;
// val holds the decoded text of identifiers and string literals and the raw
// text of numbers.
type token struct {
	kind     tokKind
	pos, end int
	val      string
}

var keywords = map[string]tokKind{
	"and":   tokAnd,
	"or":    tokOr,
	"not":   tokNot,
	"is":    tokIs,
	"in":    tokIn,
	"null":  tokNull,
	"true":  tokTrue,
	"false": tokFalse,
}

// describe returns how the token is shown in error messages.
func (t token) describe(src string) string {
	if t.kind == tokEOF {
		return "end of expression"
	}
	return strconv.Quote(src[t.pos:t.end])
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// lex splits src into tokens, ending with a tokEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
			i++
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: len(src), end: len(src)}), nil
		}
		start := i
		c := src[i]
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			word := src[start:i]
			kind := tokIdent
			if kw, ok := keywords[strings.ToLower(word)]; ok {
				kind = kw
			}
			toks = append(toks, token{kind: kind, pos: start, end: i, val: word})
			continue
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			tok, err := lexNumber(src, start)
			if err != nil {
				return nil, err
			}
			toks = append(toks, tok)
			i = tok.end
			continue
		case c == '\'' || c == '"' || c == '`':
			val, end, ok := lexQuoted(src, start)
			if !ok {
				what := "string literal"
				if c == '`' {
					what = "quoted identifier"
				}
				return nil, errorAt(src, start, "unterminated %s", what)
			}
			kind := tokString
			if c == '`' {
				if val == "" {
					return nil, errorAt(src, start, "empty quoted identifier")
				}
				kind = tokQuotedIdent
			}
			toks = append(toks, token{kind: kind, pos: start, end: end, val: val})
			i = end
			continue
		}
		kind, size := lexOperator(src[i:])
		if size == 0 {
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, errorAt(src, start, "unexpected character %q", r)
		}
		i += size
		toks = append(toks, token{kind: kind, pos: start, end: i})
	}
}

// lexOperator recognizes the punctuation token at the start of s, returning
// its kind and length in bytes, or size 0 if there is none.
func lexOperator(s string) (tokKind, int) {
	if len(s) >= 2 {
		switch s[:2] {
		case "==":
			return tokEq, 2
		case "!=", "<>":
			return tokNe, 2
		case "<=":
			return tokLe, 2
		case ">=":
			return tokGe, 2
		case "&&":
			return tokAnd, 2
		case "||":
			return tokOr, 2
		}
	}
	switch s[0] {
	case '=':
		return tokEq, 1
	case '<':
		return tokLt, 1
	case '>':
		return tokGt, 1
	case '!':
		return tokNot, 1
	case '+':
		return tokPlus, 1
	case '-':
		return tokMinus, 1
	case '*':
		return tokStar, 1
	case '/':
		return tokSlash, 1
	case '%':
		return tokPercent, 1
	case '(':
		return tokLParen, 1
	case ')':
		return tokRParen, 1
	case ',':
		return tokComma, 1
	}
	return tokEOF, 0
}

// lexNumber scans an integer (123) or float (1.5, 1., .5, 1e3, 2.5E-3) at
// src[start:]. The value is parsed later, by the parser, so that a leading
// minus sign can be taken into account.
func lexNumber(src string, start int) (token, error) {
	i := start
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	kind := tokInt
	if i < len(src) && src[i] == '.' {
		kind = tokFloat
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		kind = tokFloat
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return token{}, errorAt(src, start, "malformed number %q: missing exponent digits", src[start:i])
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (isIdentChar(src[i]) || src[i] == '.') {
		end := i
		for end < len(src) && (isIdentChar(src[end]) || src[end] == '.') {
			end++
		}
		return token{}, errorAt(src, start, "malformed number %q", src[start:end])
	}
	return token{kind: kind, pos: start, end: i, val: src[start:i]}, nil
}

// lexQuoted scans a literal delimited by the quote character at src[start];
// a doubled quote inside stands for one quote. It returns the decoded text
// and the end offset, or ok=false if the closing quote is missing.
func lexQuoted(src string, start int) (val string, end int, ok bool) {
	q := src[start]
	var b strings.Builder
	i := start + 1
	for {
		j := strings.IndexByte(src[i:], q)
		if j < 0 {
			return "", 0, false
		}
		j += i
		if j+1 < len(src) && src[j+1] == q {
			b.WriteString(src[i : j+1])
			i = j + 2
			continue
		}
		if b.Len() == 0 {
			return src[i:j], j + 1, true
		}
		b.WriteString(src[i:j])
		return b.String(), j + 1, true
	}
}
