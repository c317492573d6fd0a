package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The window block of the proof's job: tumbling windows of a second, or
// sessions with a gap of a second.
const (
	tumblingSecond = "{type: tumbling, size_ms: 1000}"
	sessionSecond  = "{type: session, gap_ms: 1000}"
)

// windowJobOf is a keyed event-time window job over a rate-limited file
// source with durability and checkpoints every 500 ms to file://. The
// out-of-orderness (3 s) exceeds the event-time span of one batch (25 rows
// of a partition, 80 ms apart): within a batch the watermark advances
// first, so a smaller bound would drop rows as late depending on where
// batches happen to break, and no two runs would agree. Sessions get 6 s:
// their input also pauses 2 s at different rows for different users.
func windowJobOf(window, storeURI, in, out string, rate int) string {
	ooo := "3000"
	if window == sessionSecond {
		ooo = "6000"
	}
	rateCfg := ""
	if rate > 0 {
		rateCfg = fmt.Sprintf(", rate_per_sec: %d", rate)
	}
	return `id: ckpt-proof
parallelism: 2
durability: {sync: group_commit}
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 3, object_store_uri: "` + storeURI + `"}
operators:
  - {id: in, kind: source}
  - id: per-second
    kind: window
    stateful: true
    key_field: user
    config:
      window: ` + window + `
      aggregates:
        - {function: count, as: n}
        - {function: sum, field: amount, as: total}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: per-second, partitioned: true}
  - {id: b, from: per-second, to: out}
sources:
  - operator_id: in
    input_type: file
    config: {path: ` + in + `, partitions: 2, batch_size: 25` + rateCfg + `, schema: [{name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]}
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: ` + ooo + `}
sinks:
  - {operator_id: out, output_type: file, config: {path: ` + out + `}}
`
}

// readLines returns the output's lines, sorted, and checks none is torn.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}

// The checkpoint proof: the window job is SIGKILLed
// at random moments and restarted with `arkflow run` each time; after the
// last run completes, the distinct window results equal those of one
// uninterrupted run — no window missing, no aggregate wrong. Results
// re-emitted after a restore are identical rows; they are counted.
func TestCheckpointSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	checkpointCrashLoop(t, dir, "file://"+filepath.Join(dir, "killed", "checkpoints"), nil, tumblingSecond)
}

// The same proof with session windows (gap 1 s). Each user's events pause
// for 2 s every 200 rows, at a different row for each user, so sessions of
// different keys open and close at different times: a firing moves the
// watermark past the first rows of other users' sessions that are still
// open, which a restore must not then drop as late (windowop.sessions'
// per-key floors; the checkpoint's watermark of its positions).
func TestCheckpointSurvivesSIGKILLSessions(t *testing.T) {
	dir := t.TempDir()
	checkpointCrashLoop(t, dir, "file://"+filepath.Join(dir, "killed", "checkpoints"), nil, sessionSecond)
}

// The same proof once against a real MinIO server (S3-compatible
// storage), its endpoint and keys passed the way a deployment would: the
// AWS_* environment.
func TestCheckpointSurvivesSIGKILLMinIO(t *testing.T) {
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*")
	}
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("ckpt-proof-%d", time.Now().UnixNano())
	if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	env := []string{"AWS_ENDPOINT_URL=http://" + endpoint, "AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret}
	checkpointCrashLoop(t, t.TempDir(), "s3://"+bucket+"/proof", env, tumblingSecond)
}

