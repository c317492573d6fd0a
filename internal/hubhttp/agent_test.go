package hubhttp

import (
	"net/http/httptest"
	"regexp"
	"testing"
)

func TestNewTokenIs128RandomBits(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		tok := NewToken()
		if !re.MatchString(tok) {
			t.Fatalf("token %q is not 32 hex digits", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %s", tok)
		}
		seen[tok] = true
	}
}

func TestSecretHash(t *testing.T) {
	tok := NewToken()
	h := HashSecret(tok)
	if !h.Matches(tok) || h.Matches(tok[:31]) || h.Matches(tok+"0") || h.Matches("") {
		t.Error("Matches")
	}
	s := h.String()
	if len(s) != 64 || s == tok {
		t.Errorf("stored form %q", s)
	}
	back, err := ParseSecretHash(s)
	if err != nil || back != h {
		t.Errorf("round trip: %v", err)
	}
	for _, bad := range []string{"", s[:63], s + "0", "zz" + s[2:]} {
		if _, err := ParseSecretHash(bad); err == nil {
			t.Errorf("ParseSecretHash(%q) accepted", bad)
		}
	}
}

func TestSessionCredentials(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, auth, node, body string
		status                 int
		header                 bool
	}{
		{"header only", "Bearer " + tok, "n1", "", 0, true},
		{"v1 body only", "", "n1", tok, 0, false},
		{"both agree", "Bearer " + tok, "n1", tok, 0, true},
		{"both disagree", "Bearer " + tok, "n1", tok + "x", 401, false},
		{"none", "", "n1", "", 401, false},
		{"not bearer", "Basic " + tok, "n1", tok, 401, false},
		{"no node id", "Bearer " + tok, "", "", 422, false},
		{"too long", "", "n1", string(make([]byte, 5000)), 401, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/v1/agent/heartbeat", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			c, e := SessionCredentials(r, tc.node, tc.body)
			if tc.status != 0 {
				if e == nil || e.Status != tc.status {
					t.Fatalf("got %+v %v, want status %d", c, e, tc.status)
				}
				return
			}
			if e != nil || c.SessionToken != tok || c.NodeID != tc.node || c.FromHeader != tc.header {
				t.Fatalf("%+v %v", c, e)
			}
		})
	}
}

func TestQuerySessionCredentials(t *testing.T) {
	r := httptest.NewRequest("GET", "/api/v1/agent/commands?node_id=n1&session_token=abc", nil)
	c, e := QuerySessionCredentials(r)
	if e != nil || c.NodeID != "n1" || c.SessionToken != "abc" || c.FromHeader {
		t.Errorf("%+v %v", c, e)
	}
	r = httptest.NewRequest("GET", "/api/v1/agent/commands?node_id=n1", nil)
	r.Header.Set("Authorization", "Bearer xyz")
	c, e = QuerySessionCredentials(r)
	if e != nil || c.SessionToken != "xyz" || !c.FromHeader {
		t.Errorf("%+v %v", c, e)
	}
	r = httptest.NewRequest("GET", "/api/v1/agent/commands?session_token=abc", nil)
	if _, e = QuerySessionCredentials(r); e == nil || e.Field != "node_id" {
		t.Errorf("missing node_id: %v", e)
	}
}
