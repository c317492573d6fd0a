package hubhttp

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestParseGeneration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{`"generation-0"`, 0, true},
		{`"generation-7"`, 7, true},
		{`generation-7`, 7, true},
		{`  "generation-42"  `, 42, true},
		{`generation-007`, 7, true},
		{`"generation-9223372036854775807"`, math.MaxInt64, true},
		{`"generation-9223372036854775808"`, 0, false},
		{`"generation-99999999999999999999"`, 0, false},
		{`"generation-"`, 0, false},
		{`"generation--1"`, 0, false},
		{`"generation-+1"`, 0, false},
		{`"generation-1 "`, 0, false},
		{`"generation-1x"`, 0, false},
		{`"generation-1`, 0, false},
		{`generation-1"`, 0, false},
		{`"`, 0, false},
		{`""`, 0, false},
		{`W/"generation-1"`, 0, false},
		{`*`, 0, false},
		{`"generation-1", "generation-2"`, 0, false},
		{`"Generation-1"`, 0, false},
		{`1`, 0, false},
		{`gen-1`, 0, false},
		{`"generation-١"`, 0, false}, // Arabic-Indic digit
	} {
		got, err := ParseGeneration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseGeneration(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestIfMatchHeader(t *testing.T) {
	r := httptest.NewRequest("PUT", "/", nil)
	if _, present, e := IfMatch(r); present || e != nil {
		t.Errorf("absent: %v %v", present, e)
	}
	r.Header.Set(HeaderIfMatch, "  ")
	if _, present, e := IfMatch(r); present || e != nil {
		t.Errorf("empty: %v %v", present, e)
	}
	r.Header.Set(HeaderIfMatch, `"generation-3"`)
	if g, present, e := IfMatch(r); g != 3 || !present || e != nil {
		t.Errorf("set: %d %v %v", g, present, e)
	}
	r.Header.Set(HeaderIfMatch, `"v3"`)
	if _, _, e := IfMatch(r); e == nil || e.Status != 422 || e.Code != CodeValidationFailed || e.Field != HeaderIfMatch {
		t.Errorf("malformed: %+v", e)
	}
	r.Header.Set(HeaderIfMatch, `"generation-3"`)
	r.Header.Add(HeaderIfMatch, `"generation-4"`)
	if _, _, e := IfMatch(r); e == nil || e.Status != 422 {
		t.Errorf("two headers: %+v", e)
	}
}

func TestETag(t *testing.T) {
	rec := httptest.NewRecorder()
	SetETag(rec, 12)
	if got := rec.Header().Get("ETag"); got != `"generation-12"` {
		t.Errorf("%q", got)
	}
	g, err := ParseGeneration(FormatETag(0))
	if err != nil || g != 0 {
		t.Errorf("round trip 0: %d %v", g, err)
	}
}

func FuzzParseGeneration(f *testing.F) {
	for _, s := range []string{`"generation-1"`, `generation-0`, `"generation-9223372036854775807"`, `W/"x"`, `*`, `"`, `"generation-1", "generation-2"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGeneration(s)
		if err != nil {
			if g != 0 {
				t.Fatalf("error with generation %d", g)
			}
			return
		}
		if g < 0 {
			t.Fatalf("negative generation %d from %q", g, s)
		}
		// What parses is "generation-<digits>", optionally quoted and
		// padded, and the ETag of the result parses back to it.
		core := strings.Trim(strings.TrimSpace(s), `"`)
		n, ok := strings.CutPrefix(core, "generation-")
		if !ok {
			t.Fatalf("accepted %q", s)
		}
		if v, err := strconv.ParseInt(n, 10, 64); err != nil || v != g {
			t.Fatalf("%q: %d, digits say %d %v", s, g, v, err)
		}
		if g2, err := ParseGeneration(FormatETag(g)); err != nil || g2 != g {
			t.Fatalf("ETag round trip of %d: %d %v", g, g2, err)
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
		bad  bool
	}{
		{nil, "", false},
		{[]string{"key-1"}, "key-1", false},
		{[]string{" key 1 "}, "key 1", false},
		{[]string{strings.Repeat("k", MaxIdempotencyKeyLen)}, strings.Repeat("k", MaxIdempotencyKeyLen), false},
		{[]string{strings.Repeat("k", MaxIdempotencyKeyLen+1)}, "", true},
		{[]string{"a\x00b"}, "", true},
		{[]string{"ключ"}, "", true},
		{[]string{"a", "b"}, "", true},
	} {
		r := httptest.NewRequest("PUT", "/", nil)
		for _, v := range tc.in {
			r.Header.Add(HeaderIdempotencyKey, v)
		}
		got, e := IdempotencyKey(r)
		if tc.bad {
			if e == nil || e.Status != 422 || e.Field != HeaderIdempotencyKey {
				t.Errorf("%q: %+v", tc.in, e)
			}
			continue
		}
		if e != nil || got != tc.want {
			t.Errorf("%q: %q %v", tc.in, got, e)
		}
	}
}

func TestParsePaging(t *testing.T) {
	for _, tc := range []struct {
		query      string
		page, size int
		bad        string
	}{
		{"", 1, 50, ""},
		{"page=3&page_size=20", 3, 20, ""},
		{"page=0", 1, 50, ""},
		{"page=-5", 1, 50, ""},
		{"page_size=0", 1, 1, ""},
		{"page_size=-1", 1, 1, ""},
		{"page_size=101", 1, 100, ""},
		{"page_size=100", 1, 100, ""},
		{"page_size=1", 1, 1, ""},
		{"page_size=99999999999999999999999", 1, 100, ""},
		{"page=99999999999999999999999", MaxPage, 50, ""},
		{"page=-99999999999999999999999", 1, 50, ""},
		{"page=x", 0, 0, "page"},
		{"page_size=1.5", 0, 0, "page_size"},
		{"page=", 1, 50, ""},
	} {
		r := httptest.NewRequest("GET", "/api/v1/nodes?"+tc.query, nil)
		p, e := ParsePaging(r)
		if tc.bad != "" {
			if e == nil || e.Status != 400 || e.Code != CodeInvalidQuery || e.Field != tc.bad {
				t.Errorf("%q: %+v", tc.query, e)
			}
			continue
		}
		if e != nil || p.Page != tc.page || p.PageSize != tc.size {
			t.Errorf("%q: %+v %v; want page %d size %d", tc.query, p, e, tc.page, tc.size)
		}
	}
	if off := (Paging{Page: MaxPage, PageSize: MaxPageSize}).Offset(); off != int64(MaxPage-1)*MaxPageSize {
		t.Errorf("offset %d", off)
	}
	if off := (Paging{Page: 3, PageSize: 20}).Offset(); off != 40 {
		t.Errorf("offset %d", off)
	}
}

func TestNewPageJSON(t *testing.T) {
	b, _ := json.Marshal(NewPage[int](Paging{Page: 2, PageSize: 10}, nil, 5))
	if string(b) != `{"items":[],"page":2,"page_size":10,"total":5}` {
		t.Errorf("%s", b)
	}
}

type inner struct {
	Count int `json:"count"`
}

type body struct {
	State  string   `json:"state"`
	Inner  inner    `json:"inner"`
	Nodes  []string `json:"node_ids"`
	Gen    int64    `json:"generation"`
	Action *string  `json:"action_id,omitempty"`
}

func decode(t *testing.T, strict bool, ct string, payload []byte) (body, *Error, *httptest.ResponseRecorder) {
	t.Helper()
	r := httptest.NewRequest("POST", "/", bytes.NewReader(payload))
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	var b body
	var e *Error
	if strict {
		e = DecodeJSONStrict(rec, r, &b)
	} else {
		e = DecodeJSON(rec, r, &b)
	}
	return b, e, rec
}

func TestDecodeJSON(t *testing.T) {
	b, e, _ := decode(t, false, "application/json", []byte(`{"state":"running","inner":{"count":2},"node_ids":["a"],"generation":3}`))
	if e != nil || b.State != "running" || b.Inner.Count != 2 || b.Gen != 3 {
		t.Fatalf("%+v %v", b, e)
	}
	// Lenient: fields a v1 peer sends that we do not model are ignored.
	b, e, _ = decode(t, false, "", []byte(`{"state":"stopped","software_version":"0.9","rollout_id":null}`))
	if e != nil || b.State != "stopped" {
		t.Fatalf("lenient: %+v %v", b, e)
	}
	for _, tc := range []struct {
		name    string
		strict  bool
		ct      string
		payload string
		status  int
		code    string
		field   string
	}{
		{"strict unknown field", true, "application/json", `{"state":"x","sate":"y"}`, 422, CodeValidationFailed, "sate"},
		{"type error", false, "application/json", `{"state":1}`, 422, CodeValidationFailed, "state"},
		{"nested type error", false, "application/json", `{"inner":{"count":"two"}}`, 422, CodeValidationFailed, "inner.count"},
		{"array element type", false, "application/json", `{"node_ids":[1]}`, 422, CodeValidationFailed, "node_ids"},
		{"overflow", false, "application/json", `{"generation":1e30}`, 422, CodeValidationFailed, "generation"},
		{"wrong top-level type", false, "application/json", `[1,2]`, 422, CodeValidationFailed, ""},
		{"syntax", false, "application/json", `{"state":`, 400, CodeInvalidBody, ""},
		{"garbage", false, "application/json", `{"state" "x"}`, 400, CodeInvalidBody, ""},
		{"empty", false, "application/json", ``, 400, CodeInvalidBody, ""},
		{"trailing value", false, "application/json", `{"state":"x"} {"state":"y"}`, 400, CodeInvalidBody, ""},
		{"trailing garbage", false, "application/json", `{"state":"x"} x`, 400, CodeInvalidBody, ""},
		{"form body", false, "application/x-www-form-urlencoded", `state=x`, 415, CodeUnsupportedMediaType, ""},
		{"text", false, "text/plain", `{}`, 415, CodeUnsupportedMediaType, ""},
		{"bad content type", false, ";;", `{}`, 415, CodeUnsupportedMediaType, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e, _ := decode(t, tc.strict, tc.ct, []byte(tc.payload))
			if e == nil || e.Status != tc.status || e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("got %+v, want %d %s field %q", e, tc.status, tc.code, tc.field)
			}
		})
	}
	for _, ct := range []string{"application/json; charset=utf-8", "application/merge-patch+json"} {
		if _, e, _ := decode(t, false, ct, []byte(`{}`)); e != nil {
			t.Errorf("%s: %v", ct, e)
		}
	}
	if _, e, _ := decode(t, false, "", []byte("{}\n\t ")); e != nil {
		t.Errorf("trailing white space: %v", e)
	}
}

func TestDecodeJSONBodyLimit(t *testing.T) {
	pad := func(n int) []byte {
		return []byte(`{"state":"` + strings.Repeat("x", n-len(`{"state":""}`)) + `"}`)
	}
	if _, e, _ := decode(t, false, "", pad(MaxBodyBytes)); e != nil {
		t.Errorf("exactly the limit: %v", e)
	}
	_, e, _ := decode(t, false, "", pad(MaxBodyBytes+1))
	if e == nil || e.Status != http.StatusRequestEntityTooLarge || e.Code != CodePayloadTooLarge {
		t.Errorf("over the limit: %+v", e)
	}
	// A value within the limit followed by white space past it.
	over := append([]byte(`{"state":"x"}`), bytes.Repeat([]byte(" "), MaxBodyBytes)...)
	if _, e, _ := decode(t, false, "", over); e == nil || e.Status != 413 {
		t.Errorf("trailing past the limit: %+v", e)
	}
}

func TestDecodeJSONOverHTTP(t *testing.T) {
	h := Correlation(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b body
		if e := DecodeJSONStrict(w, r, &b); e != nil {
			WriteError(w, r, e)
			return
		}
		w.WriteHeader(204)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"stat":"running"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 422 || e.Field != "stat" || e.CorrelationID == "" || e.CorrelationID != resp.Header.Get(HeaderCorrelationID) {
		t.Errorf("%d %+v", resp.StatusCode, e)
	}
	big := bytes.Repeat([]byte("a"), MaxBodyBytes+10)
	resp2, err := http.Post(srv.URL, "application/json", bytes.NewReader(append(append([]byte(`{"state":"`), big...), '"', '}')))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if resp2.StatusCode != 413 {
		t.Errorf("big body over HTTP: %d", resp2.StatusCode)
	}
}

// An optional body: absent or white space is no body (v untouched); one
// present is decoded strictly, so a misspelt field is refused, not lost.
func TestDecodeOptionalJSONStrict(t *testing.T) {
	for _, tc := range []struct {
		name, ct, payload string
		present           bool
		state             string
		status            int
		code, field       string
	}{
		{"absent", "", "", false, "kept", 0, "", ""},
		{"white space", "application/json", " \n\t ", false, "kept", 0, "", ""},
		{"white space, any content type", "text/plain", "\r\n", false, "kept", 0, "", ""},
		{"empty object", "application/json", "{}", true, "kept", 0, "", ""},
		{"a field", "", ` {"state":"x"}`, true, "x", 0, "", ""},
		{"unknown field", "application/json", `{"sate":"x"}`, true, "kept", 422, CodeValidationFailed, "sate"},
		{"not JSON", "application/json", `{"state":`, true, "kept", 400, CodeInvalidBody, ""},
		{"two values", "application/json", `{} {}`, true, "kept", 400, CodeInvalidBody, ""},
		{"not a JSON content type", "text/plain", `{}`, true, "kept", 415, CodeUnsupportedMediaType, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tc.payload))
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			b := body{State: "kept"}
			present, e := DecodeOptionalJSONStrict(httptest.NewRecorder(), r, &b)
			if present != tc.present || b.State != tc.state {
				t.Errorf("present %v state %q, want %v %q", present, b.State, tc.present, tc.state)
			}
			switch {
			case tc.status == 0 && e != nil:
				t.Errorf("error %v", e)
			case tc.status != 0 && (e == nil || e.Status != tc.status || e.Code != tc.code || e.Field != tc.field):
				t.Errorf("got %+v, want %d %s field %q", e, tc.status, tc.code, tc.field)
			}
		})
	}
}
