package hub_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// routeKind says how a route is authenticated.
type routeKind int

const (
	public   routeKind = iota // health routes: no credentials
	agentReg                  // the node token
	agentRPC                  // the session token
	opRead                    // operator bearer token, any role
	opWrite                   // operator bearer token, not a viewer
)

// hubRoutes is every route the Hub serves, with a concrete path to call.
// TestRoutesListed fails when the Hub registers a route missing here, so a
// new route cannot skip the security sweep.
var hubRoutes = map[string]struct {
	kind routeKind
	path string // the pattern's path with its wildcards filled in
}{
	"GET /health":    {public, "/health"},
	"GET /readiness": {public, "/readiness"},
	"GET /liveness":  {public, "/liveness"},
	"GET /ui/":       {public, "/ui/"},
	"GET /{$}":       {public, "/"},

	"POST /api/v1/agent/register":             {agentReg, "/api/v1/agent/register"},
	"POST /api/v1/agent/heartbeat":            {agentRPC, "/api/v1/agent/heartbeat"},
	"POST /api/v1/agent/report":               {agentRPC, "/api/v1/agent/report"},
	"GET /api/v1/agent/commands":              {agentRPC, "/api/v1/agent/commands"},
	"POST /api/v1/agent/commands/{id}/result": {agentRPC, "/api/v1/agent/commands/CMD/result"},
	"POST /api/v1/agent/job-observations":     {agentRPC, "/api/v1/agent/job-observations"},

	"POST /api/v1/jobs/validate":                         {opWrite, "/api/v1/jobs/validate"},
	"POST /api/v1/jobs":                                  {opWrite, "/api/v1/jobs"},
	"GET /api/v1/jobs":                                   {opRead, "/api/v1/jobs"},
	"GET /api/v1/jobs/{id}":                              {opRead, "/api/v1/jobs/sec"},
	"GET /api/v1/jobs/{id}/status":                       {opRead, "/api/v1/jobs/sec/status"},
	"GET /api/v1/jobs/{id}/plan":                         {opRead, "/api/v1/jobs/sec/plan"},
	"GET /api/v1/jobs/{id}/detail":                       {opRead, "/api/v1/jobs/sec/detail"},
	"GET /api/v1/jobs/{id}/versions":                     {opRead, "/api/v1/jobs/sec/versions"},
	"PUT /api/v1/jobs/{id}/desired-state":                {opWrite, "/api/v1/jobs/sec/desired-state"},
	"POST /api/v1/jobs/{id}/actions/{action}":            {opWrite, "/api/v1/jobs/sec/actions/restart"},
	"POST /api/v1/jobs/{id}/savepoints":                  {opWrite, "/api/v1/jobs/sec/savepoints"},
	"POST /api/v1/jobs/{id}/checkpoints":                 {opWrite, "/api/v1/jobs/sec/checkpoints"},
	"GET /api/v1/jobs/{id}/savepoints":                   {opRead, "/api/v1/jobs/sec/savepoints"},
	"GET /api/v1/jobs/{id}/checkpoints":                  {opRead, "/api/v1/jobs/sec/checkpoints"},
	"POST /api/v1/jobs/{id}/upgrades":                    {opWrite, "/api/v1/jobs/sec/upgrades"},
	"POST /api/v1/jobs/{id}/upgrades/{upgrade}/rollback": {opWrite, "/api/v1/jobs/sec/upgrades/u1/rollback"},
	"GET /api/v1/jobs/{id}/state/{operator}":             {opRead, "/api/v1/jobs/sec/state/op?key=k"},
	"GET /api/v1/nodes":                                  {opRead, "/api/v1/nodes"},
	"GET /api/v1/audit":                                  {opRead, "/api/v1/audit"},
	// The catch-all under the prefix answers 404 to anyone.
	"/api/v1/": {public, "/api/v1/no-such-route"},
}

// registeredRoutes reads the patterns the Hub registers on its mux from
// its source: the hub package's files and the health routes.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`mux\.Handle(?:Func)?\(\s*"([^"]+)"`)
	files, _ := filepath.Glob("*.go")
	files = append(files, filepath.Join("..", "internal", "hubhttp", "health.go"))
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			out = append(out, string(m[1]))
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d routes in the source: %v", len(out), out)
	}
	sort.Strings(out)
	return out
}

