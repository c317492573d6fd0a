package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

func jsonRows(from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, conformance.Row{ID: int64(i), Name: fmt.Sprint("r", i)}.JSON())
	}
	return out
}

// idsOf returns the id column of a batch.
func idsOf(rec arrow.RecordBatch) []int64 {
	col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
	return append([]int64(nil), col.Int64Values()...)
}

func streamInput(t testing.TB, batch int, keys ...string) *input {
	return buildInput(t, SourceConfig{Mode: single(t), RedisType: SourceType{Type: TypeStream, Streams: keys, Group: "g"}, Schema: conformance.Declared(), BatchSize: batch})
}

// An entry whose payload is not JSON, and one without the payload field,
// fail the source after the batch of the entries before them, naming the
// stream, the entry ID and the field; the position stays before the bad
// entry, and a restart fails on it again: it is never skipped.
func TestMalformedEntryFailsSource(t *testing.T) {
	c := newClient(t)
	for _, bad := range []struct {
		name   string
		values []any
		want   string
	}{
		{"invalid JSON", []any{DefaultField, `{"id": 3, "name": `}, `field "value"`},
		{"wrong type", []any{DefaultField, `{"id": "three", "name": "x"}`}, `id`},
		{"no payload field", []any{"other", `{"id": 3}`}, `has no field "value"`},
	} {
		t.Run(bad.name, func(t *testing.T) {
			key := uniqueKey(t, "bad")
			good := xadd(t, c, key, jsonRows(0, 3)...)
			lastGood, _ := parseID(good[2])
			badID := c.XAdd(context.Background(), &goredis.XAddArgs{Stream: key, Values: bad.values}).Val()
			xadd(t, c, key, jsonRows(4, 6)...)
			in := streamInput(t, 100, key)
			for run := 0; run < 2; run++ {
				src := openSource(t, in, 0, 1, nil)
				if run == 0 {
					b, err := readBatch(t, src)
					if err != nil {
						t.Fatal(err)
					}
					if got := fmt.Sprint(idsOf(b.Record)); got != "[0 1 2]" {
						t.Fatalf("the batch before the bad entry: ids %s, want [0 1 2]", got)
					}
					b.Ack(nil)
					b.Record.Release()
				}
				_, err := readBatch(t, src)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stream %q entry %s", key, badID)) || !strings.Contains(err.Error(), bad.want) {
					t.Fatalf("run %d: Read: %v, want an error naming stream %q, entry %s and %s", run, err, key, badID, bad.want)
				}
				off, _ := parseID(badID)
				if pos := src.(connectors.Positioner).Positions(); len(pos) != 1 || pos[0].Offset > off || pos[0].Offset <= lastGood {
					t.Errorf("run %d: positions %v, want past entry 2 (offset %d) and not past the bad entry (offset %d)", run, pos, lastGood, off)
				}
				src.Close(context.Background())
			}
		})
	}
}

// Entries read and not acknowledged are pending in the group; a restart
// reads them again first (counted as reclaimed), and nothing twice once
// acknowledged.
func TestRestartReadsPendingAgain(t *testing.T) {
	c := newClient(t)
	key := uniqueKey(t, "pel")
	xadd(t, c, key, jsonRows(0, 6)...)
	in := streamInput(t, 4, key)

	src := openSource(t, in, 0, 1, nil)
	b1, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(idsOf(b1.Record), idsOf(b2.Record)); got != "[0 1 2 3] [4 5]" {
		t.Fatalf("first run read %s", got)
	}
	b2.Ack(nil) // after an unacknowledged batch: the frontier does not move
	src.Close(context.Background())
	if n := c.XPending(context.Background(), key, "g").Val().Count; n != 6 {
		t.Fatalf("%d entries pending after the first run, want 6", n)
	}

	src = openSource(t, in, 0, 1, nil)
	var got []int64
	for len(got) < 6 {
		b, err := readBatch(t, src)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, idsOf(b.Record)...)
		b.Ack(nil)
		b.Record.Release()
	}
	if fmt.Sprint(got) != "[0 1 2 3 4 5]" {
		t.Fatalf("the restart read %v, want every pending entry again, in order", got)
	}
	if m := src.(connectors.Metered).Metrics(); m[1].Name != MetricReclaimed || m[1].Value != 6 {
		t.Errorf("metrics %v: want %s 6", m, MetricReclaimed)
	}
	src.Close(context.Background())
	if n := c.XPending(context.Background(), key, "g").Val().Count; n != 0 {
		t.Fatalf("%d entries pending after everything was acknowledged, want 0", n)
	}

	xadd(t, c, key, jsonRows(6, 8)...)
	src = openSource(t, in, 0, 1, nil)
	b, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(idsOf(b.Record)); got != "[6 7]" {
		t.Fatalf("the third run read %s, want only the new entries [6 7]", got)
	}
}

