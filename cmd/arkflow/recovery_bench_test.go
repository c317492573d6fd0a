package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// BenchmarkRecoveryAfterSIGKILL measures end-to-end recovery of a job with
// about 1 M keys of state:
//
//	go test -run '^$' -bench BenchmarkRecoveryAfterSIGKILL -benchtime=2x -count=3 ./cmd/arkflow/
//
// Setup (untimed): `arkflow run` (this test binary re-executed, see
// TestMain) runs a generate source (one partition; id is the row's offset,
// so every row is a new key) → keyed running sum on Badger (2 subtasks) →
// file sink, checkpointing every 500 ms to file://. Once a committed
// checkpoint's source position has passed recoveryKeys rows, the process
// is SIGKILLed; its data directory is kept as it was left.
//
// Two scenarios share that setup: state=crashed puts the data directory
// back as the kill left it before each iteration (a restart on the same
// node: Badger reopens after a crash, and the restore first deletes what
// the directory holds), state=empty removes it (a replacement node: the
// state comes from the checkpoint alone). Each iteration starts
// `arkflow run` again and times, from exec to:
//
//   - running-ms: the "job running" log line (checkpoint selected and
//     verified, Badger opened, state restored, the
//     aggregate's 1 M accumulators loaded, source and sink connected);
//   - first-row-ms: the first new byte in the output file;
//
// and then SIGKILLs it again. The baseline, in the same iteration, is
// raw-read-ms: reading the restored checkpoint's state objects from the
// store directory to io.Discard (os.Open + io.Copy). cold-start-ms is the
// same job started in an empty directory (no state, no checkpoint): the
// part of running-ms that is process and job start-up, not recovery.
// restoring-ms, restore-ms and open-ms split running-ms by the log lines
// "restoring" and the last "restore progress". ratio is
// raw-read-ms / running-ms.
func BenchmarkRecoveryAfterSIGKILL(b *testing.B) {
	b.Run(fmt.Sprintf("keys=%dk", recoveryKeys/1000), func(b *testing.B) { benchRecovery(b, recoveryKeys) })
}

// Recovery scenarios: the restart finds the data directory as the crash
// left it (the same node), or finds none (a replacement node: the state
// comes from the checkpoint alone).
var recoveryScenarios = []string{"crashed", "empty"}

const recoveryKeys = 1_000_000

func recoverySpec(dir string, rate int) string {
	return fmt.Sprintf(`id: recover
parallelism: 2
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 2, object_store_uri: "file://%s"}
operators:
  - {id: in, kind: source, parallelism: 1}
  - id: sum
    kind: aggregate
    stateful: true
    key_field: id
    config: {aggregates: [{function: count, as: n}, {function: sum, field: amount, as: total}]}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: sum, partitioned: true}
  - {id: b, from: sum, to: out}
sources:
  - operator_id: in
    input_type: generate
    config: {partitions: 1, batch_size: 4096, rate_per_sec: %d, fields: [{name: id, type: int64, sequence: true}, {name: amount, type: int64}]}
sinks:
  - {operator_id: out, output_type: file, config: {path: out.jsonl}}
`, filepath.Join(dir, "checkpoints"), rate)
}

// child is a running `arkflow run` whose log lines are timed as they
// arrive.
type child struct {
	cmd   *exec.Cmd
	start time.Time
	mu    sync.Mutex
	lines []timedLine
	seen  chan struct{} // signalled on every line
	done  chan struct{} // closed when stderr ends
}

type timedLine struct {
	at   time.Duration
	text string
}

