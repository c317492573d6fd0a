package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// rowsOf returns the ids and offsets of batches of conformance rows.
func rowsOf(bs []connectors.Batch) (ids, offs []int64) {
	for _, b := range bs {
		idc := b.Record.Column(0).(*array.Int64)
		oc := b.Record.Column(b.Record.Schema().FieldIndices(connectors.MetaOffset)[0]).(*array.Int64)
		for i := 0; i < int(b.Record.NumRows()); i++ {
			ids = append(ids, idc.Value(i))
			offs = append(offs, oc.Value(i))
		}
	}
	return ids, offs
}

func jsonRows(from, to int64) [][]byte {
	var out [][]byte
	for id := from; id < to; id++ {
		out = append(out, conformance.Row{ID: id, Name: fmt.Sprint("r", id)}.JSON())
	}
	return out
}

func jsInput(t testing.TB, stream, consumer string, batch int) *input {
	return buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeJetStream, Stream: stream, ConsumerName: consumer}, Schema: conformance.Declared(), BatchSize: batch})
}

// consumerInfo returns the server's view of a consumer.
func consumerInfo(t testing.TB, js jetstream.JetStream, stream, consumer string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitAckFloor waits until the consumer's ack floor is want (the
// acknowledgements are sent without waiting for the server).
func waitAckFloor(t testing.TB, js jetstream.JetStream, stream, consumer string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := consumerInfo(t, js, stream, consumer).AckFloor.Stream
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s: ack floor %d, want %d", consumer, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The consumer's ack floor is the source's contiguous acknowledged
// frontier: acknowledging every batch but the first moves it nowhere
// (checked after Close, which flushes the connection, so every
// acknowledgement sent has reached the server); acknowledging all of them
// moves it to the last message.
func TestAckFloorIsTheFrontier(t *testing.T) {
	stream, js := newStream(t, nil)
	seqs := publishJS(t, js, stream+".a", jsonRows(0, 9)...)
	consumer := uniqueName(t, "c")
	in := jsInput(t, stream, consumer, 3)
	src := openSource(t, in, 0, 1, nil)
	bs := readBatches(t, src, 9)
	if len(bs) < 3 {
		t.Fatalf("%d batches of 9 rows at batch size 3", len(bs))
	}
	for i := len(bs) - 1; i >= 1; i-- {
		bs[i].Ack(nil)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := consumerInfo(t, js, stream, consumer).AckFloor.Stream; got != 0 {
		t.Fatalf("ack floor %d while the first batch is unacknowledged", got)
	}
	src = openSource(t, in, 0, 1, nil)
	bs = readBatches(t, src, 9)
	if ids, _ := rowsOf(bs); fmt.Sprint(ids) != "[0 1 2 3 4 5 6 7 8]" {
		t.Fatalf("after a restart without a position: ids %v", ids)
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	waitAckFloor(t, js, stream, consumer, seqs[8])
	if pos := src.(connectors.Positioner).Positions(); len(pos) != 1 || pos[0].Offset != int64(seqs[8])+1 || pos[0].Topic != stream {
		t.Errorf("positions %v, want %s@%d", pos, stream, seqs[8]+1)
	}
}

// A restore resets the consumer to the restored position, below its ack
// floor: the acknowledged messages after it are read again. Without a
// position, a new source resumes at the ack floor + 1, reading again at
// once (not after the ack wait) what was read and not acknowledged.
func TestRestoreReadsAgainAfterThePosition(t *testing.T) {
	stream, js := newStream(t, nil)
	seqs := publishJS(t, js, stream+".a", jsonRows(0, 10)...)
	consumer := uniqueName(t, "c")
	in := jsInput(t, stream, consumer, 100)
	first := openSource(t, in, 0, 1, nil)
	bs := readBatches(t, first, 10)
	for _, b := range bs {
		b.Ack(nil)
	}
	waitAckFloor(t, js, stream, consumer, seqs[9])
	_ = first.Close(context.Background())

	restored := openSource(t, in, 0, 1, []connectors.Position{{Topic: stream, Partition: 0, Offset: int64(seqs[4])}})
	ids, offs := rowsOf(readBatches(t, restored, 6))
	if fmt.Sprint(ids) != "[4 5 6 7 8 9]" || offs[0] != int64(seqs[4]) {
		t.Fatalf("after a restore to sequence %d: ids %v offsets %v", seqs[4], ids, offs)
	}
	if pos := restored.(connectors.Positioner).Positions(); pos[0].Offset != int64(seqs[4]) {
		t.Errorf("position %v before any acknowledgement, want the restored %d", pos, seqs[4])
	}
	_ = restored.Close(context.Background())

	// The restore left the ack floor at seqs[3]; nothing was acknowledged
	// since, so a source without a position reads from seqs[4] again.
	again := openSource(t, in, 0, 1, nil)
	ids, _ = rowsOf(readBatches(t, again, 6))
	if fmt.Sprint(ids) != "[4 5 6 7 8 9]" {
		t.Fatalf("without a position after the restore: ids %v", ids)
	}
}

// A message the server delivers again because its ack wait ran out while
// the job held it is skipped: every row is read once, and the next
// message is the one after.
func TestRedeliveriesAreSkipped(t *testing.T) {
	stream, js := newStream(t, nil)
	seqs := publishJS(t, js, stream+".a", jsonRows(0, 5)...)
	in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeJetStream, Stream: stream, ConsumerName: uniqueName(t, "c"), AckWaitMS: 200},
		Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	bs := readBatches(t, src, 5)
	// Hold them unacknowledged until the server delivered every one again
	// (Read discards them, returning nothing until ctx ends).
	deadline := time.Now().Add(30 * time.Second)
	for skipped(src) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d redeliveries skipped in 30 s", skipped(src))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		b, err := src.Read(ctx)
		cancel()
		if err == nil {
			ids, _ := rowsOf([]connectors.Batch{b})
			t.Fatalf("a redelivery was read again: ids %v", ids)
		}
	}
	next := publishJS(t, js, stream+".a", jsonRows(5, 6)...)
	ids, offs := rowsOf(readBatches(t, src, 1))
	if fmt.Sprint(ids) != "[5]" || offs[0] != int64(next[0]) {
		t.Fatalf("after the redeliveries: ids %v offsets %v", ids, offs)
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	if pos := src.(connectors.Positioner).Positions(); pos[0].Offset != int64(seqs[4])+1 {
		t.Errorf("position %v, want %d", pos, seqs[4]+1)
	}
}

func skipped(src connectors.Source) int64 {
	for _, m := range src.(connectors.Metered).Metrics() {
		if m.Name == MetricRedeliveriesSkipped {
			return int64(m.Value)
		}
	}
	return 0
}

// A payload that does not decode fails the source with an error naming
// the stream, subject, sequence and field, after the batch of the rows
// before it; a later Read returns the error again.
func TestBadPayloadNamesMessage(t *testing.T) {
	stream, js := newStream(t, nil)
	subject := stream + ".a"
	seqs := publishJS(t, js, subject, []byte(`{"id":1,"name":"a"}`), []byte(`{"id":"two","name":"b"}`), []byte(`{"id":3}`))
	src := openSource(t, jsInput(t, stream, uniqueName(t, "c"), 10), 0, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := src.Read(ctx)
	if err != nil {
		t.Fatalf("the row before the bad one: %v", err)
	}
	ids, _ := rowsOf([]connectors.Batch{b})
	b.Record.Release()
	if fmt.Sprint(ids) != "[1]" {
		t.Fatalf("the batch before the bad payload: ids %v", ids)
	}
	want := fmt.Sprintf(`nats: stream %q subject %q sequence %d: field "id": must be an integer`, stream, subject, seqs[1])
	for i := 0; i < 2; i++ {
		_, err = src.Read(ctx)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Read %d: %v\nwant %s", i+2, err, want)
		}
	}
	// Not JSON at all.
	stream2, js2 := newStream(t, nil)
	seq := publishJS(t, js2, stream2+".a", []byte("not json"))
	src2 := openSource(t, jsInput(t, stream2, uniqueName(t, "c"), 10), 0, 1, nil)
	_, err = src2.Read(ctx)
	want = fmt.Sprintf(`nats: stream %q subject %q sequence %d:`, stream2, stream2+".a", seq[0])
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Read of a payload that is not JSON: %v\nwant %s", err, want)
	}
}

// A restored position whose messages the stream deleted fails the
// source: it never skips messages on its own.
func TestRestoredPositionGone(t *testing.T) {
	stream, js := newStream(t, nil)
	publishJS(t, js, stream+".a", jsonRows(0, 5)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeKeep(2)); err != nil {
		t.Fatal(err)
	}
	src, err := jsInput(t, stream, uniqueName(t, "c"), 10).NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if err := src.(connectors.Positioner).Seek([]connectors.Position{{Topic: stream, Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	err = src.Connect(ctx)
	want := fmt.Sprintf("nats: stream %q: the restored position 2 is gone: the stream starts at sequence 4 now", stream)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Connect: %v\nwant %s", err, want)
	}
}

// Positions name their partition's subject: a restore into a config whose
// subjects changed order is refused; a missing stream is named.
func TestSeekChecksSubjectsAndStream(t *testing.T) {
	in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeJetStream, Stream: "NOPE_" + uniqueName(t, "s"), ConsumerName: "c", Subjects: []string{"b", "a"}}})
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	err = src.(connectors.Positioner).Seek([]connectors.Position{{Topic: "a", Partition: 0, Offset: 5}})
	want := `nats: the position of partition 0 is for "a", but partition 0 reads "b" now: mode.subjects must keep their order across restarts`
	if err == nil || err.Error() != want {
		t.Fatalf("Seek: %v\nwant %s", err, want)
	}
	err = src.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not exist (create it first") || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Connect to a missing stream: %v", err)
	}
}