// A Seek to a checkpoint's position reads again exactly what came after
// it, also entries the group had acknowledged, and acknowledges the
// pending entries below it (the checkpoint holds them).
func TestSeekRereadsAfterPosition(t *testing.T) {
	c := newClient(t)
	key := uniqueKey(t, "seek")
	ids := xadd(t, c, key, jsonRows(0, 10)...)
	in := streamInput(t, 100, key)
	src := openSource(t, in, 0, 1, nil)
	b, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Record.NumRows(); n != 10 {
		t.Fatalf("read %d rows, want 10", n)
	}
	src.Close(context.Background()) // nothing acknowledged: 10 pending

	pos, _ := parseID(ids[4])
	src = openSource(t, in, 0, 1, []connectors.Position{{Topic: key, Partition: 0, Offset: pos}})
	b, err = readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(idsOf(b.Record)); got != "[4 5 6 7 8 9]" {
		t.Fatalf("after a Seek to entry 4's offset: ids %s, want [4 5 6 7 8 9]", got)
	}
	if n := c.XPending(context.Background(), key, "g").Val().Count; n != 6 {
		t.Errorf("%d entries pending, want 6: the 4 below the position are acknowledged", n)
	}
	b.Ack(nil)
	src.Close(context.Background())

	// A position from another stream order is refused.
	src2, _ := in.NewSource(connectors.TaskInfo{JobID: "j", OperatorID: "src", Parallelism: 1})
	if err := src2.(connectors.Positioner).Seek([]connectors.Position{{Topic: "other", Partition: 0, Offset: 1}}); err == nil || !strings.Contains(err.Error(), "keep their order") {
		t.Errorf("Seek to another stream's position: %v", err)
	}
}

func TestEntryIDOffsets(t *testing.T) {
	for _, c := range []struct {
		id   string
		off  int64
		fail bool
	}{
		{"0-0", 0, false},
		{"0-1", 1, false},
		{"1-0", 1 << 20, false},
		{"1700000000000-5", 1700000000000<<20 | 5, false},
		{"1-1048575", 1<<20 | 1048575, false},
		{"1-1048576", 0, true},
		{"8796093022208-0", 0, true},
		{"x-1", 0, true},
		{"12", 0, true},
	} {
		off, err := parseID(c.id)
		if (err != nil) != c.fail || (!c.fail && off != c.off) {
			t.Errorf("parseID(%q) = %d, %v; want %d (fail %v)", c.id, off, err, c.off, c.fail)
			continue
		}
		if !c.fail && formatID(off) != c.id {
			t.Errorf("formatID(%d) = %q, want %q", off, formatID(off), c.id)
		}
	}
	for off, want := range map[int64]string{0: "0-0", 1: "0-0", 2: "0-1", 1 << 20: "0-18446744073709551615", 5<<20 | 3: "5-2"} {
		if got := idBefore(off); got != want {
			t.Errorf("idBefore(%d) = %q, want %q", off, got, want)
		}
	}
}

// Elements of a list move to the processing list when read and leave it
// when acknowledged; a restart reads the unacknowledged ones again first.
func TestListSource(t *testing.T) {
	c := newClient(t)
	key := uniqueKey(t, "list")
	for _, p := range jsonRows(0, 5) {
		c.RPush(context.Background(), key, p)
	}
	in := buildInput(t, SourceConfig{Mode: single(t), RedisType: SourceType{Type: TypeList, List: []string{key}}, Schema: conformance.Declared(), BatchSize: 3})
	src := openSource(t, in, 0, 1, nil)
	b1, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(idsOf(b1.Record), idsOf(b2.Record)); got != "[0 1 2] [3 4]" {
		t.Fatalf("read %s", got)
	}
	b1.Ack(nil)
	src.Close(context.Background())
	proc := key + ":processing:arkflow"
	if got := c.LRange(context.Background(), proc, 0, -1).Val(); len(got) != 2 || !strings.Contains(got[0], `"id":3`) {
		t.Fatalf("processing list after the first run: %q, want elements 3 and 4", got)
	}
	c.RPush(context.Background(), key, jsonRows(5, 6)[0])
	src = openSource(t, in, 0, 1, nil)
	var got []int64
	for len(got) < 3 {
		b, err := readBatch(t, src)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, idsOf(b.Record)...)
		b.Ack(nil)
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("the restart read %v, want the unacknowledged [3 4] first, then [5]", got)
	}
	src.Close(context.Background())
	if n := c.LLen(context.Background(), proc).Val(); n != 0 {
		t.Errorf("processing list holds %d elements after every one was acknowledged", n)
	}
}

