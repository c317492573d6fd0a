package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS proof: a JetStream (two subjects) → keyed tumbling window →
// {file, JetStream, PostgreSQL} job with Badger state and checkpoints (file://, every
// 500 ms) is SIGKILLed at random moments 12 times and restarted with
// `arkflow run` each time, every second time without its data directory
// (a replacement node: the restore has only the checkpoint, so windows
// fired after it fire again); a last run goes on until the output stream
// holds every expected window and is stopped with SIGTERM. The expected
// windows come from a model of the input computed here, not from the job.
//
//   - JetStream output (msg_id_fields [user, window_start]): every
//     expected window is there exactly once, with its exact count and sum,
//     and nothing else: the windows a restart fired again were dropped by
//     the stream's duplicate window (effectively-once).
//   - SQL output, upserting into PostgreSQL on (user, window_start), when
//     ARKFLOW_TEST_POSTGRES_DSN names a server (.ci/test.sh starts one):
//     the table holds every expected window with its exact count and sum
//     and nothing else, and every write a trigger logged was exact too
//     (windows fired again after a restore are updates with equal values).
//   - File output (at-least-once): every expected window is there, and
//     every line of it has the exact count and sum; lines written again
//     after a kill are counted and logged, not failed.
//
// Exact counts and sums prove that every message was counted once in the
// state: a message read twice into a window (a restart resuming below
// what the restored state holds, a redelivery let through) makes its
// window's count too high; one skipped, too low.
//
// The input: natsParts subjects of natsPerPart messages each. Message i
// of subject p has event time natsBase + i·natsStepMS, user
// u((i+p) mod natsUsers) and amount (7i + 13p) mod 100. natsTail messages
// of user "end" follow on every subject until the watermark passes the
// last data window by half a window, so it fires; their own windows are
// left out of the comparison. A fifth is in the stream before the first
// run, the rest is published over the kill loop.
//
// Run it with the server .ci/test.sh starts, or one of your own
// (ARKFLOW_TEST_NATS_URL); ARKFLOW_NATS_CRASH_SEED=N replays the kill
// timings of a logged run; ARKFLOW_NATS_PROOF_KEEP=1 keeps the run logs,
// state and checkpoints (kept anyway when it fails).
const (
	natsParts    = 2
	natsPerPart  = 1500
	natsUsers    = 6
	natsStepMS   = 10
	natsWindowMS = 500
	natsBatch    = 25
	natsOOOMS    = 500 // > the event-time span of one batch (240 ms): no row is ever late
	natsTail     = (natsOOOMS+natsWindowMS/2)/natsStepMS + 1
	natsBase     = int64(1_700_000_000_000)
	natsKills    = 12
	natsJobID    = "nats-crash-proof"
)

func natsInputRecord(part, i int) (user string, ts, amount int64) {
	ts = natsBase + int64(i)*natsStepMS
	if i >= natsPerPart {
		return "end", ts, 0
	}
	return fmt.Sprintf("u%d", (i+part)%natsUsers), ts, int64((7*i + 13*part) % 100)
}

// natsWindow is one expected result.
type natsWindow struct{ n, total int64 }

func natsWinName(user string, start int64) string { return fmt.Sprintf("%s@%d", user, start) }

// natsWant is the model: every (user, window start) of the data messages
// with its count and sum.
func natsWant() map[string]*natsWindow {
	want := map[string]*natsWindow{}
	for p := 0; p < natsParts; p++ {
		for i := 0; i < natsPerPart; i++ {
			user, ts, amount := natsInputRecord(p, i)
			name := natsWinName(user, ts-ts%natsWindowMS)
			w := want[name]
			if w == nil {
				w = &natsWindow{}
				want[name] = w
			}
			w.n++
			w.total += amount
		}
	}
	return want
}

