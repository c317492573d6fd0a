package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

var stateListening = regexp.MustCompile(`msg="state routes listening".*? addr=(\S+)`)

// `arkflow run --state-addr` serves the running job's state behind
// $ARKFLOW_STATE_TOKEN: a scan finds the keys, a lookup answers each, and
// mistakes get their statuses.
func TestRunServesState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(metricsSpec(dir, "queried")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(dir, "run", "--data-dir", "data", "--state-addr", "127.0.0.1:0", "job.yaml")
	cmd.Env = append(cmd.Env, "ARKFLOW_STATE_TOKEN=tok-0123456789abcdef")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := stateListening.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1] + "/api/v1/jobs/queried/state"
		} else if time.Now().After(deadline) {
			t.Fatalf("no \"state routes listening\" line:\n%s", stderr.String())
		}
	}
	get := func(path, token string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	const tok = "tok-0123456789abcdef"
	var rows []any
	for deadline := time.Now().Add(30 * time.Second); len(rows) == 0; time.Sleep(50 * time.Millisecond) {
		st, v := get("/count", tok)
		if st != http.StatusOK && st != http.StatusServiceUnavailable {
			t.Fatalf("scan: %d %v", st, v)
		}
		rows, _ = v["rows"].([]any)
		if time.Now().After(deadline) {
			t.Fatalf("the scan found no key: %d %v\n%s", st, v, stderr.String())
		}
	}
	user := rows[0].(map[string]any)["user"].(string)
	st, v := get("/count?key="+url.QueryEscape(user), tok)
	if got, _ := v["rows"].([]any); st != http.StatusOK || len(got) != 1 || got[0].(map[string]any)["n"].(float64) < 1 {
		t.Fatalf("lookup of %q: %d %v", user, st, v)
	}
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/count?key=x", "", http.StatusUnauthorized},
		{"/count?key=x", "wrong", http.StatusUnauthorized},
		{"/nope?key=x", tok, http.StatusNotFound},
		{"/count?key=no-such-user", tok, http.StatusNotFound},
		{"/count?limit=abc", tok, http.StatusBadRequest},
	} {
		if st, v := get(c.path, c.token); st != c.status {
			t.Errorf("GET %s: %d %v, want %d", c.path, st, v, c.status)
		}
	}
}
