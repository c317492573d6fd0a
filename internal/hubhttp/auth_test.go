package hubhttp

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const (
	adminSecret    = "admin-secret-0123456789"
	operatorSecret = "operator-secret-0123456789"
	viewerSecret   = "viewer-secret-0123456789"
	jobOpSecret    = "job-op-secret-0123456789"
	nodeOpSecret   = "node-op-secret-0123456789"
	streamsSecret  = "streams-secret-0123456789"
)

var testTokenConfig = []string{
	"alice|admin|" + adminSecret,
	"bob|operator|" + operatorSecret,
	"carol|viewer|" + viewerSecret,
	"dave|operator|" + jobOpSecret + "|job=j1",
	"erin|operator|" + nodeOpSecret + "|node=n1",
	"frank|operator|" + streamsSecret + "|stream=",
}

type route struct {
	method, path string
	action       Action
}

// routes covers one route per action, stream and node resources, and a
// read of a job a scoped principal does not own.
var routes = []route{
	{"GET", "/api/v1/jobs/j2", ActionRead},
	{"GET", "/api/v1/audit", ActionReadAudit},
	{"PUT", "/api/v1/jobs/j1/desired-state", ActionOperate},
	{"PUT", "/api/v1/jobs/j2/desired-state", ActionOperate},
	{"POST", "/api/v1/jobs", ActionConfigure},
	{"POST", "/api/v1/nodes/n1/drain", ActionManageNodes},
	{"POST", "/api/v1/rollouts", ActionManageRollouts},
	{"PUT", "/api/v1/nodes/n1/streams/s1/desired-state", ActionOperate},
	{"PUT", "/api/v1/nodes/n10/streams/s1/desired-state", ActionOperate},
}

type recorder struct {
	mu      sync.Mutex
	denials []Denial
}

func (r *recorder) record(_ context.Context, d Denial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denials = append(r.denials, d)
}

func (r *recorder) last() Denial {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.denials) == 0 {
		return Denial{}
	}
	return r.denials[len(r.denials)-1]
}

func newTestServer(t *testing.T, opts AuthOptions) (http.Handler, *Authenticator, *recorder) {
	t.Helper()
	rec := &recorder{}
	opts.OnDenied = rec.record
	a, err := NewAuthenticator(opts)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := PrincipalFrom(r.Context())
		if p == nil {
			t.Error("handler reached without a principal")
			return
		}
		WriteJSON(w, 200, map[string]string{"principal": p.ID})
	})
	job := func(r *http.Request) Resource { return Resource{ResourceJob, r.PathValue("job")} }
	node := func(r *http.Request) Resource { return Resource{ResourceNode, r.PathValue("n")} }
	stream := func(r *http.Request) Resource {
		return Resource{ResourceStream, r.PathValue("n") + "/" + r.PathValue("s")}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/jobs/{job}", a.Require(ActionRead, job)(ok))
	mux.Handle("GET /api/v1/audit", a.Require(ActionReadAudit, nil)(ok))
	mux.Handle("PUT /api/v1/jobs/{job}/desired-state", a.Require(ActionOperate, job)(ok))
	mux.Handle("POST /api/v1/jobs", a.Require(ActionConfigure, func(*http.Request) Resource { return Resource{Type: ResourceJob} })(ok))
	mux.Handle("POST /api/v1/nodes/{n}/drain", a.Require(ActionManageNodes, node)(ok))
	mux.Handle("POST /api/v1/rollouts", a.Require(ActionManageRollouts, nil)(ok))
	mux.Handle("PUT /api/v1/nodes/{n}/streams/{s}/desired-state", a.Require(ActionOperate, stream)(ok))
	return Correlation(mux), a, rec
}