// natsProofSpec is the proof's job; with a PostgreSQL DSN, the windows
// are upserted into table pgOut too, on (user, window_start).
func natsProofSpec(url, in, out, storeURI, dsn, pgOut string) string {
	pgSink, pgEdge, pgOp := "", "", ""
	if dsn != "" {
		pgOp = "  - {id: pg-out, kind: sink, parallelism: 1}\n"
		pgEdge = "\n  - {id: d, from: per-window, to: pg-out}"
		pgSink = `  - operator_id: pg-out
    output_type: sql
    config:
      output_type: {type: postgres, uri: ` + strconv.Quote(dsn) + `}
      table_name: ` + pgOut + `
      mode: upsert
      keys: [user, window_start]
      columns: [user, window_start, window_end, n, total]
`
	}
	return `id: ` + natsJobID + `
parallelism: 2
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 3, object_store_uri: "` + storeURI + `"}
operators:
  - {id: in, kind: source}
  - id: per-window
    kind: window
    stateful: true
    key_field: user
    parallelism: 1
    config:
      window: {type: tumbling, size_ms: ` + strconv.Itoa(natsWindowMS) + `}
      aggregates:
        - {function: count, as: n}
        - {function: sum, field: amount, as: total}
  - {id: file-out, kind: sink, parallelism: 1}
  - {id: nats-out, kind: sink, parallelism: 1}
` + pgOp + `edges:
  - {id: a, from: in, to: per-window, partitioned: true}
  - {id: b, from: per-window, to: file-out}
  - {id: c, from: per-window, to: nats-out}` + pgEdge + `
sources:
  - operator_id: in
    input_type: nats
    config:
      url: ` + strconv.Quote(url) + `
      mode: {type: jet_stream, stream: ` + in + `, consumer_name: proof, subjects: [` + in + `.p0, ` + in + `.p1]}
      batch_size: ` + strconv.Itoa(natsBatch) + `
      schema: [{name: part, type: int64}, {name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: ` + strconv.Itoa(natsOOOMS) + `}
sinks:
  - {operator_id: file-out, output_type: file, config: {path: out.jsonl}}
  - operator_id: nats-out
    output_type: nats
    config:
      url: ` + strconv.Quote(url) + `
      mode: {type: jet_stream, subject: ` + out + `.windows}
      msg_id_fields: [user, window_start]
` + pgSink
}

// natsPublish publishes messages [from, to) of every subject, spread
// evenly over pace (0: at once), waiting for the stream's
// acknowledgements.
func natsPublish(js jetstream.JetStream, stream string, from, to int, pace time.Duration) error {
	const chunk = 20
	var step time.Duration
	if pace > 0 && to > from {
		step = pace * chunk / time.Duration(to-from)
	}
	for i := from; i < to; i += chunk {
		var futs []jetstream.PubAckFuture
		for j := i; j < min(i+chunk, to); j++ {
			for p := 0; p < natsParts; p++ {
				user, ts, amount := natsInputRecord(p, j)
				f, err := js.PublishAsync(fmt.Sprintf("%s.p%d", stream, p), fmt.Appendf(nil, `{"part":%d,"user":%q,"ts":%d,"amount":%d}`, p, user, ts, amount))
				if err != nil {
					return err
				}
				futs = append(futs, f)
			}
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			}
		}
		time.Sleep(step)
	}
	return nil
}

// natsResult is one output window.
type natsResult struct {
	User              string
	Start, End, N, Tt int64
}

