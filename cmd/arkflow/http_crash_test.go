package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// The HTTP input's exactly-once proof, against PostgreSQL: `arkflow run`
// of a job with the http input (durability on, idempotency by the
// Idempotency-Key header) through a keyed tumbling window (count and sum
// per user and 500 ms) into the sql output upserting on (user,
// window_start), with checkpoints every 500 ms, is SIGKILLed at random
// moments httpKills times and restarted; a last run goes on until the
// table is complete and is stopped with SIGTERM. Meanwhile a client POSTs
// the rows in order, a request of httpPerReq rows at a time with a key of
// its own, and retries every request until it is answered 200 (the
// connection is refused while the job is down, and an answer lost to a
// kill is retried too); after some answers it sends an answered request
// again, which must be answered 200 with every row a duplicate.
//
// The table must equal a reference computed by a loop over the rows, and
// every write the trigger logged must too (sqlCheckResults): a row taken
// twice, or lost after its 200, shows as a wrong count or sum.
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race -run TestHTTPIdempotentSurvivesSIGKILL -v ./cmd/arkflow/
//
// ARKFLOW_HTTP_CRASH_SEED=N replays the kill timings of a logged run.
const (
	httpRows   = 3000
	httpPerReq = 20
	httpUsers  = 5
	httpStepMS = 10
	httpOOOMS  = 500
	httpTail   = (httpOOOMS+sqlWindowMS/2)/httpStepMS + 1
	httpKills  = 12
	httpJobID  = "http-idempotent-proof"
)

// httpRow is row i of the input: user u(i mod httpUsers), event time
// sqlBase + i·httpStepMS and amount (7i) mod 100; rows from httpRows on
// are the tail, of user "end", which moves the watermark past the last
// data window.
func httpRow(i int) (user string, ts, amount int64) {
	ts = sqlBase + int64(i)*httpStepMS
	if i >= httpRows {
		return "end", ts, 0
	}
	return fmt.Sprintf("u%d", i%httpUsers), ts, int64((7 * i) % 100)
}

// httpReference is the expected table by a plain loop over the data rows,
// in sqlKeyValues' form: per user and window, the end, count and sum.
func httpReference() map[string]string {
	type agg struct{ n, total int64 }
	sums := map[string]*agg{}
	starts := map[string]int64{}
	for i := 0; i < httpRows; i++ {
		user, ts, amount := httpRow(i)
		start := ts - ts%sqlWindowMS
		k := fmt.Sprint(user, "@", start)
		if sums[k] == nil {
			sums[k] = &agg{}
			starts[k] = start
		}
		sums[k].n++
		sums[k].total += amount
	}
	want := map[string]string{}
	for k, a := range sums {
		want[k] = fmt.Sprint(starts[k]+sqlWindowMS, a.n, a.total)
	}
	return want
}

func httpSpec(dsn, addr, out, storeURI string) string {
	return `id: ` + httpJobID + `
parallelism: 1
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 3, object_store_uri: "` + storeURI + `"}
operators:
  - {id: in, kind: source}
  - id: per-window
    kind: window
    stateful: true
    key_field: user
    config:
      window: {type: tumbling, size_ms: ` + strconv.Itoa(sqlWindowMS) + `}
      aggregates:
        - {function: count, as: n}
        - {function: sum, field: amount, as: total}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: per-window, partitioned: true}
  - {id: b, from: per-window, to: out}
sources:
  - operator_id: in
    input_type: http
    durability: {}
    config:
      address: ` + addr + `
      path: /rows
      format: ndjson
      idempotency: {}
      schema: [{name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: ` + strconv.Itoa(httpOOOMS) + `}
sinks:
  - operator_id: out
    output_type: sql
    config:
      output_type: {type: postgres, uri: ` + strconv.Quote(dsn) + `}
      table_name: ` + out + `
      mode: upsert
      keys: [user, window_start]
      columns: [user, window_start, window_end, n, total]
`
}

func TestHTTPIdempotentSurvivesSIGKILL(t *testing.T) {
	dsn := os.Getenv("ARKFLOW_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip(sqlNoPostgres)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	in, out := "http_proof_in_"+suffix, "http_proof_out_"+suffix
	sqlSetup(t, dsn, in, out, true) // the input table stays empty
	want := httpReference()
	dir, err := os.MkdirTemp("", "http-idempotent-proof-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("run logs, WAL, state and checkpoints kept in %s", dir)
		}
	})
	addr := freeAddr(t)
	storeDir := filepath.Join(dir, "checkpoints")
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(httpSpec(dsn, addr, out, "file://"+storeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_HTTP_CRASH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ARKFLOW_HTTP_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_HTTP_CRASH_SEED=%d replays them); table %s; input http://%s/rows; logs under %s", seed, seed, out, addr, dir)

	c := &httpClient{url: "http://" + addr + "/rows", rng: rand.New(rand.NewPCG(seed, 23))}
	posted := make(chan error, 1)
	go func() { posted <- c.postAll(httpKills * 1200 * time.Millisecond) }()
	restored := httpKillLoop(t, rand.New(rand.NewPCG(seed, 11)), dir, dsn, out, len(want))
	httpLastRun(t, dir, dsn, out, len(want), posted)
	t.Logf("%d kills, %d runs started from a checkpoint; client: %d requests, %d attempts (%d refused or unanswered; %d requests whose answer was lost and whose retry found the rows taken); %d answered requests sent again, all answered as duplicates",
		httpKills, restored, c.requests, c.attempts.Load(), c.failed.Load(), c.lost, c.resent)
	if restored < httpKills/2 {
		t.Errorf("only %d of %d killed runs started from a checkpoint: the kills came too early to test restores", restored, httpKills)
	}
	if c.resent == 0 {
		t.Errorf("no answered request was sent again: the duplicates path was not exercised")
	}
	sqlCheckResults(t, dsn, out, want, httpKills, true)
}

