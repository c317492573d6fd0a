package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A durable Stream under SIGKILL: `arkflow run` of a Stream config whose
// http input (ArkFlow's keys, plus this library's Idempotency-Key) sits
// behind the stream's durability block (a local WAL), through a batch
// processor holding rows up to 300 ms and a sql processor into a file
// (fsynced), is killed streamKills times at random
// moments and restarted; a last run goes on until the file holds every
// row and is stopped with SIGTERM. A client POSTs one row a request and
// retries each until it is answered 200 (a 200 lost to a kill is retried
// and found taken). Every row answered 200 must be in the file; a row may
// be there more than once only because the WAL replayed it (the
// idempotency key keeps a retried request from taking it twice), and
// nothing else may be there.
//
// ARKFLOW_STREAM_CRASH_SEED=N replays the kill timings of a logged run.
const (
	streamRows  = 1500
	streamKills = 12
)

func TestDurableStreamSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILL loop")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	out := filepath.Join(dir, "out.jsonl")
	cfg := `streams:
  - id: durable-proof
    input:
      type: http
      address: ` + addr + `
      path: /rows
      idempotency: {}
    durability:
      sync: group_commit
    pipeline:
      thread_num: 3
      processors:
        - type: batch
          count: 1000
          timeout_ms: 300
        - type: sql
          query: "SELECT CAST(CAST(__value__ AS VARCHAR) AS BIGINT) AS n FROM flow"
    output:
      type: file
      path: ` + out + `
`
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_STREAM_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_STREAM_CRASH_SEED=%d replays them)", seed, seed)
	var accepted atomic.Int64
	posted := make(chan error, 1)
	go func() { posted <- postRows("http://"+addr+"/rows", &accepted) }()
	rng := rand.New(rand.NewPCG(seed, 5))
	for run := range streamKills {
		runAndKill(t, rng, dir, run, "the http input")
	}
	var postErr error
	clientDone := false
	streamLastRun(t, dir, func() bool {
		if !clientDone {
			select {
			case postErr = <-posted:
				clientDone = true
			default:
				return false
			}
		}
		return postErr != nil || len(fileCounts(t, out)) == streamRows
	})
	if postErr != nil {
		t.Fatal(postErr)
	}
	counts := map[string]int{}
	for n, c := range fileCounts(t, out) {
		counts[strconv.Itoa(n)] = c
	}
	want := make([]string, streamRows)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	dups := countOnceOrMore(t, counts, want)
	t.Logf("%d kills; %d rows, all in the output; %d duplicates from WAL replay", streamKills, streamRows, dups)
}

// postRows POSTs rows 0..streamRows-1, one a request with its own
// Idempotency-Key, retrying each until it is answered 200.
func postRows(url string, accepted *atomic.Int64) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	for i := range streamRows {
		for {
			if time.Now().After(deadline) {
				return fmt.Errorf("row %d not accepted in time", i)
			}
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(strconv.Itoa(i)))
			req.Header.Set("Idempotency-Key", "row-"+strconv.Itoa(i))
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		accepted.Add(1)
		time.Sleep(3 * time.Millisecond)
	}
	return nil
}

// streamLastRun runs the stream (dir's job.yaml) until done holds and the
// run said it runs (it handles SIGTERM from then on: done may hold before
// that), 2 minutes at most, then stops it with SIGTERM and checks that it
// stopped cleanly.
func streamLastRun(t *testing.T, dir string, done func() bool) {
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for !(strings.Contains(stderr.String(), "stream config running") && done()) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("the last run did not get everything out in 2 minutes\n%s", sqlTailOf(stderr.String(), 4000))
		}
		select {
		case err := <-exited:
			t.Fatalf("the last run exited by itself: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("the last run did not stop cleanly: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
	}
}

// countOnceOrMore checks that every item of want is in counts and nothing
// else is, and returns how many times items came more than once.
func countOnceOrMore(t *testing.T, counts map[string]int, want []string) (dups int) {
	t.Helper()
	for _, w := range want {
		switch n := counts[w]; {
		case n == 0:
			t.Errorf("%s is not in the output", w)
		case n > 1:
			dups += n - 1
		}
		delete(counts, w)
	}
	if len(counts) > 0 {
		t.Errorf("items nobody sent are in the output: %v", counts)
	}
	return dups
}

// fileCounts counts each n in the output file's {"n": …} lines.
func fileCounts(t *testing.T, path string) map[int]int {
	t.Helper()
	counts := map[int]int{}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return counts
	} else if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var row struct{ N *int }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.N == nil {
			// A line a kill tore: its rows were not acknowledged, so the
			// WAL gives them again.
			continue
		}
		counts[*row.N]++
	}
	return counts
}