func do(h http.Handler, method, path, auth string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	r.Header.Set(HeaderCorrelationID, "corr-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func tokens(t *testing.T) []TokenEntry {
	t.Helper()
	ts, err := ParseTokens(testTokenConfig)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestNoTokenConfiguredIs401Everywhere(t *testing.T) {
	var logs bytes.Buffer
	h, a, rec := newTestServer(t, AuthOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if a.Insecure() || a.Warning() == "" || !strings.Contains(logs.String(), "every operator request will be rejected") {
		t.Errorf("insecure=%v warning=%q logs=%q", a.Insecure(), a.Warning(), logs.String())
	}
	for _, rt := range routes {
		for _, auth := range []string{"", "Bearer " + adminSecret, "Bearer anything"} {
			res := do(h, rt.method, rt.path, auth)
			if res.Code != 401 {
				t.Errorf("%s %s auth %q: %d, want 401", rt.method, rt.path, auth, res.Code)
				continue
			}
			if e := envelope(t, res); e.Code != "unauthorized" || e.CorrelationID != "corr-1" {
				t.Errorf("envelope %+v", e)
			}
			if !strings.HasPrefix(res.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("no WWW-Authenticate on 401")
			}
			if d := rec.last(); d.Code != "unauthorized" || d.Action != rt.action || d.CorrelationID != "corr-1" || d.PrincipalID != "" {
				t.Errorf("denial %+v", d)
			}
		}
	}
}

func TestInsecureNoAuthAllowsAllWithWarning(t *testing.T) {
	var logs bytes.Buffer
	h, a, _ := newTestServer(t, AuthOptions{InsecureNoAuth: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !a.Insecure() || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "insecure") {
		t.Errorf("insecure=%v logs=%q", a.Insecure(), logs.String())
	}
	for _, rt := range routes {
		if res := do(h, rt.method, rt.path, ""); res.Code != 200 {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, res.Code, res.Body)
		}
	}
	// A nil logger is fine and still exposes the warning.
	a2, err := NewAuthenticator(AuthOptions{InsecureNoAuth: true})
	if err != nil || a2.Warning() == "" {
		t.Errorf("nil logger: %v %q", err, a2.Warning())
	}
}

func TestInsecureWithTokensIsAnError(t *testing.T) {
	if _, err := NewAuthenticator(AuthOptions{InsecureNoAuth: true, Tokens: tokens(t)}); err == nil {
		t.Error("InsecureNoAuth with tokens accepted")
	}
	if _, err := NewAuthenticator(AuthOptions{Tokens: []TokenEntry{{}}}); err == nil {
		t.Error("zero TokenEntry accepted")
	}
}

func TestBadCredentialsAre401(t *testing.T) {
	h, _, _ := newTestServer(t, AuthOptions{Tokens: tokens(t)})
	for _, auth := range []string{
		"",
		"Bearer",
		"Bearer ",
		"Basic " + adminSecret,
		adminSecret,
		"Bearer " + adminSecret[:len(adminSecret)-1],       // prefix
		"Bearer " + adminSecret + "x",                      // extension
		"Bearer " + adminSecret[:len(adminSecret)-1] + "Y", // same length, last byte differs
		"Bearer " + strings.ToUpper(adminSecret),
		"Bearer " + adminSecret + " " + adminSecret,
		"Bearer alice",
		"Bearer " + strings.Repeat("a", 5000),
	} {
		for _, rt := range routes {
			if res := do(h, rt.method, rt.path, auth); res.Code != 401 {
				t.Errorf("%q on %s %s: %d, want 401", auth, rt.method, rt.path, res.Code)
			} else {
				envelope(t, res)
			}
		}
	}
	if res := do(h, "GET", "/api/v1/jobs/j1", "bearer "+adminSecret); res.Code != 200 {
		t.Errorf("lower-case scheme: %d", res.Code)
	}
}

func TestRoleMatrix(t *testing.T) {
	want := map[Role][]Action{
		RoleAdmin:    {ActionRead, ActionOperate, ActionConfigure, ActionManageNodes, ActionManageRollouts, ActionReadAudit},
		RoleOperator: {ActionRead, ActionOperate, ActionConfigure, ActionManageNodes, ActionManageRollouts},
		RoleViewer:   {ActionRead, ActionReadAudit},
	}
	all := want[RoleAdmin]
	for role, allowed := range want {
		for _, a := range all {
			exp := false
			for _, x := range allowed {
				exp = exp || x == a
			}
			if role.Allows(a) != exp {
				t.Errorf("%s.Allows(%s) = %v", role, a, !exp)
			}
		}
		if role.Allows("delete_everything") {
			t.Errorf("%s allows an unknown action", role)
		}
	}
	if Role("root").Allows(ActionRead) {
		t.Error("unknown role allowed")
	}
}

func TestRolesOverHTTP(t *testing.T) {
	h, _, rec := newTestServer(t, AuthOptions{Tokens: tokens(t)})
	for _, tc := range []struct {
		secret string
		role   Role
	}{{adminSecret, RoleAdmin}, {operatorSecret, RoleOperator}, {viewerSecret, RoleViewer}} {
		for _, rt := range routes {
			res := do(h, rt.method, rt.path, "Bearer "+tc.secret)
			want := 200
			if !tc.role.Allows(rt.action) {
				want = 403
			}
			if res.Code != want {
				t.Errorf("%s %s %s: %d, want %d", tc.role, rt.method, rt.path, res.Code, want)
				continue
			}
			if want == 403 {
				e := envelope(t, res)
				if e.Code != "forbidden" || e.CorrelationID != "corr-1" {
					t.Errorf("envelope %+v", e)
				}
				if d := rec.last(); d.Code != "forbidden" || d.PrincipalID == "" || d.Action != rt.action || d.Path != rt.path {
					t.Errorf("denial %+v", d)
				}
			}
		}
	}
}

func TestViewerCannotOperate(t *testing.T) {
	h, _, rec := newTestServer(t, AuthOptions{Tokens: tokens(t)})
	res := do(h, "PUT", "/api/v1/jobs/j1/desired-state", "Bearer "+viewerSecret)
	if res.Code != 403 {
		t.Fatalf("%d", res.Code)
	}
	e := envelope(t, res)
	if e.Code != "forbidden" || e.Message != "Operator is not authorized for Operate" || e.CorrelationID != "corr-1" {
		t.Errorf("%+v", e)
	}
	d := rec.last()
	if d != (Denial{Action: ActionOperate, Resource: Resource{ResourceJob, "j1"}, Code: "forbidden",
		PrincipalID: "carol", CorrelationID: "corr-1", Method: "PUT", Path: "/api/v1/jobs/j1/desired-state"}) {
		t.Errorf("denial %+v", d)
	}
}

func TestScopes(t *testing.T) {
	h, _, _ := newTestServer(t, AuthOptions{Tokens: tokens(t)})
	for _, tc := range []struct {
		secret, method, path string
		want                 int
	}{
		// job=j1: that job only, for mutations; reads are not scoped.
		{jobOpSecret, "PUT", "/api/v1/jobs/j1/desired-state", 200},
		{jobOpSecret, "PUT", "/api/v1/jobs/j2/desired-state", 403},
		{jobOpSecret, "GET", "/api/v1/jobs/j2", 200},
		{jobOpSecret, "POST", "/api/v1/jobs", 403}, // no id: a scoped id does not cover it
		{jobOpSecret, "POST", "/api/v1/rollouts", 403},
		{jobOpSecret, "POST", "/api/v1/nodes/n1/drain", 403},
		// node=n1: the node and the resources under it.
		{nodeOpSecret, "POST", "/api/v1/nodes/n1/drain", 200},
		{nodeOpSecret, "PUT", "/api/v1/nodes/n1/streams/s1/desired-state", 200},
		{nodeOpSecret, "PUT", "/api/v1/nodes/n10/streams/s1/desired-state", 403},
		{nodeOpSecret, "PUT", "/api/v1/jobs/j1/desired-state", 403},
		{nodeOpSecret, "POST", "/api/v1/rollouts", 403}, // nil ResourceFunc: fail closed
		// stream= : every stream, nothing else.
		{streamsSecret, "PUT", "/api/v1/nodes/n1/streams/s1/desired-state", 200},
		{streamsSecret, "PUT", "/api/v1/nodes/n10/streams/s1/desired-state", 200},
		{streamsSecret, "POST", "/api/v1/nodes/n1/drain", 403},
		// unscoped operator: everything its role allows.
		{operatorSecret, "POST", "/api/v1/rollouts", 200},
	} {
		res := do(h, tc.method, tc.path, "Bearer "+tc.secret)
		if res.Code != tc.want {
			t.Errorf("%s %s %s: %d, want %d", tc.secret[:4], tc.method, tc.path, res.Code, tc.want)
		} else if tc.want == 403 {
			envelope(t, res)
		}
	}
}

func TestCoversRules(t *testing.T) {
	p := Principal{Scopes: []Scope{{ResourceNode, "n1"}, {ResourceRollout, ""}}}
	for _, tc := range []struct {
		res  Resource
		want bool
	}{
		{Resource{ResourceNode, "n1"}, true},
		{Resource{ResourceNode, "n2"}, false},
		{Resource{ResourceStream, "n1/s"}, true},
		{Resource{ResourceStream, "n1"}, true},
		{Resource{ResourceStream, "n1x/s"}, false},
		{Resource{ResourceConfiguration, "n1"}, true},
		{Resource{ResourceRollout, "rollout-9"}, true},
		{Resource{ResourceJob, ""}, false},
		{Resource{}, false},
	} {
		if got := p.Covers(tc.res); got != tc.want {
			t.Errorf("Covers(%+v) = %v", tc.res, got)
		}
	}
	empty := Principal{Scopes: []Scope{{ResourceNode, ""}}}
	if empty.Covers(Resource{ResourceStream, "/x"}) || empty.Covers(Resource{ResourceStream, ""}) {
		t.Error("node= (whole type) covers streams")
	}
	if !(&Principal{}).Covers(Resource{}) {
		t.Error("unscoped principal does not cover everything")
	}
}

// TestEveryTokenComparedInConstantTime checks the behaviour that makes
// the comparison constant-time: every configured hash is compared
// through crypto/subtle (hashEqual), whichever matches and whatever the
// presented length.
func TestEveryTokenComparedInConstantTime(t *testing.T) {
	ts := tokens(t)
	a, err := NewAuthenticator(AuthOptions{Tokens: ts})
	if err != nil {
		t.Fatal(err)
	}
	orig := hashEqual
	t.Cleanup(func() { hashEqual = orig })
	var calls int
	hashEqual = func(x, y SecretHash) bool { calls++; return orig(x, y) }
	for _, secret := range []string{adminSecret, streamsSecret, "nope", strings.Repeat("z", 4000)} {
		calls = 0
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		p := a.Authenticate(r)
		if calls != len(ts) {
			t.Errorf("secret %.5s: %d comparisons, want %d (one per token, no early exit)", secret, calls, len(ts))
		}
		if (p != nil) != (secret == adminSecret || secret == streamsSecret) {
			t.Errorf("secret %.5s: principal %v", secret, p)
		}
	}
	hashes := []SecretHash{HashSecret("a"), HashSecret("b"), HashSecret("c")}
	calls = 0
	if MatchAny(hashes, "a") != 0 || calls != 3 {
		t.Errorf("MatchAny: calls %d", calls)
	}
	if MatchAny(hashes, "d") != -1 {
		t.Error("MatchAny matched an unknown secret")
	}
}

func TestAuthenticatedPrincipalIsACopy(t *testing.T) {
	a, _ := NewAuthenticator(AuthOptions{Tokens: tokens(t)})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+jobOpSecret)
	p := a.Authenticate(r)
	if p == nil || p.ID != "dave" || p.Role != RoleOperator || len(p.Scopes) != 1 {
		t.Fatalf("%+v", p)
	}
	p.Scopes[0] = Scope{}
	p.Role = RoleAdmin
	if q := a.Authenticate(r); q.Role != RoleOperator || q.Scopes[0] != (Scope{ResourceJob, "j1"}) {
		t.Errorf("mutating a principal changed the configuration: %+v", q)
	}
}

func TestAuthorizeInHandler(t *testing.T) {
	a, _ := NewAuthenticator(AuthOptions{Tokens: tokens(t)})
	h := Correlation(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.Authorize(w, r, ActionOperate, Resource{ResourceJob, r.URL.Query().Get("job")}); ok {
			w.WriteHeader(204)
		}
	}))
	if res := do(h, "POST", "/?job=j1", "Bearer "+jobOpSecret); res.Code != 204 {
		t.Errorf("%d", res.Code)
	}
	if res := do(h, "POST", "/?job=j3", "Bearer "+jobOpSecret); res.Code != 403 {
		t.Errorf("%d", res.Code)
	} else {
		envelope(t, res)
	}
}