func decodeNatsResult(v []byte) (natsResult, error) {
	var raw struct {
		User   *string `json:"user"`
		Start  string  `json:"window_start"`
		End    string  `json:"window_end"`
		N      *int64  `json:"n"`
		Total  *int64  `json:"total"`
		Update bool    `json:"__arkflow_window_update"`
	}
	dec := json.NewDecoder(strings.NewReader(string(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return natsResult{}, err
	}
	if raw.User == nil || raw.N == nil || raw.Total == nil || raw.Update {
		return natsResult{}, errors.New("user, n or total missing, or an update")
	}
	s, err := time.Parse(time.RFC3339Nano, raw.Start)
	if err != nil {
		return natsResult{}, err
	}
	e, err := time.Parse(time.RFC3339Nano, raw.End)
	if err != nil {
		return natsResult{}, err
	}
	return natsResult{*raw.User, s.UnixMilli(), e.UnixMilli(), *raw.N, *raw.Total}, nil
}

// natsCheck identifies an output value as an expected window with exactly
// the model's values; "" with no error for a window of the tail.
func natsCheck(v []byte, want map[string]*natsWindow) (string, error) {
	r, err := decodeNatsResult(v)
	if err != nil {
		return "", err
	}
	if r.User == "end" {
		return "", nil
	}
	name := natsWinName(r.User, r.Start)
	w := want[name]
	switch {
	case w == nil:
		return "", errors.New("no such window in the input")
	case r.N != w.n || r.Tt != w.total || r.End != r.Start+natsWindowMS:
		return "", fmt.Errorf("want n=%d total=%d, end = start + %d ms", w.n, w.total, natsWindowMS)
	}
	return name, nil
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func TestNATSJetStreamSurvivesSIGKILL(t *testing.T) {
	url := os.Getenv("ARKFLOW_TEST_NATS_URL")
	if url == "" {
		t.Skip("no NATS server: bash .ci/test.sh starts nats-server -js and sets ARKFLOW_TEST_NATS_URL " +
			"(or start one: `nats-server -a 127.0.0.1 -p 4222 -js -sd $(mktemp -d)`, then ARKFLOW_TEST_NATS_URL=nats://127.0.0.1:4222)")
	}
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out := "PROOF_IN_"+suffix, "PROOF_OUT_"+suffix
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, name := range []string{in, out} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: 30 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		defer js.DeleteStream(context.Background(), name)
	}
	want := natsWant()

	dir, err := os.MkdirTemp("", "nats-proof-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("ARKFLOW_NATS_PROOF_KEEP") == "" {
			os.RemoveAll(dir)
		} else {
			t.Logf("run logs, state and checkpoints kept in %s", dir)
		}
	})
	dsn, pgOut := os.Getenv("ARKFLOW_TEST_POSTGRES_DSN"), "nats_proof_"+strings.ToLower(suffix)
	if dsn != "" {
		natsPGSetup(t, dsn, pgOut)
	} else {
		t.Log("no PostgreSQL (ARKFLOW_TEST_POSTGRES_DSN): the windows are not upserted into a table; bash .ci/test.sh starts one")
	}
	spec := natsProofSpec(url, in, out, "file://"+filepath.Join(dir, "checkpoints"), dsn, pgOut)
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_NATS_CRASH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ARKFLOW_NATS_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_NATS_CRASH_SEED=%d replays them); streams %s → %s, logs under %s", seed, seed, in, out, dir)
	rng := rand.New(rand.NewPCG(seed, 11))

	upfront := natsPerPart / 5
	if err := natsPublish(js, in, 0, upfront, 0); err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	go func() {
		published <- natsPublish(js, in, upfront, natsPerPart+natsTail, time.Duration(natsKills)*time.Second)
	}()

	runs := 0
	start := func() (func() error, *lockedBuffer, <-chan error) {
		runs++
		cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
		log := &lockedBuffer{}
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		signal := func() error { return cmd.Process.Signal(syscall.SIGKILL) }
		return signal, log, exited
	}
	saveLog := func(log *lockedBuffer) {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("run-%02d.log", runs)), []byte(log.String()), 0o644)
	}
	killed := 0
	for killed < natsKills {
		kill, log, exited := start()
		time.Sleep(time.Duration(400+rng.IntN(1400)) * time.Millisecond)
		_ = kill()
		err := <-exited
		saveLog(log)
		var ee interface{ Sys() any }
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				killed++
				if killed%2 == 0 {
					// A replacement node: no local state, so the restore
					// rolls the window floor back to the checkpoint's and
					// windows fired since are fired again.
					if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
		}
		t.Fatalf("run %d ended by itself before its kill (a JetStream job runs until stopped): %v\n%s", runs, err, lastBytes(log.String(), 4000))
	}
	if err := <-published; err != nil {
		t.Fatalf("publishing the input: %v", err)
	}

	// The last run: until the output stream holds every expected window
	// (a bounded wait), then a graceful stop.
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	runs++
	log := &lockedBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	complete := natsWaitOutput(t, js, out, want, exited) && natsWaitTable(t, dsn, pgOut, len(want), exited)
	// It stops gracefully only once it handles SIGTERM, which it does
	// before its sources read: the output may be complete before it starts.
	for wait := time.Now().Add(time.Minute); !strings.Contains(log.String(), `msg="reading JetStream stream"`) && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var runErr error
	select {
	case runErr = <-exited:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		runErr = fmt.Errorf("no exit within 60 s of SIGTERM: %v", <-exited)
	}
	saveLog(log)
	if !complete {
		t.Fatalf("after %d kills (seed %d) the last run did not get every expected window into the output stream within 2 minutes; its log:\n%s", killed, seed, lastBytes(log.String(), 4000))
	}
	if runErr != nil {
		t.Fatalf("the last run did not stop cleanly on SIGTERM: %v\n%s", runErr, lastBytes(log.String(), 4000))
	}

	// JetStream output: every expected window exactly once.
	counts := map[string]int{}
	var bad []string
	for _, m := range natsReadStream(t, js, out) {
		name, err := natsCheck(m.Data(), want)
		if err == nil && name != "" {
			r, _ := decodeNatsResult(m.Data())
			if id, wantID := m.Headers().Get(jetstream.MsgIDHeader), fmt.Sprintf("%s:%s:%d", natsJobID, r.User, r.Start); id != wantID {
				err = fmt.Errorf("Nats-Msg-Id %q, want %q", id, wantID)
			}
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", m.Data(), err))
			continue
		}
		if name != "" {
			counts[name]++
		}
	}
	if len(bad) > 0 {
		t.Fatalf("seed %d, %d kills: %d wrong windows in the output stream (first %v)", seed, killed, len(bad), bad[:min(5, len(bad))])
	}
	var missing, twice []string
	for name := range want {
		switch c := counts[name]; {
		case c == 0:
			missing = append(missing, name)
		case c > 1:
			twice = append(twice, fmt.Sprintf("%s ×%d", name, c))
		}
	}
	sort.Strings(missing)
	sort.Strings(twice)
	if len(missing) > 0 || len(twice) > 0 {
		t.Fatalf("seed %d, %d kills: output stream: %d of %d windows missing (%v), %d stored more than once (%v)", seed, killed, len(missing), len(want), missing[:min(10, len(missing))], len(twice), twice[:min(10, len(twice))])
	}

	// PostgreSQL: every expected window, exact, and nothing else; every
	// write ever made to the table exact too.
	if dsn != "" {
		natsCheckTable(t, dsn, pgOut, want, killed)
	}

	// File output: every expected window, every line exact; lines
	// written again are counted.
	lines := natsCheckFile(t, filepath.Join(dir, "out.jsonl"), want)
	t.Logf("seed %d: %d kills, %d runs; output stream: %d windows, each once; file: %d lines for %d windows (%d written again after kills)",
		seed, killed, runs, len(want), lines, len(want), lines-len(want))
}

