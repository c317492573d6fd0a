package hubhttp

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestCorrelationEchoAndGenerate(t *testing.T) {
	var seen string
	h := Correlation(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = CorrelationID(r.Context())
		if got := w.Header().Get(HeaderCorrelationID); got != seen {
			t.Errorf("header %q set before the handler, context %q", got, seen)
		}
		WriteError(w, r, Forbidden(ActionOperate))
	}))
	gen := regexp.MustCompile(`^req-[0-9a-f]{32}$`)
	for _, tc := range []struct {
		name, in string
		echo     bool
	}{
		{"sane", "abc-123_XYZ:/.+=", true},
		{"max length", strings.Repeat("a", MaxCorrelationIDLen), true},
		{"absent", "", false},
		{"too long", strings.Repeat("a", MaxCorrelationIDLen+1), false},
		{"space", "a b", false},
		{"control", "a\x01b", false},
		{"tab", "a\tb", false},
		{"non-ascii", "ä", false},
		{"del", "a\x7f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tc.in != "" {
				r.Header.Set(HeaderCorrelationID, tc.in)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			got := rec.Header().Get(HeaderCorrelationID)
			if tc.echo && got != tc.in {
				t.Errorf("echo: got %q want %q", got, tc.in)
			}
			if !tc.echo && !gen.MatchString(got) {
				t.Errorf("generated %q", got)
			}
			if seen != got {
				t.Errorf("context %q, header %q", seen, got)
			}
			if e := envelope(t, rec); e.CorrelationID != got {
				t.Errorf("envelope %q", e.CorrelationID)
			}
		})
	}
}

func TestCorrelationIDsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewCorrelationID()
		if seen[id] {
			t.Fatalf("duplicate %s", id)
		}
		seen[id] = true
	}
}

func TestCorrelationIDEmptyContext(t *testing.T) {
	if CorrelationID(t.Context()) != "" {
		t.Error("non-empty id from a bare context")
	}
}
