package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go/internal/opsrv/opsrvtest"
)

// logRun is an `arkflow run --log-format json` child whose stderr is read
// as it comes: its JSON records, and channels closed when a record with a
// message starting with one of the watched prefixes arrives.
type logRun struct {
	cmd  *exec.Cmd
	done chan struct{} // stderr reached EOF

	mu      sync.Mutex
	recs    []map[string]any
	raw     strings.Builder
	watch   map[string]chan struct{}
	watched map[string]map[string]any // the first record of each prefix
}

func startLogRun(t *testing.T, dir string, stdout io.Writer, watch []string, args ...string) *logRun {
	t.Helper()
	cmd := cliCommand(dir, append([]string{"run", "--log-format", "json", "--data-dir", "data"}, args...)...)
	cmd.Stdout = stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &logRun{cmd: cmd, done: make(chan struct{}), watch: map[string]chan struct{}{}, watched: map[string]map[string]any{}}
	for _, w := range watch {
		r.watch[w] = make(chan struct{})
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var rec map[string]any
			err := json.Unmarshal([]byte(line), &rec)
			r.mu.Lock()
			r.raw.WriteString(line + "\n")
			if err == nil {
				r.recs = append(r.recs, rec)
				msg, _ := rec["msg"].(string)
				for w, ch := range r.watch {
					if _, seen := r.watched[w]; !seen && strings.HasPrefix(msg, w) {
						r.watched[w] = rec
						close(ch)
					}
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// wait waits for the child to exit (after its stderr ended) and returns
// its wait status.
func (r *logRun) wait() (syscall.WaitStatus, error) {
	<-r.done
	err := r.cmd.Wait()
	ws, _ := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws, err
}

func (r *logRun) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw.String()
}

// records returns the records whose level is one of levels and whose
// message starts with prefix.
func (r *logRun) records(prefix string, levels ...string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, rec := range r.recs {
		msg, _ := rec["msg"].(string)
		lvl, _ := rec["level"].(string)
		if strings.HasPrefix(msg, prefix) && (len(levels) == 0 || slices.Contains(levels, lvl)) {
			out = append(out, rec)
		}
	}
	return out
}

// sumSeries sums a family's values whose labels include want.
func sumSeries(f *dto.MetricFamily, want map[string]string) (s float64) {
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		l := opsrvtest.Labels(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			s += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			s += m.GetGauge().GetValue()
		}
	}
	return s
}