// natsPGSetup creates the UPSERT sink's table and the log of every write
// to it (a trigger); all are dropped when the test passes.
func natsPGSetup(t *testing.T, dsn, table string) {
	t.Helper()
	pgRun(t, dsn,
		"CREATE TABLE "+table+` ("user" text, window_start timestamptz, window_end timestamptz NOT NULL, n bigint NOT NULL, total bigint NOT NULL, PRIMARY KEY ("user", window_start))`,
		"CREATE TABLE "+table+`_log ("user" text, window_start timestamptz, window_end timestamptz, n bigint, total bigint, op text)`,
		"CREATE FUNCTION "+table+"_logf() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "+table+`_log VALUES (NEW."user", NEW.window_start, NEW.window_end, NEW.n, NEW.total, TG_OP); RETURN NEW; END $$`,
		"CREATE TRIGGER logged AFTER INSERT OR UPDATE ON "+table+" FOR EACH ROW EXECUTE FUNCTION "+table+"_logf()")
	t.Cleanup(func() {
		if !t.Failed() {
			pgRun(t, dsn, "DROP TABLE "+table, "DROP TABLE "+table+"_log", "DROP FUNCTION "+table+"_logf")
		}
	})
}

// natsWaitTable polls the table until it holds n windows of data (2 minutes at most)
// or the run exits; it reports whether it did. Without a DSN, true.
func natsWaitTable(t *testing.T, dsn, table string, n int, exited <-chan error) bool {
	if dsn == "" {
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(pgRows(t, dsn, "SELECT 1 FROM "+table+` WHERE "user" <> 'end'`)) < n {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case err := <-exited:
			t.Fatalf("the last run exited by itself: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// natsCheckTable compares the UPSERT sink's table, and every write made
// to it, with the model: none missing, none wrong, none extra.
func natsCheckTable(t *testing.T, dsn, table string, want map[string]*natsWindow, killed int) {
	t.Helper()
	check := func(what string, r []any) string {
		user, start, end := r[0].(string), r[1].(time.Time).UnixMilli(), r[2].(time.Time).UnixMilli()
		name := natsWinName(user, start)
		if user == "end" {
			return "" // the tail's windows; fired or not, not compared
		}
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("%s: window %s should not exist", what, name)
		case end != start+natsWindowMS || r[3].(int64) != w.n || r[4].(int64) != w.total:
			t.Errorf("%s: window %s is (end %d, n %d, total %d), want (%d, %d, %d)", what, name, end, r[3], r[4], start+natsWindowMS, w.n, w.total)
		}
		return name
	}
	seen := map[string]bool{}
	for _, r := range pgRows(t, dsn, `SELECT "user", window_start, window_end, n, total FROM `+table) {
		if name := check("table", r); name != "" {
			seen[name] = true
		}
	}
	missing := 0
	for name := range want {
		if !seen[name] {
			if missing++; missing <= 10 {
				t.Errorf("table: window %s is missing", name)
			}
		}
	}
	writes, updates := 0, 0
	for _, r := range pgRows(t, dsn, `SELECT "user", window_start, window_end, n, total, op FROM `+table+"_log") {
		writes++
		if r[5].(string) == "UPDATE" {
			updates++
		}
		check("a write logged by the trigger", r[:5])
	}
	t.Logf("PostgreSQL after %d kills: %d windows expected, %d in the table, %d missing; %d writes, %d of them updates of a window written before (fired again after a restore, same values)",
		killed, len(want), len(seen), missing, writes, updates)
}

// natsWaitOutput polls the output stream until it holds every expected
// window (2 minutes at most) or the run exits; it reports whether it did.
func natsWaitOutput(t *testing.T, js jetstream.JetStream, stream string, want map[string]*natsWindow, exited <-chan error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		select {
		case err := <-exited:
			t.Fatalf("the last run exited by itself: %v", err)
		case <-ctx.Done():
			return false
		default:
		}
		m, err := c.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
		if err != nil {
			continue
		}
		if name, err := natsCheck(m.Data(), want); err == nil && name != "" {
			seen[name] = true
		}
	}
	return true
}

// natsReadStream reads every message of a stream.
func natsReadStream(t *testing.T, js jetstream.JetStream, stream string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]jetstream.Msg, 0, info.State.Msgs)
	for uint64(len(out)) < info.State.Msgs {
		m, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("read %d of %d messages of %s: %v", len(out), info.State.Msgs, stream, err)
		}
		out = append(out, m)
	}
	return out
}

// natsCheckFile checks the file sink's output and returns its number of
// lines of expected windows.
func natsCheckFile(t *testing.T, path string, want map[string]*natsWindow) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, err := natsCheck(sc.Bytes(), want)
		if err != nil {
			t.Fatalf("file output line %q: %v", sc.Text(), err)
		}
		if name != "" {
			seen[name] = true
			lines++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Fatalf("file output: %d of %d expected windows", len(seen), len(want))
	}
	return lines
}