func startChild(b *testing.B, dir string) *child {
	b.Helper()
	c := &child{cmd: cliCommand(dir, "run", "--data-dir", "data", "job.yaml"), seen: make(chan struct{}, 1), done: make(chan struct{})}
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			at := time.Since(c.start)
			c.mu.Lock()
			c.lines = append(c.lines, timedLine{at, sc.Text()})
			c.mu.Unlock()
			select {
			case c.seen <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// find returns the first line containing s at or after line from.
func (c *child) find(s string, from int) (timedLine, int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := from; i < len(c.lines); i++ {
		if strings.Contains(c.lines[i].text, s) {
			return c.lines[i], i, true
		}
	}
	return timedLine{}, len(c.lines), false
}

// waitFor waits for a line containing s.
func (c *child) waitFor(b *testing.B, s string, timeout time.Duration) timedLine {
	b.Helper()
	deadline := time.After(timeout)
	from := 0
	for {
		l, next, ok := c.find(s, from)
		if ok {
			return l
		}
		from = next
		select {
		case <-c.seen:
		case <-c.done:
			if l, _, ok := c.find(s, from); ok {
				return l
			}
			b.Fatalf("arkflow run ended before logging %q:\n%s", s, c.log())
		case <-deadline:
			b.Fatalf("no %q after %v:\n%s", s, timeout, c.log())
		}
	}
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sb strings.Builder
	for _, l := range c.lines[max(0, len(c.lines)-40):] {
		fmt.Fprintf(&sb, "%8.1fms %s\n", float64(l.at)/1e6, l.text)
	}
	return sb.String()
}

func (c *child) kill(b *testing.B) {
	b.Helper()
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	<-c.done
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		b.Fatalf("arkflow run was not killed (%v):\n%s", c.cmd.ProcessState, c.log())
	}
}

// latestCheckpoint reads the manifest LATEST points to in a file://
// store, or nil.
func latestCheckpoint(b *testing.B, storeDir, jobID string) *ckptstore.Manifest {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", "LATEST"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.Fatal(err)
	}
	id, err := ckptstore.ParseID(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil // being replaced
	}
	body, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", id.String(), "manifest.json"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := ckptstore.DecodeManifest(body)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func copyDir(b *testing.B, from, to string) {
	b.Helper()
	if err := os.RemoveAll(to); err != nil {
		b.Fatal(err)
	}
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if d.Type()&fs.ModeSocket != 0 {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		b.Fatal(err)
	}
}

var progressKeys = regexp.MustCompile(` keys=(\d+) `)