func checkpointCrashLoop(t *testing.T, dir, storeURI string, env []string, window string) {
	const rows = 6000
	var in strings.Builder
	for i := 0; i < rows; i++ {
		// 40 ms apart: 25 rows per second of event time, 7 users.
		user, ts := i%7, 1_700_000_000_000+int64(i)*40
		if window == sessionSecond {
			// A 2 s pause every 200 rows, shifted by 29 rows per user
			// (with a batch's 2 s of event time, within the 6 s
			// out-of-orderness: no row is late, no session split).
			ts += 2000 * int64((i+29*user)/200)
		}
		fmt.Fprintf(&in, "{\"user\":\"u%d\",\"ts\":%d,\"amount\":%d}\n", user, ts, i%100)
	}
	inPath := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(inPath, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The reference: one uninterrupted run, no rate limit.
	refDir := filepath.Join(dir, "ref")
	os.MkdirAll(refDir, 0o755)
	if err := os.WriteFile(filepath.Join(refDir, "job.yaml"), []byte(windowJobOf(window, "file://"+filepath.Join(refDir, "checkpoints"), inPath, filepath.Join(refDir, "out.jsonl"), 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cliCommand(refDir, "run", "--data-dir", "data", "job.yaml").CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	want := readLines(t, filepath.Join(refDir, "out.jsonl"))
	if least := map[string]int{tumblingSecond: 7 * 200, sessionSecond: 7 * 25}[window]; len(want) < least {
		t.Fatalf("the reference has only %d results", len(want))
	}

	runDir := filepath.Join(dir, "killed")
	os.MkdirAll(runDir, 0o755)
	outPath := filepath.Join(runDir, "out.jsonl")
	if err := os.WriteFile(filepath.Join(runDir, "job.yaml"), []byte(windowJobOf(window, storeURI, inPath, outPath, 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	kills := 20
	if testing.Short() {
		kills = 5
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	killed := 0
	var linesAfter []int // output lines after each killed run
	for killed < kills {
		cmd := cliCommand(runDir, "run", "--data-dir", "data", "job.yaml")
		cmd.Env = append(cmd.Env, env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		os.WriteFile(filepath.Join(runDir, fmt.Sprintf("run-%02d.log", killed+1)), []byte(stderr.String()), 0o644)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
			linesAfter = append(linesAfter, countLines(outPath))
			continue
		}
		if err != nil {
			t.Fatalf("run %d failed: %v\n%s", killed+1, err, stderr.String())
		}
		t.Logf("run %d ended before its kill", killed+1)
		break
	}
	// The last run goes at full speed: the rate changes when rows arrive,
	// not what the windows hold.
	if err := os.WriteFile(filepath.Join(runDir, "job.yaml"), []byte(windowJobOf(window, storeURI, inPath, outPath, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	final := cliCommand(runDir, "run", "--data-dir", "data", "job.yaml")
	final.Env = append(final.Env, env...)
	out, err := final.CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "restoring") {
		t.Fatalf("the final run did not restore a checkpoint:\n%s", out)
	}
	got := readLines(t, outPath)
	missing, wrong := diffLines(want, got)
	if len(missing) > 0 || len(wrong) > 0 {
		// Which run wrote the first wrong line, and what it logged.
		lines := readLinesUnsorted(t, outPath)
		first := -1
		wantSet := map[string]bool{}
		for _, l := range want {
			wantSet[l] = true
		}
		for i, l := range lines {
			if !wantSet[l] {
				first = i
				break
			}
		}
		for run, n := range linesAfter {
			if first >= 0 && first < n {
				log, _ := os.ReadFile(filepath.Join(runDir, fmt.Sprintf("run-%02d.log", run+1)))
				prev, _ := os.ReadFile(filepath.Join(runDir, fmt.Sprintf("run-%02d.log", run)))
				t.Logf("the first wrong line (%d) came from run %d; its log:\n%s\nthe run before:\n%s", first, run+1, log, prev)
				break
			}
		}
		t.Fatalf("after %d kills: %d window results missing (first %v), %d not in the uninterrupted run (first %v)",
			killed, len(missing), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
	}
	t.Logf("%d kills: %d distinct window results as in the uninterrupted run; %d re-emitted duplicates", killed, len(want), len(got)-len(want))
}

// diffLines compares distinct output lines with the wanted ones: those
// missing, and those (sorted) that should not be there. Duplicates of
// wanted lines are neither.
func diffLines(want, got []string) (missing, wrong []string) {
	have := map[string]bool{}
	for _, l := range got {
		have[l] = true
	}
	wantSet := map[string]bool{}
	for _, l := range want {
		wantSet[l] = true
		if !have[l] {
			missing = append(missing, l)
		}
	}
	for l := range have {
		if !wantSet[l] {
			wrong = append(wrong, l)
		}
	}
	sort.Strings(wrong)
	return missing, wrong
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

func readLinesUnsorted(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
