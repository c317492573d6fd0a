package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// windowSpec is two Redis streams → a keyed tumbling window (count and
// sum per user and 100 ms of event time) → one Redis hash per user, a
// field per window start, both computed per row by expressions. The
// out-of-orderness (200 ms) exceeds the event-time span of a batch (16
// rows, 150 ms): no row is late.
const windowSpec = `
id: redis-windows
operators:
  - {id: in, kind: source}
  - id: win
    kind: window
    key_field: user
    config:
      window: {type: tumbling, size_ms: 100}
      aggregates: [{function: count, as: n}, {function: sum, field: amount, as: total}]
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: win, partitioned: true}
  - {id: b, from: win, to: out}
sources:
  - operator_id: in
    input_type: redis
    config:
      mode: {type: single, url: %[1]q}
      redis_type: {type: stream, streams: [%[2]q, %[3]q], group: win}
      schema: [{name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
      batch_size: 16
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 200}}
sinks:
  - operator_id: out
    output_type: redis
    config:
      mode: {type: single, url: %[1]q}
      redis_type:
        type: hashes
        key: {type: expr, expr: "concat('%[4]s', user)"}
        field: {type: expr, expr: window_start}
`

// Entry i of stream p has user u((i+p) mod 3), event time 1000 + 10·i
// and amount i + p; tail entries of user "end" after them move the
// watermark past the last data window. Every hash field must equal a plain loop's count
// and sum of its user and window.
func TestWindowsIntoHashes(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := uniqueKey(t, "win")
	streams := [2]string{prefix + ":s0", prefix + ":s1"}
	const n, tail = 60, 25
	want := map[string]string{}
	sums := map[string][2]int64{}
	for p, key := range streams {
		var payloads [][]byte
		for i := 0; i < n+tail; i++ {
			user, ts, amount := fmt.Sprintf("u%d", (i+p)%3), 1000+10*int64(i), int64(i+p)
			if i >= n {
				user = "end"
			} else {
				k := fmt.Sprintf("%s|%d", user, ts-ts%100)
				s := sums[k]
				sums[k] = [2]int64{s[0] + 1, s[1] + amount}
			}
			payloads = append(payloads, []byte(fmt.Sprintf(`{"user":%q,"ts":%d,"amount":%d}`, user, ts, amount)))
		}
		xadd(t, c, key, payloads...)
	}
	for k, s := range sums {
		want[k] = fmt.Sprint(s[0], " ", s[1])
	}
	s, err := job.Parse([]byte(fmt.Sprintf(windowSpec, serverURL(t), streams[0], streams[1], prefix+":h:")))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(s, arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	got := map[string]string{}
	for len(got) < len(want) {
		select {
		case err := <-done:
			t.Fatalf("the job ended: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		got = readHashes(t, c, prefix+":h:")
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := j.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got = readHashes(t, c, prefix+":h:")
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("window %s: %q, want %q", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d windows written, want %d", len(got), len(want))
	}
}

// readHashes returns every field of the hashes under prefix as
// "USER|WINDOW_START_MS" → "n total".
func readHashes(t *testing.T, c *goredis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		fields, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range fields {
			var row struct{ N, Total int64 }
			if err := json.Unmarshal([]byte(v), &row); err != nil {
				t.Fatalf("%s %s: %v", key, f, err)
			}
			out[strings.TrimPrefix(key, prefix)+"|"+f] = fmt.Sprint(row.N, " ", row.Total)
		}
	}
	return out
}
