//go:build cgo

package stream_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/stream"
)

// ackState is what happened to each input batch: acknowledged once with
// nil, once with an error, or something else (never, twice).
func ackState(t *testing.T, label string, count int) (ok, failed []int64) {
	t.Helper()
	testMu.Lock()
	defer testMu.Unlock()
	for n := range int64(count) {
		errs := acks[label][n]
		switch {
		case len(errs) != 1:
			t.Errorf("batch %d acknowledged %d times, want once", n, len(errs))
		case errs[0] == nil:
			ok = append(ok, n)
		default:
			failed = append(failed, n)
		}
	}
	return ok, failed
}

func flat(label string) []int64 {
	testMu.Lock()
	defer testMu.Unlock()
	var out []int64
	for _, b := range collected[label] {
		out = append(out, b...)
	}
	return out
}

// An output error leaves the batch unacknowledged (its ack gets the
// error, so a source does not commit it and a WAL replays it) and does
// not stop the stream; every other batch is written in order and
// acknowledged.
func TestOutputErrorLeavesRowsUnacknowledged(t *testing.T) {
	resetTestConnectors()
	runConfig(t, `
streams:
  - input: {type: counting, label: in, count: 40}
    pipeline: {thread_num: 4, processors: []}
    output: {type: collecting, label: out, fail: [3, 17, 18]}
`)
	ok, failed := ackState(t, "in", 40)
	if want := []int64{3, 17, 18}; !slices.Equal(failed, want) {
		t.Errorf("failed acknowledgements %v, want %v", failed, want)
	}
	var want []int64
	for n := range int64(40) {
		if n != 3 && n != 17 && n != 18 {
			want = append(want, n)
		}
	}
	if got := flat("out"); !slices.Equal(got, want) || !slices.Equal(ok, want) {
		t.Errorf("written %v\nacknowledged %v\nwant %v", got, ok, want)
	}
}

// A processor's error sends the batch the pipeline got to error_output and
// acknowledges it once that wrote it; without error_output it is dropped
// and acknowledged (ArkFlow's behaviour, logged); when error_output fails
// too, it stays unacknowledged.
func TestProcessorErrorGoesToErrorOutput(t *testing.T) {
	query := "SELECT CAST(CASE WHEN n % 5 = 0 THEN 'bad' ELSE CAST(n AS VARCHAR) END AS BIGINT) AS n FROM flow"
	for _, c := range []struct {
		name, errOut string
		wantErrOut   []int64
		wantFailed   []int64
	}{
		{"error_output", "error_output: {type: collecting, label: errors}", []int64{0, 5, 10, 15}, nil},
		{"none", "", nil, nil},
		{"error_output fails", "error_output: {type: collecting, label: errors, fail: [10]}", []int64{0, 5, 15}, []int64{10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resetTestConnectors()
			runConfig(t, fmt.Sprintf(`
streams:
  - input: {type: counting, label: in, count: 20}
    pipeline:
      thread_num: 3
      processors:
        - {type: sql, query: %q}
    output: {type: collecting, label: out}
    %s
`, query, c.errOut))
			var want []int64
			for n := range int64(20) {
				if n%5 != 0 {
					want = append(want, n)
				}
			}
			if got := flat("out"); !slices.Equal(got, want) {
				t.Errorf("output %v, want %v", got, want)
			}
			if got := flat("errors"); !slices.Equal(got, c.wantErrOut) {
				t.Errorf("error_output %v, want %v", got, c.wantErrOut)
			}
			if _, failed := ackState(t, "in", 20); !slices.Equal(failed, c.wantFailed) {
				t.Errorf("unacknowledged %v, want %v", failed, c.wantFailed)
			}
		})
	}
}