// freeAddr returns a loopback address with a port free now, for the
// input to listen on in every run.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// httpKillLoop starts `arkflow run` and SIGKILLs it 0.4–1.6 s later,
// httpKills times. It returns how many runs started from a checkpoint.
func httpKillLoop(t *testing.T, rng *rand.Rand, dir, dsn, out string, want int) (restored int) {
	latest := filepath.Join(dir, "checkpoints", httpJobID, "checkpoints", "LATEST")
	for run := 1; run <= httpKills; run++ {
		if _, err := os.Stat(latest); err == nil {
			restored++
		}
		runAndKill(t, rng, dir, run, "an http input runs until stopped")
		n := len(pgRows(t, dsn, "SELECT 1 FROM "+out))
		t.Logf("run %d killed; %d of %d rows in the table", run, n, want)
	}
	return restored
}

// httpLastRun runs the job until the client is done and the table holds
// want rows, then stops it with SIGTERM.
func httpLastRun(t *testing.T, dir, dsn, out string, want int, posted chan error) {
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	done := false
	// It stops gracefully only once it handles SIGTERM, which it does
	// before its input listens: the table may be complete before it starts.
	for !done || !strings.Contains(stderr.String(), `msg="http: input listening"`) || len(pgRows(t, dsn, "SELECT 1 FROM "+out)) < want {
		select {
		case err := <-posted:
			if err != nil {
				t.Fatalf("posting the rows: %v", err)
			}
			done = true
		case err := <-exited:
			t.Fatalf("the last run exited by itself: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
		case <-deadline:
			t.Fatalf("the table is still incomplete after 3 minutes of the last run (client done: %v)\n%s", done, sqlTailOf(stderr.String(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := <-exited
	_ = os.WriteFile(filepath.Join(dir, "run-last.log"), []byte(stderr.String()), 0o644)
	if err != nil {
		t.Fatalf("the last run did not stop cleanly: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
	}
}

// httpClient posts the rows in order, a request at a time, each retried
// until answered 200.
type httpClient struct {
	url              string
	rng              *rand.Rand
	requests, resent int
	// lost counts requests first answered 200 on a retry that found
	// their rows taken already: the answer to an earlier try was lost (a
	// kill, or an impatient first try).
	lost             int
	attempts, failed atomic.Int64
}

// body is request k's rows as NDJSON.
func httpBody(k int) []byte {
	var b bytes.Buffer
	for i := k * httpPerReq; i < min((k+1)*httpPerReq, httpRows+httpTail); i++ {
		user, ts, amount := httpRow(i)
		fmt.Fprintf(&b, "{\"user\":%q,\"ts\":%d,\"amount\":%d}\n", user, ts, amount)
	}
	return b.Bytes()
}

// postAll sends every request, spread over pace, and after about one in
// five answers sends an answered request again.
func (c *httpClient) postAll(pace time.Duration) error {
	n := (httpRows + httpTail + httpPerReq - 1) / httpPerReq
	for k := 0; k < n; k++ {
		dups, err := c.untilOK(k)
		if err != nil {
			return err
		}
		if dups > 0 {
			c.lost++
		}
		c.requests++
		if c.rng.IntN(5) == 0 {
			again := c.rng.IntN(k + 1)
			dups, err := c.untilOK(again)
			if err != nil {
				return err
			}
			if rows := bytes.Count(httpBody(again), []byte{'\n'}); dups != rows {
				return fmt.Errorf("request %d sent again after its 200: %d of its %d rows answered as duplicates; the others were taken twice", again, dups, rows)
			}
			c.resent++
		}
		time.Sleep(pace / time.Duration(n))
	}
	return nil
}

// untilOK sends request k until it is answered 200 and returns how many
// of its rows the answer says were duplicates.
func (c *httpClient) untilOK(k int) (int, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	// One first try in four gives up after 1–20 ms, as a client whose
	// answer is lost: its rows may have been taken or not, and the retry
	// must find them all taken or none.
	impatient := &http.Client{Timeout: time.Duration(1+c.rng.IntN(20)) * time.Millisecond}
	if c.rng.IntN(4) != 0 {
		impatient = client
	}
	rows := bytes.Count(httpBody(k), []byte{'\n'})
	for try := 0; try < 2000; try++ {
		c.attempts.Add(1)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, c.url, bytes.NewReader(httpBody(k)))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Idempotency-Key", "req-"+strconv.Itoa(k))
		cl := client
		if try == 0 {
			cl = impatient
		}
		resp, err := cl.Do(req)
		if err == nil {
			var r struct {
				Accepted, Duplicates int
				Error                string
			}
			derr := json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && derr == nil:
				if r.Accepted+r.Duplicates != rows || r.Duplicates != 0 && r.Duplicates != rows {
					return 0, fmt.Errorf("request %d of %d rows answered 200 with %d accepted and %d duplicates: a request enters whole or not at all", k, rows, r.Accepted, r.Duplicates)
				}
				return r.Duplicates, nil
			case resp.StatusCode == http.StatusBadRequest:
				return 0, errors.New("request " + strconv.Itoa(k) + " refused: " + r.Error)
			}
		}
		c.failed.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("request %d: no 200 after 2000 tries", k)
}