// Pub/sub: messages published while subscribed are read; the source is
// unrewindable, and a payload that does not decode fails it naming the
// channel.
func TestSubscribeSource(t *testing.T) {
	c := newClient(t)
	ch := uniqueKey(t, "ch")
	in := buildInput(t, SourceConfig{Mode: single(t), RedisType: SourceType{Type: TypeSubscribe, Subscribe: &Subscribe{Type: "patterns", Patterns: []string{ch + ":*"}}}, Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	if _, ok := src.(connectors.Unrewindable); !ok {
		t.Fatal("the pub/sub source must be Unrewindable")
	}
	for _, p := range jsonRows(0, 3) {
		c.Publish(context.Background(), ch+":a", p)
	}
	c.Publish(context.Background(), ch+":a", "not json")
	var got []int64
	var err error
	for err == nil {
		var b connectors.Batch
		if b, err = readBatch(t, src); err == nil {
			got = append(got, idsOf(b.Record)...)
			b.Record.Release()
		}
	}
	if fmt.Sprint(got) != "[0 1 2]" || !strings.Contains(err.Error(), fmt.Sprintf("channel %q", ch+":a")) {
		t.Fatalf("read %v then %v; want [0 1 2], then an error naming the channel", got, err)
	}
	// Subtask 1 does not subscribe: its Read waits for ctx.
	src1 := openSource(t, in, 1, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := src1.Read(ctx); err != context.DeadlineExceeded {
		t.Errorf("subtask 1 Read: %v", err)
	}
}

// Entries a consumer of the group read and never acknowledged (it died,
// or the consumer was renamed) are read again by the source, which moves
// the group back to its first pending entry and takes them over.
func TestReclaimsOtherConsumersPending(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	key := uniqueKey(t, "dead")
	xadd(t, c, key, jsonRows(0, 4)...)
	if err := c.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{key, ">"}, Count: 3}).Err(); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, streamInput(t, 100, key), 0, 1, nil)
	var got []int64
	for len(got) < 4 {
		b, err := readBatch(t, src)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, idsOf(b.Record)...)
		b.Ack(nil)
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("read %v, want the dead consumer's pending [0 1 2], then [3]", got)
	}
	src.Close(ctx)
	if n := c.XPending(ctx, key, "g").Val().Count; n != 0 {
		t.Errorf("%d entries still pending", n)
	}
}

// A list element that does not decode fails the source after the batch
// of the elements before it, naming the list and the processing list
// that keeps it; a restart fails on it again.
func TestMalformedListElementFailsSource(t *testing.T) {
	c := newClient(t)
	key := uniqueKey(t, "badlist")
	for _, v := range append(jsonRows(0, 2), []byte(`{"id":`), jsonRows(3, 4)[0]) {
		c.RPush(context.Background(), key, v)
	}
	in := buildInput(t, SourceConfig{Mode: single(t), RedisType: SourceType{Type: TypeList, List: []string{key}}, Schema: conformance.Declared()})
	for run := 0; run < 2; run++ {
		src := openSource(t, in, 0, 1, nil)
		if run == 0 {
			b, err := readBatch(t, src)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(idsOf(b.Record)); got != "[0 1]" {
				t.Fatalf("the batch before the bad element: %s", got)
			}
			b.Ack(nil)
		}
		_, err := readBatch(t, src)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("list %q", key)) || !strings.Contains(err.Error(), "processing list") {
			t.Fatalf("run %d: Read: %v, want an error naming the list and its processing list", run, err)
		}
		src.Close(context.Background())
	}
}