// The batch processor joins count batches into one, in order, and holds
// their acknowledgements until the joined batch is written; the end of
// input emits the rest (ArkFlow's drops it).
func TestBatchProcessorHoldsAcknowledgements(t *testing.T) {
	resetTestConnectors()
	runConfig(t, `
streams:
  - input: {type: counting, label: in, count: 23}
    pipeline:
      thread_num: 4
      processors:
        - {type: batch, count: 5, timeout_ms: 60000}
    output: {type: collecting, label: out, fail: [12]}
`)
	testMu.Lock()
	var sizes []int
	for _, b := range collected["out"] {
		sizes = append(sizes, len(b))
	}
	testMu.Unlock()
	if want := []int{5, 5, 5, 3}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes written %v, want %v (the batch of 10–14, holding 12, failed)", sizes, want)
	}
	var want []int64
	for n := range int64(23) {
		if n < 10 || n >= 15 {
			want = append(want, n)
		}
	}
	ok, failed := ackState(t, "in", 23)
	if got := flat("out"); !slices.Equal(got, want) || !slices.Equal(ok, want) {
		t.Errorf("written %v\nacknowledged %v\nwant %v", got, ok, want)
	}
	if wantFailed := []int64{10, 11, 12, 13, 14}; !slices.Equal(failed, wantFailed) {
		t.Errorf("unacknowledged %v, want %v", failed, wantFailed)
	}
}

// A stop (ctx done) drains: reading ends, and every batch read is either
// written and acknowledged, or acknowledged with an error; no batch is
// acknowledged without being written, and none is left without an answer.
//
// With a drain timeout too short to finish, the processors are cut short:
// what they held is not acknowledged either (a cancelled query is not a
// processor's failure, to be dropped).
func TestStopDrains(t *testing.T) {
	for _, c := range []struct {
		name  string
		drain time.Duration
	}{{"drained", time.Minute}, {"cut short", time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) { stopAndCheck(t, c.drain) })
	}
}