// Core NATS: messages published once the source is connected are read
// with offsets that carry on from the restored position, or from the
// start time when that is later; a subtask without a queue group other
// than 0 reads nothing; with a queue group every subtask reads its share.
func TestCoreSource(t *testing.T) {
	subject := uniqueName(t, "core")
	in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeRegular, Subject: subject + ".>"}, Schema: conformance.Declared()})
	before := time.Now().UnixNano()
	src := openSource(t, in, 0, 2, nil)
	idle := openSource(t, in, 1, 2, nil)
	nc := conn(t)
	for _, p := range jsonRows(0, 5) {
		if err := nc.Publish(subject+".x", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	bs := readBatches(t, src, 5)
	ids, offs := rowsOf(bs)
	if fmt.Sprint(ids) != "[0 1 2 3 4]" {
		t.Fatalf("ids %v", ids)
	}
	for i, o := range offs {
		if o < before || (i > 0 && o != offs[i-1]+1) {
			t.Fatalf("offsets %v: want consecutive from at least the start time %d", offs, before)
		}
	}
	topic := bs[0].Record.Column(bs[0].Record.Schema().FieldIndices(connectors.MetaTopic)[0]).(*array.String).Value(0)
	if topic != subject+".x" {
		t.Errorf("__meta_topic %q", topic)
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	if pos := src.(connectors.Positioner).Positions(); len(pos) != 1 || pos[0].Offset != offs[4]+1 {
		t.Errorf("positions %v, want %d", pos, offs[4]+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if b, err := idle.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("subtask 1 without a queue group read %v, %v", b.Record, err)
	}
	_ = src.Close(context.Background())

	// A restored position above the clock wins.
	far := time.Now().Add(time.Hour).UnixNano()
	resumed := openSource(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: far}})
	if err := nc.Publish(subject+".y", jsonRows(9, 10)[0]); err != nil {
		t.Fatal(err)
	}
	if _, offs := rowsOf(readBatches(t, resumed, 1)); offs[0] != far {
		t.Errorf("offset after a restore to %d: %d", far, offs[0])
	}
}

func TestCoreQueueGroup(t *testing.T) {
	subject := uniqueName(t, "core")
	in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeRegular, Subject: subject, QueueGroup: "q"}, Schema: conformance.Declared()})
	srcs := []connectors.Source{openSource(t, in, 0, 2, nil), openSource(t, in, 1, 2, nil)}
	nc := conn(t)
	const n = 200
	for _, p := range jsonRows(0, n) {
		if err := nc.Publish(subject, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Read both until every message came, each exactly once.
	seen := map[int64]int{}
	per := [2]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		for i, s := range srcs {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			b, err := s.Read(ctx)
			cancel()
			if err != nil {
				continue
			}
			if p := b.Partition; p != i {
				t.Errorf("subtask %d: batch of partition %d", i, p)
			}
			ids, _ := rowsOf([]connectors.Batch{b})
			b.Record.Release()
			for _, id := range ids {
				seen[id]++
				per[i]++
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d messages read", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %d read %d times", id, c)
		}
	}
	if per[0] == 0 || per[1] == 0 {
		t.Errorf("the queue group gave one subtask everything: %v", per)
	}
}