// TestRoutesListed: the sweep's list is exactly the Hub's routes.
func TestRoutesListed(t *testing.T) {
	t.Parallel()
	got := registeredRoutes(t)
	for _, p := range got {
		if _, ok := hubRoutes[p]; !ok {
			t.Errorf("route %q is served but not in hubRoutes: add it so the security sweep covers it", p)
		}
	}
	for p := range hubRoutes {
		if !slices.Contains(got, p) {
			t.Errorf("hubRoutes lists %q, which the Hub no longer registers", p)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the Hub's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecuritySweep calls every route without credentials, with wrong
// ones and as a viewer; checks session tokens; and looks for secrets in
// the logs, the API's answers and the Hub's files.
func TestSecuritySweep(t *testing.T) {
	t.Parallel()
	const secretValue = "hunter2-s3cr3t-VALUE-7f3a9c"
	var logs syncBuffer
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Secrets = func(name string) (string, bool) {
		if name == "DB_PASSWORD" {
			return secretValue, true
		}
		return "", false
	}
	h, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	api := srv.URL + "/api/v1"

	// A v1 agent and a job whose spec names a secret, started on it.
	a := &v1Agent{t: t, api: api, nodeID: "sec-node"}
	a.register()
	spec := `{"id":"sec","operators":[{"id":"gen","kind":"source"},{"id":"out","kind":"sink"}],
		"edges":[{"id":"e","from":"gen","to":"out"}],
		"sources":[{"operator_id":"gen","input_type":"generate","config":{"fields":[{"name":"${secret:DB_PASSWORD}","type":"int64"}]}}],
		"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	var responses bytes.Buffer
	keep := func(st int, b []byte) {
		fmt.Fprintf(&responses, "%d %s\n", st, b)
	}
	st, _, body := call(t, "POST", api+"/jobs/validate", operatorToken, map[string]any{"spec": json.RawMessage(spec)})
	keep(st, body)
	if st != 200 || !strings.Contains(string(body), `"valid":true`) {
		t.Fatalf("validate: %d %s", st, body)
	}
	st, _, body = call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec), "desired_state": "running"})
	keep(st, body)
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	var start map[string]any
	polltest.Eventually(t, "the job_start", func() bool {
		for _, c := range a.poll() {
			if c["operation"] == "job_start" {
				start = c
			}
		}
		return start != nil
	})
	// The Agent, and only the Agent, gets the secret resolved.
	if p := mustJSON(t, start["payload"]); !strings.Contains(p, secretValue) || strings.Contains(p, "${secret:") {
		t.Fatalf("job_start payload not resolved: %s", p)
	}
	if st, v := a.result(start, "succeeded", 100, map[string]any{"observed_generation": start["generation"]}); st != 200 {
		t.Fatalf("result: %d %v", st, v)
	}
	for _, p := range []string{"/jobs", "/jobs/sec", "/jobs/sec/status", "/jobs/sec/plan", "/jobs/sec/detail", "/jobs/sec/versions",
		"/jobs/sec/checkpoints", "/jobs/sec/savepoints", "/nodes", "/audit"} {
		st, _, body := call(t, "GET", api+p, viewerToken, nil)
		keep(st, body)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", p, st, body)
		}
	}
	if !strings.Contains(responses.String(), "${secret:DB_PASSWORD}") {
		t.Fatalf("the API does not show the secret's reference (is the spec there at all?): %s", responses.String())
	}

	// Every route: absent and wrong credentials, then the viewer.
	for pattern, r := range hubRoutes {
		method, _, ok := strings.Cut(pattern, " ")
		if !ok {
			method = "POST"
		}
		u := srv.URL + r.path
		switch r.kind {
		case public:
			if st, _, body := call(t, method, u, "", nil); st == 401 || st == 403 {
				t.Errorf("%s: public route answered %d: %s", pattern, st, body)
			}
		case opRead, opWrite:
			for _, tok := range []string{"", "wrong-" + adminToken, adminToken + "x", "Basic " + adminToken} {
				st, hdr, body := call(t, method, u, tok, map[string]any{})
				keep(st, body)
				envelope(t, st, 401, hdr, body, "unauthorized")
			}
			cid := fmt.Sprintf("sweep-%x", pattern)
			st, hdr, body := call(t, method, u, viewerToken, map[string]any{}, "X-Correlation-ID", cid)
			keep(st, body)
			if r.kind == opWrite {
				envelope(t, st, 403, hdr, body, "forbidden")
				if hdr.Get("X-Correlation-ID") != cid {
					t.Errorf("%s: correlation id not echoed: %q", pattern, hdr.Get("X-Correlation-ID"))
				}
			} else if st == 401 || st == 403 {
				t.Errorf("%s: viewer refused a read: %d %s", pattern, st, body)
			}
		case agentReg:
			for _, tok := range []string{"", "wrong-" + nodeToken} {
				st, hdr, body := call(t, method, u, "", map[string]any{"node_id": "intruder", "node_token": tok,
					"protocol_version": "v1", "capabilities": v1Capabilities})
				envelope(t, st, 401, hdr, body, "unauthorized")
				// Nor does a bearer header with a wrong token help.
				st, hdr, body = call(t, method, u, tok, map[string]any{"node_id": "intruder", "protocol_version": "v1"})
				envelope(t, st, 401, hdr, body, "unauthorized")
			}
		case agentRPC:
			for _, tok := range []string{"", "0123456789abcdef0123456789abcdef", a.session + "0"} {
				// v1 style: the token in the body and the query.
				q := "?node_id=" + a.nodeID + "&session_token=" + tok
				bodyV1 := map[string]any{"node_id": a.nodeID, "session_token": tok, "state": "online", "report_seq": 1,
					"command_id": start["id"], "generation": start["generation"], "job_id": "sec", "progress": 100}
				st, hdr, body := call(t, method, u+q, "", bodyV1)
				envelope(t, st, 401, hdr, body, "unauthorized")
				if tok != "" {
					// Our style: the bearer header.
					st, hdr, body = call(t, method, u+"?node_id="+a.nodeID, tok, map[string]any{"node_id": a.nodeID,
						"command_id": start["id"], "generation": start["generation"], "job_id": "sec", "state": "online"})
					envelope(t, st, 401, hdr, body, "unauthorized")
				}
			}
		}
	}

	// 1,000 registrations: distinct session tokens of at least 128 bits.
	seen := map[string]bool{a.session: true}
	for i := range 1000 {
		ag := &v1Agent{t: t, api: api, nodeID: fmt.Sprintf("n%d", i%50)}
		ag.register()
		tok := ag.session
		if seen[tok] {
			t.Fatalf("registration %d repeated a session token", i)
		}
		seen[tok] = true
		if bits := tokenBits(tok); bits < 128 {
			t.Fatalf("session token %q carries %d bits", tok, bits)
		}
	}

	// Secrets never appear in the logs, the answers or the Hub's files.
	secrets := map[string]string{"the ${secret:} value": secretValue, "the admin token": adminToken,
		"the operator token": operatorToken, "the viewer token": viewerToken, "the node token": nodeToken}
	for tok := range seen {
		secrets["session token "+tok] = tok
	}
	check := func(where, text string) {
		t.Helper()
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s appears in %s", what, where)
			}
		}
	}
	if !strings.Contains(logs.String(), "agent registered") {
		t.Fatalf("the log capture is empty: %q", logs.String())
	}
	check("the API responses", responses.String())
	check("the Hub's log", logs.String())
	files := func(when string) {
		var all strings.Builder
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			check(when+" "+p, string(b))
			all.Write(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The files hold the spec, with the reference: the scan looked
		// at the right bytes.
		if !strings.Contains(all.String(), "${secret:DB_PASSWORD}") {
			t.Errorf("%s the Hub's files do not hold the spec's reference", when)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "hub.db-wal")); err != nil {
		t.Errorf("no WAL file while the Hub runs: %v", err)
	}
	files("while running:")
	srv.Close()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	files("after Close:")
	check("the Hub's log", logs.String())
}

// tokenBits estimates the random bits a session token carries from its
// length and alphabet: 4 per hex digit, 6 per base64 character.
func tokenBits(tok string) int {
	if _, err := hex.DecodeString(tok); err == nil {
		return 4 * len(tok)
	}
	if regexp.MustCompile(`^[A-Za-z0-9_-]+=*$`).MatchString(tok) {
		return 6 * len(strings.TrimRight(tok, "="))
	}
	return 0
}
