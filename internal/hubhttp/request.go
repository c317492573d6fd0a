package hubhttp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Header names.
const (
	HeaderIfMatch        = "If-Match"
	HeaderETag           = "ETag"
	HeaderIdempotencyKey = "Idempotency-Key"
)

// ParseGeneration parses an If-Match value: "generation-N" with or
// without the double quotes, N a decimal int64 >= 0, spaces around the
// value ignored. Lists, weak tags (W/"..."), "*" and unbalanced quotes
// are errors.
func ParseGeneration(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, `"`) || strings.HasSuffix(s, `"`) {
		if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
			return 0, errors.New(`unbalanced quotes`)
		}
		s = s[1 : len(s)-1]
	}
	n, ok := strings.CutPrefix(s, "generation-")
	if !ok {
		return 0, errors.New(`not of the form "generation-N"`)
	}
	if n == "" || len(n) > 19 {
		return 0, errors.New("generation is not a number")
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return 0, errors.New("generation is not a number")
		}
	}
	g, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return 0, errors.New("generation out of range")
	}
	return g, nil
}

// IfMatch returns the expected generation of r's If-Match header.
// present is false when the header is absent or empty (no
// precondition). A malformed value is a 422 validation_failed envelope
// naming If-Match (ArkFlow answers a bad header value the same way).
func IfMatch(r *http.Request) (gen int64, present bool, e *Error) {
	vals := r.Header.Values(HeaderIfMatch)
	if len(vals) == 0 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == "") {
		return 0, false, nil
	}
	if len(vals) > 1 {
		return 0, false, ValidationFailed(HeaderIfMatch, `If-Match must be one "generation-N"`)
	}
	g, err := ParseGeneration(vals[0])
	if err != nil {
		return 0, false, ValidationFailed(HeaderIfMatch, `If-Match must be "generation-N": `+err.Error())
	}
	return g, true, nil
}

// FormatETag returns `"generation-N"`, quotes included.
func FormatETag(gen int64) string { return `"generation-` + strconv.FormatInt(gen, 10) + `"` }

// SetETag sets the ETag response header to FormatETag(gen).
func SetETag(w http.ResponseWriter, gen int64) { w.Header().Set(HeaderETag, FormatETag(gen)) }

// MaxIdempotencyKeyLen bounds an Idempotency-Key.
const MaxIdempotencyKeyLen = 255

// IdempotencyKey returns r's Idempotency-Key, "" when absent. A key
// longer than MaxIdempotencyKeyLen or with bytes outside printable
// ASCII (spaces allowed inside) is a 422 validation_failed envelope.
func IdempotencyKey(r *http.Request) (string, *Error) {
	vals := r.Header.Values(HeaderIdempotencyKey)
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 {
		return "", ValidationFailed(HeaderIdempotencyKey, "Idempotency-Key given more than once")
	}
	k := strings.TrimSpace(vals[0])
	if len(k) > MaxIdempotencyKeyLen {
		return "", ValidationFailed(HeaderIdempotencyKey, fmt.Sprintf("Idempotency-Key longer than %d bytes", MaxIdempotencyKeyLen))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", ValidationFailed(HeaderIdempotencyKey, "Idempotency-Key must be printable ASCII")
		}
	}
	return k, nil
}

// Paging defaults and bounds (§A.0).
const (
	DefaultPage     = 1
	DefaultPageSize = 50
	MaxPageSize     = 100
	// MaxPage caps ?page so that the offset cannot overflow.
	MaxPage = math.MaxInt32
)

// Paging is a parsed ?page and ?page_size.
type Paging struct {
	Page     int
	PageSize int
}

// Offset is the number of items before the page.
func (p Paging) Offset() int64 { return int64(p.Page-1) * int64(p.PageSize) }