// A core payload that does not decode fails the source, naming the
// subject, the offset and the field.
func TestCoreBadPayload(t *testing.T) {
	subject := uniqueName(t, "core")
	in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeRegular, Subject: subject}, Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	nc := conn(t)
	if err := nc.Publish(subject, []byte(`{"id":1.5}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := src.Read(ctx)
	first := src.(connectors.Positioner).Positions()[0].Offset
	want := fmt.Sprintf(`nats: subject %q message at offset %d: field "id": must be an integer`, subject, first)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Read: %v\nwant %s", err, want)
	}
}

// The server is killed and started again (same port, same store) while
// a JetStream source reads: the source reconnects by itself and reads the
// messages published after the restart; none is read twice, none skipped.
func TestJetStreamSourceSurvivesServerRestart(t *testing.T) {
	srv := newServer(t, "listen: 127.0.0.1:PORT\njetstream: {store_dir: \"STORE\"}\n")
	url := fmt.Sprintf("nats://127.0.0.1:%d", srv.port)
	nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js := jsOf(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}}); err != nil {
		t.Fatal(err)
	}
	publishJS(t, js, "r.a", jsonRows(0, 10)...)
	in := buildInput(t, SourceConfig{URL: url, Mode: SourceMode{Type: ModeJetStream, Stream: "R", ConsumerName: "c"}, Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	first := readBatches(t, src, 10)
	for _, b := range first {
		b.Ack(nil)
	}
	srv.kill()
	srv.start()
	// Publishing waits for the stream to be back (a publish before it is
	// refused, and retried).
	for {
		if _, err := js.Publish(ctx, "r.a", jsonRows(10, 11)[0]); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("publishing after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	publishJS(t, js, "r.a", jsonRows(11, 20)...)
	ids, _ := rowsOf(readBatches(t, src, 10))
	if fmt.Sprint(ids) != "[10 11 12 13 14 15 16 17 18 19]" {
		t.Fatalf("after the server's restart: ids %v", ids)
	}
}
