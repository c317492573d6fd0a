package hubhttp

import (
	"regexp"
	"strings"
	"testing"
)

const sec = "s3cret-s3cret-s3cret"

func TestParseTokenEntry(t *testing.T) {
	for _, tc := range []struct {
		in     string
		id     string
		role   Role
		scopes []Scope
	}{
		{"alice|admin|" + sec, "alice", RoleAdmin, nil},
		{" bob | operator | " + sec + " ", "bob", RoleOperator, nil},
		{"carol|viewer|" + sec + "|", "carol", RoleViewer, nil},
		{"dave|operator|" + sec + "|job=j1, node=n1,stream=", "dave", RoleOperator,
			[]Scope{{"job", "j1"}, {"node", "n1"}, {"stream", ""}}},
		{"erin|operator|" + sec + "|stream=n1/s1", "erin", RoleOperator, []Scope{{"stream", "n1/s1"}}},
	} {
		e, err := ParseTokenEntry(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		p := e.Principal
		if p.ID != tc.id || p.Role != tc.role || len(p.Scopes) != len(tc.scopes) {
			t.Errorf("%q: %+v", tc.in, p)
			continue
		}
		for i := range tc.scopes {
			if p.Scopes[i] != tc.scopes[i] {
				t.Errorf("%q: scope %d = %+v", tc.in, i, p.Scopes[i])
			}
		}
		if !e.SecretHash.Matches(sec) || e.SecretHash.Matches(sec+" ") {
			t.Errorf("%q: hash does not match the trimmed secret only", tc.in)
		}
	}
}

func TestParseTokenEntryErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{sec, "bare secret is not accepted"},
		{"", "not of the form"},
		{"a|admin", "not of the form"},
		{"a|admin|" + sec + "|job=x|extra", "not of the form"},
		{"|admin|" + sec, "empty id"},
		{"a b|admin|" + sec, "id must be"},
		{"alice|root|" + sec, `role "root"`},
		{"alice|Admin|" + sec, `role "Admin"`},
		{"alice|admin|", "secret shorter"},
		{"alice|admin|short", "secret shorter"},
		{"alice|admin|" + sec + "x y", "spaces"},
		{"alice|admin|" + sec + "|job", `scope "job" is not type=id`},
		{"alice|admin|" + sec + "|cluster=c1", "unknown type"},
		{"alice|admin|" + sec + "|job=j1,,", `scope "" is not type=id`},
		{"alice|admin|" + strings.Repeat("x", 5000), "secret longer"},
	} {
		_, err := ParseTokenEntry(tc.in)
		if err == nil {
			t.Errorf("%q: accepted", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want it to say %q", tc.in, err, tc.want)
		}
		if strings.Contains(err.Error(), sec) {
			t.Errorf("%q: error reveals the secret: %v", tc.in, err)
		}
	}
}

func TestParseTokensNamesTheEntry(t *testing.T) {
	_, err := ParseTokens([]string{"alice|admin|" + sec, "", "bob|superuser|" + sec + "-2"})
	if err == nil || !strings.Contains(err.Error(), "entry 3") || !strings.Contains(err.Error(), `"bob"`) {
		t.Errorf("%v", err)
	}
	_, err = ParseTokens([]string{"alice|admin|" + sec, "alice|viewer|" + sec + "-2"})
	if err == nil || !regexp.MustCompile(`entry 2: id "alice" already used by entry 1`).MatchString(err.Error()) {
		t.Errorf("duplicate id: %v", err)
	}
	_, err = ParseTokens([]string{"alice|admin|" + sec, "bob|viewer|" + sec})
	if err == nil || !strings.Contains(err.Error(), "same secret as entry 1") || strings.Contains(err.Error(), sec) {
		t.Errorf("duplicate secret: %v", err)
	}
	_, err = ParseTokens([]string{"x|admin|" + sec, sec + "-bare"})
	if err == nil || !strings.Contains(err.Error(), "entry 2") || strings.Contains(err.Error(), sec) {
		t.Errorf("bare secret: %v", err)
	}
	ts, err := ParseTokens(nil)
	if err != nil || len(ts) != 0 {
		t.Errorf("empty list: %v %v", ts, err)
	}
}

func FuzzParseTokenEntry(f *testing.F) {
	for _, s := range testTokenConfig {
		f.Add(s)
	}
	f.Add("a|admin|" + sec + "|job=,node=n1")
	f.Add("a|b|c|d|e")
	f.Add(sec)
	f.Add("|||")
	f.Add("a|admin|" + sec + "|=x")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseTokenEntry(s)
		parts := strings.Split(strings.TrimSpace(s), "|")
		if err != nil {
			// The error never reveals a secret that appears nowhere
			// else in the entry.
			if len(parts) >= 3 {
				secret := strings.TrimSpace(parts[2])
				rest := strings.Join(append(append([]string{}, parts[:2]...), parts[3:]...), "|")
				if len(secret) >= 8 && !strings.Contains(rest, secret) &&
					!strings.Contains("token : role  is not admin, operator or viewer secret shorter longer than bytes contains spaces or control characters scope has unknown type (want node, stream, configuration, operation, rollout or job)", secret) &&
					strings.Contains(err.Error(), secret) {
					t.Fatalf("error reveals the secret: %v", err)
				}
			}
			return
		}
		p := e.Principal
		if len(parts) < 3 || len(parts) > 4 {
			t.Fatalf("accepted %d parts", len(parts))
		}
		if !p.Role.Valid() || !ValidCorrelationID(p.ID) {
			t.Fatalf("accepted %+v", p)
		}
		secret := strings.TrimSpace(parts[2])
		if len(secret) < MinSecretLen || !e.SecretHash.Matches(secret) {
			t.Fatalf("secret %q: hash mismatch or too short", secret)
		}
		for _, sc := range p.Scopes {
			if !resourceTypes[sc.Type] {
				t.Fatalf("scope type %q", sc.Type)
			}
		}
		// Parsing is deterministic.
		e2, err := ParseTokenEntry(s)
		if err != nil || e2.SecretHash != e.SecretHash || e2.Principal.ID != p.ID {
			t.Fatal("second parse differs")
		}
	})
}