// ParsePaging reads ?page (default 1; below 1 becomes 1) and ?page_size
// (default 50, clamped to 1..100), as ArkFlow does. A value that is not
// an integer is 400 invalid_query naming the parameter.
func ParsePaging(r *http.Request) (Paging, *Error) {
	q := r.URL.Query()
	p := Paging{Page: DefaultPage, PageSize: DefaultPageSize}
	for _, f := range []struct {
		name string
		dst  *int
		min  int
		max  int
	}{{"page", &p.Page, 1, MaxPage}, {"page_size", &p.PageSize, 1, MaxPageSize}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			if ne, ok := errors.AsType[*strconv.NumError](err); ok && ne.Err == strconv.ErrRange {
				n = math.MaxInt64
				if strings.HasPrefix(strings.TrimSpace(v), "-") {
					n = math.MinInt64
				}
			} else {
				return Paging{}, InvalidQuery(f.name, f.name+" must be an integer")
			}
		}
		*f.dst = int(max(int64(f.min), min(int64(f.max), n)))
	}
	return p, nil
}

// Page is the paged list reply {items, page, page_size, total}.
type Page[T any] struct {
	Items    []T   `json:"items"`
	Page     int   `json:"page"`
	PageSize int   `json:"page_size"`
	Total    int64 `json:"total"`
}

// NewPage returns the reply for items of page p out of total; nil items
// become [] so the JSON never says null.
func NewPage[T any](p Paging, items []T, total int64) Page[T] {
	if items == nil {
		items = []T{}
	}
	return Page[T]{Items: items, Page: p.Page, PageSize: p.PageSize, Total: total}
}

// MaxBodyBytes is the Hub's request body limit (ArkFlow's 4 MiB).
const MaxBodyBytes = 4 << 20

// DecodeJSON reads r's body as one JSON value into v. Unknown fields are
// ignored, as serde does on ArkFlow's side: a v1 Agent or client that
// sends a field we do not model (a newer software_version, rollout_id,
// …) keeps working. Use DecodeJSONStrict where a misspelt field would
// otherwise be silently dropped from an operator mutation.
//
// The body is limited to MaxBodyBytes (413 payload_too_large); the
// Content-Type must be absent or JSON (415); an empty, malformed or
// trailing-data body is 400 invalid_body; a value of the wrong type is
// 422 validation_failed naming the field's JSON path.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) *Error {
	return decodeJSON(w, r, v, false)
}

// DecodeJSONStrict is DecodeJSON that also refuses unknown fields (422
// validation_failed naming the field).
func DecodeJSONStrict(w http.ResponseWriter, r *http.Request, v any) *Error {
	return decodeJSON(w, r, v, true)
}

// DecodeOptionalJSONStrict is DecodeJSONStrict for a route whose body is
// optional: an absent or all-white-space body leaves v as it is and
// returns false, anything else is decoded strictly (an unknown field is
// 422 validation_failed naming it, never ignored) and returns true.
func DecodeOptionalJSONStrict(w http.ResponseWriter, r *http.Request, v any) (bool, *Error) {
	if r.Body == nil {
		return false, nil
	}
	body := bufio.NewReader(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	for {
		b, err := body.ReadByte()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, jsonError(err)
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			_ = body.UnreadByte()
			break
		}
	}
	if e := checkContentType(r); e != nil {
		return true, e
	}
	return true, decodeFrom(body, v, true)
}

// checkContentType refuses a body whose Content-Type is set and not JSON.
func checkContentType(r *http.Request) *Error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return NewError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type must be application/json")
		}
	}
	return nil
}

func decodeJSON(w http.ResponseWriter, r *http.Request, v any, strict bool) *Error {
	if e := checkContentType(r); e != nil {
		return e
	}
	if r.Body == nil {
		return InvalidBody("request body is empty")
	}
	return decodeFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes), v, strict)
}

// decodeFrom decodes exactly one JSON value from body into v.
func decodeFrom(body io.Reader, v any, strict bool) *Error {
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// Exactly one value: anything but white space after it is an error.
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			if e := jsonError(err); e.Status == http.StatusRequestEntityTooLarge {
				return e
			}
		}
		return InvalidBody("request body holds more than one JSON value")
	}
	return nil
}

func jsonError(err error) *Error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return NewError(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		return ValidationFailed(field, fmt.Sprintf("%s: expected %s, got JSON %s", orBody(field), te.Type, te.Value))
	}
	if errors.Is(err, io.EOF) {
		return InvalidBody("request body is empty")
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return ValidationFailed(f, "unknown field "+strconv.Quote(f))
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return InvalidBody(fmt.Sprintf("request body is not valid JSON (offset %d)", se.Offset))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return InvalidBody("request body is truncated JSON")
	}
	return InvalidBody("request body is not valid JSON")
}

func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}