func benchRecovery(b *testing.B, keys int64) {
	dir := b.TempDir()
	storeDir := filepath.Join(dir, "checkpoints")
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(recoverySpec(dir, 150_000)), 0o644); err != nil {
		b.Fatal(err)
	}
	// The first run, killed after a checkpoint that holds every key.
	first := startChild(b, dir)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if m := latestCheckpoint(b, storeDir, "recover"); m != nil && len(m.SourcePositions) == 1 && m.SourcePositions[0].Offset >= keys {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no checkpoint past %d rows after 5 minutes:\n%s", keys, first.log())
		}
		select {
		case <-first.done:
			b.Fatalf("the first run ended:\n%s", first.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
	first.kill(b)
	m := latestCheckpoint(b, storeDir, "recover")
	b.Logf("checkpoint %s: source at row %d, %d state objects", m.CheckpointID, m.SourcePositions[0].Offset, len(m.StateSnapshots))
	// Keep the crashed data directory and output, so that every iteration
	// restarts from the same crash.
	copyDir(b, filepath.Join(dir, "data"), filepath.Join(dir, "data.crashed"))
	syscall.Sync()

	for _, scenario := range recoveryScenarios {
		b.Run("state="+scenario, func(b *testing.B) { benchRestart(b, dir, m, keys, scenario == "empty") })
	}
}

func benchRestart(b *testing.B, dir string, m *ckptstore.Manifest, keys int64, empty bool) {
	storeDir := filepath.Join(dir, "checkpoints")
	var ckptBytes int64
	for _, s := range m.StateSnapshots {
		ckptBytes += s.Bytes
	}
	coldDir := filepath.Join(dir, "cold")
	if err := os.MkdirAll(coldDir, 0o755); err != nil {
		b.Fatal(err)
	}
	var running, firstRow, raw, cold, restoring, restore, open time.Duration
	var restoredKeys int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if empty {
			if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
				b.Fatal(err)
			}
		} else {
			copyDir(b, filepath.Join(dir, "data.crashed"), filepath.Join(dir, "data"))
		}
		syscall.Sync()
		if got := latestCheckpoint(b, storeDir, "recover"); got.CheckpointID != m.CheckpointID {
			b.Fatalf("LATEST moved to %s (a restarted run committed a checkpoint before its kill)", got.CheckpointID)
		}
		out := filepath.Join(dir, "out.jsonl")
		fi, err := os.Stat(out)
		if err != nil {
			b.Fatal(err)
		}
		size0 := fi.Size()
		b.StartTimer()

		c := startChild(b, dir)
		var rowAt time.Duration
		for {
			if fi, err := os.Stat(out); err == nil && fi.Size() > size0 {
				rowAt = time.Since(c.start)
				break
			}
			select {
			case <-c.done:
				b.Fatalf("the restarted run ended:\n%s", c.log())
			case <-time.After(time.Millisecond):
			}
			if time.Since(c.start) > 5*time.Minute {
				b.Fatalf("no output 5 minutes after the restart:\n%s", c.log())
			}
		}
		run := c.waitFor(b, `msg="job running"`, time.Minute)
		b.StopTimer()
		c.kill(b)
		rs := c.waitFor(b, `msg=restoring`, 0)
		if !strings.Contains(rs.text, "checkpoint="+m.CheckpointID) {
			b.Fatalf("the restart restored %q, want checkpoint %s", rs.text, m.CheckpointID)
		}
		var last timedLine
		var nkeys int64
		for from := 0; ; {
			l, next, ok := c.find("restore progress", from)
			if !ok {
				break
			}
			last, from = l, next+1
			if k := progressKeys.FindStringSubmatch(l.text); k != nil {
				n, _ := strconv.ParseInt(k[1], 10, 64)
				nkeys += n
			}
		}
		if nkeys < keys {
			b.Fatalf("restored %d keys, want at least %d:\n%s", nkeys, keys, c.log())
		}
		restoredKeys = nkeys
		running += run.at
		firstRow += rowAt
		restoring += rs.at
		restore += last.at - rs.at
		open += run.at - last.at

		// The baseline: the checkpoint's state objects, read raw.
		start := time.Now()
		for _, s := range m.StateSnapshots {
			f, err := os.Open(filepath.Join(storeDir, filepath.FromSlash(s.URI)))
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, f)
			f.Close()
			if err != nil || n != s.Bytes {
				b.Fatalf("reading %s: %d bytes, %v", s.URI, n, err)
			}
		}
		raw += time.Since(start)

		// Start-up without anything to recover.
		os.RemoveAll(filepath.Join(coldDir, "data"))
		os.RemoveAll(filepath.Join(coldDir, "checkpoints"))
		os.Remove(filepath.Join(coldDir, "out.jsonl"))
		if err := os.WriteFile(filepath.Join(coldDir, "job.yaml"), []byte(recoverySpec(coldDir, 150_000)), 0o644); err != nil {
			b.Fatal(err)
		}
		cc := startChild(b, coldDir)
		cold += cc.waitFor(b, `msg="job running"`, time.Minute).at
		cc.kill(b)
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
	b.ReportMetric(ms(running), "running-ms")
	b.ReportMetric(ms(firstRow), "first-row-ms")
	b.ReportMetric(ms(raw), "raw-read-ms")
	b.ReportMetric(float64(raw)/float64(running), "ratio")
	b.ReportMetric(ms(cold), "cold-start-ms")
	b.ReportMetric(ms(restoring), "restoring-ms")
	b.ReportMetric(ms(restore), "restore-ms")
	b.ReportMetric(ms(open), "open-ms")
	b.ReportMetric(float64(ckptBytes)/1e6, "ckpt-MB")
	b.ReportMetric(float64(restoredKeys), "keys")
}