func stopAndCheck(t *testing.T, drain time.Duration) {
	resetTestConnectors()
	cfg, err := stream.Parse([]byte(`
streams:
  - input: {type: counting, label: in, count: 100000000}
    buffer: {type: memory, capacity: 50, timeout: 1h}
    pipeline:
      thread_num: 4
      processors:
        - {type: sql, query: "SELECT n FROM flow, range(20000) r WHERE r.range = 0"}
        - {type: batch, count: 7, timeout_ms: 60000}
    output: {type: collecting, label: out}
`), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := stream.Run(ctx, cfg, stream.WithDataDir(t.TempDir()), stream.WithDrainTimeout(drain)); err != nil {
		t.Fatal(err)
	}
	testMu.Lock()
	defer testMu.Unlock()
	written := map[int64]bool{}
	for _, b := range collected["out"] {
		for _, n := range b {
			written[n] = true
		}
	}
	if len(acks["in"]) == 0 {
		t.Fatal("nothing was read")
	}
	for n, errs := range acks["in"] {
		switch {
		case len(errs) != 1:
			t.Errorf("batch %d acknowledged %d times", n, len(errs))
		case errs[0] == nil && !written[n]:
			t.Errorf("batch %d acknowledged and not written", n)
		case errs[0] != nil && written[n]:
			t.Errorf("batch %d written and acknowledged with %v", n, errs[0])
		}
	}
	t.Logf("%d batches read, %d written", len(acks["in"]), len(written))
}

// Codecs: json and debezium_json decode an input's payloads into columns
// (its __meta_* columns kept), json encodes an output's rows into the
// payload it writes.
func TestCodecs(t *testing.T) {
	var out strings.Builder
	cfg, err := stream.Parse([]byte(`
streams:
  - input:
      type: memory
      messages:
        - '{"id": 1, "name": "ann", "score": 1.5}'
        - '{"id": 2, "name": "bob", "score": 2}'
      codec: {type: json}
    pipeline:
      thread_num: 1
      processors:
        - {type: sql, query: "SELECT id, upper(name) AS name, score * 2 AS score, __meta_offset AS off FROM flow"}
    output: {type: stdout, codec: {type: json}}
  - input:
      type: memory
      messages:
        - '{"payload": {"before": null, "after": {"id": 7, "name": "cyd"}, "op": "c", "ts_ms": 1700000000000, "source": {"db": "shop", "table": "users"}}}'
        - '{"payload": {"before": {"id": 7, "name": "cyd"}, "after": null, "op": "d", "ts_ms": 1700000000001, "source": {"db": "shop", "table": "users"}}}'
      codec: {type: debezium_json}
    pipeline:
      thread_num: 1
      processors:
        - {type: sql, query: "SELECT op, id, name, source_db, source_table, ts_ms FROM flow"}
    output: {type: stdout}
`), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Run(context.Background(), cfg, stream.WithStdout(&lockedWriter{w: &out})); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	want := []string{
		`{"id":1,"name":"ANN","score":3.0,"off":0}`,
		`{"id":2,"name":"BOB","score":4,"off":1}`, // its own batch: score inferred as an integer
		`{"op":"c","id":7,"name":"cyd","source_db":"shop","source_table":"users","ts_ms":1700000000000}`,
		`{"op":"d","id":7,"name":"cyd","source_db":"shop","source_table":"users","ts_ms":1700000000001}`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// lockedWriter serializes writes of concurrent streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A sql processor's temporary_list joins each batch with rows looked up in
// Redis (ARKFLOW_TEST_REDIS_URL): a fixed key of a string (value), the
// batch's own sensors as keys (expr), and a list.
func TestRedisTemporary(t *testing.T) {
	url := os.Getenv("ARKFLOW_TEST_REDIS_URL")
	if url == "" {
		t.Skip("no Redis server: ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -run TestRedisTemporary ./stream/ starts one")
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opts)
	defer rc.Close()
	ctx := context.Background()
	p := fmt.Sprintf("tmp-%d-", time.Now().UnixNano())
	for k, v := range map[string]string{
		p + "cfg": `{"x": "s1", "limit": 5}`, p + "s1": `{"sensor": "s1", "room": "hall"}`, p + "s2": `{"sensor": "s2", "room": "attic"}`,
	} {
		if err := rc.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rc.RPush(ctx, p+"list", `{"n": 1}`, `{"n": 2}`)
	rc.Expire(ctx, p+"list", time.Minute)
	var out strings.Builder
	cfg, err := stream.Parse(fmt.Appendf(nil, `
streams:
  - input:
      type: memory
      messages: ['{"sensor": "s1", "v": 7}', '{"sensor": "s2", "v": 3}']
      codec: {type: json}
    temporary:
      - {name: kv, type: redis, mode: {type: single, url: %q}, redis_type: {type: string}, codec: {type: json}}
      - {name: lists, type: redis, mode: {type: single, url: %q}, redis_type: {type: list}, codec: {type: json}}
    pipeline:
      thread_num: 2
      processors:
        - type: sql
          query: "SELECT f.sensor, f.v, r.room, c.limit AS lim, (SELECT sum(n) FROM l) AS ns FROM flow f JOIN rooms r ON f.sensor = r.sensor JOIN cfg c ON true ORDER BY f.sensor"
          temporary_list:
            - {name: kv, table_name: cfg, key: {type: value, value: %q}}
            - {name: kv, table_name: rooms, key: {type: expr, expr: "'%s' || sensor"}}
            - {name: lists, table_name: l, key: {type: value, value: %q}}
    output: {type: stdout}
`, url, url, p+"cfg", p, p+"list"), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Run(ctx, cfg, stream.WithStdout(&lockedWriter{w: &out})); err != nil {
		t.Fatal(err)
	}
	want := `{"sensor":"s1","v":7,"room":"hall","lim":5,"ns":3}` + "\n" + `{"sensor":"s2","v":3,"room":"attic","lim":5,"ns":3}` + "\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}
