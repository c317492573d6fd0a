//go:build cgo

package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/stream"
)

// startServers is how to run the examples that need the test servers.
const startServers = "ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race -run TestArkFlowExamples ./stream/"

// serverEnv returns the test server variable name, or skips the test
// saying how to start the servers.
func serverEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s is not set: %s starts the test servers and sets it", name, startServers)
	}
	return v
}

// substitute replaces each old of the pairs (old, new, old, new, …) in
// yaml, failing the test when an old is not there, so that the verbatim
// copy and the test stay in step.
func substitute(t *testing.T, yaml string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(yaml, pairs[i]) {
			t.Fatalf("the example no longer contains %q", pairs[i])
		}
		yaml = strings.ReplaceAll(yaml, pairs[i], pairs[i+1])
	}
	return yaml
}

var uniqueSeq atomic.Int64

var notNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// uniqueName returns a topic, subject, key or id unique to this test and
// run.
func uniqueName(t *testing.T, what string) string {
	name := notNameChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("%s_%s_%d_%d", what, name, time.Now().UnixNano()%1e9, uniqueSeq.Add(1))
}

// syncBuffer is a writer many goroutines write while the test reads it.
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

// lines returns the complete lines written so far.
func (s *syncBuffer) lines() []string {
	text := s.String()
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		return strings.Split(text[:i], "\n")
	}
	return nil
}

// exampleRun is an example running in the process with stream.Run: its
// stdout outputs write to stdout, its log records at warn and above to
// logs.
type exampleRun struct {
	stdout, logs syncBuffer
	cancel       context.CancelFunc
	done         chan struct{}
	err          error
}

// startExample parses yaml and runs it until its inputs end or stop is
// called; the test's end stops it.
func startExample(t *testing.T, yaml string) *exampleRun {
	t.Helper()
	cfg, err := stream.Parse([]byte(yaml), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &exampleRun{cancel: cancel, done: make(chan struct{})}
	lg := slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir := t.TempDir()
	go func() {
		defer close(r.done)
		r.err = stream.Run(ctx, cfg, stream.WithStdout(&r.stdout), stream.WithLogger(lg),
			stream.WithDataDir(dir), stream.WithDrainTimeout(10*time.Second))
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// wait waits for Run to return by itself (its inputs ended) and checks
// that it returned nil and logged no error.
func (r *exampleRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the example still runs after 30s; stdout so far:\n%s\nlogs:\n%s", r.stdout.String(), r.logs.String())
	}
	r.checkEnd(t)
}

// stop cancels the run (it drains first) and checks its end as wait does.
func (r *exampleRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the example did not stop within 30s of its cancellation")
	}
	r.checkEnd(t)
}

func (r *exampleRun) checkEnd(t *testing.T) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Run: %v\nlogs:\n%s", r.err, r.logs.String())
	}
	if strings.Contains(r.logs.String(), "level=ERROR") {
		t.Fatalf("the run logged errors:\n%s", r.logs.String())
	}
}

// knownGap waits for the run to end (the caller cancels it first when
// its input is endless), checks that it logged gap, a failure of the
// library's that keeps the example from running as ArkFlow runs it, and
// skips the rest of the test: the checks that hold once it is fixed.
// When gap is no longer logged, the test fails: the row becomes runs.
func (r *exampleRun) knownGap(t *testing.T, gap string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the example did not end within 30s")
	}
	if !r.logged(gap) {
		t.Fatalf("the known gap %q is gone: make the row runs (Run: %v, logs:\n%s)", gap, r.err, r.logs.String())
	}
	t.Skipf("known gap: %s", gap)
}

// logged says whether a log record's text holds s (the records quote
// their values, escaping the double quotes in them).
func (r *exampleRun) logged(s string) bool {
	return strings.Contains(strings.ReplaceAll(r.logs.String(), `\"`, `"`), s)
}

// waitLines waits until stdout holds at least n lines and returns them.
func (r *exampleRun) waitLines(t *testing.T, n int) []string {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d lines on stdout", n), func() bool { return len(r.stdout.lines()) >= n },
		func() string { return r.stdout.String() + "\nlogs:\n" + r.logs.String() })
	return r.stdout.lines()
}

// waitUntil polls cond for up to 20s, failing the test with what (and
// state's report) when it never holds.
func waitUntil(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 20s; so far:\n%s", what, state())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkLines compares got with want, line by line.
func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s\nwant:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("line %d: %s\nwant:   %s", i, got[i], want[i])
		}
	}
}

// repeated returns n copies of line.
func repeated(line string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line
	}
	return out
}
