package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// l3Spec is a Kafka → map → Kafka job: %[1]s job-level blocks, %[2]s the
// input's extra config, %[3]s the output's.
const l3Spec = `
id: l3
%[1]s
operators:
  - {id: in, kind: source}
  - {id: double, kind: map, config: {set: [{name: twice, expr: "id * 2"}]}}
  - {id: out, kind: sink}
edges:
  - {id: in-double, from: in, to: double}
  - {id: double-out, from: double, to: out}
sources:
  - operator_id: in
    input_type: kafka
    config:
      brokers: [%[4]q]
      topics: [%[5]q]
      consumer_group: %[6]q
      schema: [{name: id, type: int64, nullable: false}, {name: name, type: string}]
      batch_size: 8
      %[2]s
sinks:
  - operator_id: out
    output_type: kafka
    config:
      brokers: [%[4]q]
      topic: %[7]q
      key: name
      %[3]s
`

const (
	durable  = "durability: {sync: group_commit}"
	eos      = "exactly_once: true\n      transactional_id: l3-{subtask}"
	txnInput = "transactional_offsets: true"
)

func ckpt(ms int) string {
	return fmt.Sprintf("state: {backend: badger}\ncheckpoint: {interval_ms: %d, object_store_uri: \"file:///tmp/l3-checkpoints\"}", ms)
}

func l3SpecWith(jobExtra, inExtra, outExtra string) string {
	return l3SpecFor(jobExtra, inExtra, outExtra, "b:9092", "orders", "orders-copy", "orders-group")
}

func l3SpecFor(jobExtra, inExtra, outExtra, broker, in, out, group string) string {
	return fmt.Sprintf(l3Spec, jobExtra, inExtra, outExtra, broker, in, group, out)
}

// The fail-closed rules of L3 and the exactly-once requirements are
// validation errors naming the field.
func TestL3ValidationErrors(t *testing.T) {
	const group = "orders-group"
	pair := eos + "\n      offset_commit_group: " + group
	cases := []struct {
		name, jobExtra, inExtra, outExtra string
		want                              []string // "" : validates
	}{
		{"paired", durable, txnInput, pair, nil},
		{"paired with checkpoints and a WAL", ckpt(10000) + "\n" + durable, txnInput, pair, nil},
		{"checkpoints without a WAL", ckpt(10000), txnInput, pair, []string{
			`sinks[0].config.exactly_once: requires durability on its input: source "in" (sources[0]) has no durability block`,
		}},
		{"unclaimed input", durable, txnInput, eos, []string{
			`job "l3": operator "in": sources[0].config.transactional_offsets: consumer group "orders-group" is not claimed: with transactional_offsets: true the input commits no offsets itself, and no exactly-once kafka output of this job names "orders-group" in offset_commit_group, so the group's offsets would never move (a restart would re-read everything); add offset_commit_group: "orders-group" to the kafka output (with exactly_once: true), or remove transactional_offsets`,
		}},
		{"unclaimed input, at-least-once output", durable, txnInput, "", []string{
			`sources[0].config.transactional_offsets: consumer group "orders-group" is not claimed`,
		}},
		{"group without a transactional input", durable, "", pair, []string{
			`job "l3": operator "out": sinks[0].config.offset_commit_group: names consumer group "orders-group", but no kafka input of this job has consumer_group "orders-group" with transactional_offsets: true (offset_commit_group commits that input's offsets inside this output's transactions)`,
		}},
		{"other group", durable, txnInput, eos + "\n      offset_commit_group: other", []string{
			`sinks[0].config.offset_commit_group: names consumer group "other", but no kafka input of this job has consumer_group "other"`,
			`sources[0].config.transactional_offsets: consumer group "orders-group" is not claimed`,
		}},
		{"offset_commit_group without exactly_once", durable, txnInput, "offset_commit_group: " + group, []string{
			`sinks[0].config.offset_commit_group: requires exactly_once: true (the input's offsets are committed inside the output's transactions)`,
		}},
		{"exactly_once without durability", "", txnInput, pair, []string{
			`job "l3": operator "out": sinks[0].config.exactly_once: requires durability on its input: source "in" (sources[0]) has no durability block; add durability (to the job or to sources[0]): exactly-once stands on at-least-once ingestion`,
		}},
		{"default transaction.timeout.ms vs checkpoint interval", ckpt(60000) + "\n" + durable, "", eos, []string{
			`job "l3": operator "out": sinks[0].config.properties.transaction.timeout.ms: transaction.timeout.ms (60000, librdkafka's default) must exceed checkpoint.interval_ms (60000): raise properties.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms) or lower checkpoint.interval_ms`,
		}},
		{"transaction.timeout.ms vs checkpoint interval", ckpt(5000) + "\n" + durable, "", eos + "\n      properties: {transaction.timeout.ms: 4000}", []string{
			`sinks[0].config.properties.transaction.timeout.ms: transaction.timeout.ms (4000) must exceed checkpoint.interval_ms (5000)`,
		}},
		{"transaction.timeout.ms above the interval", ckpt(5000) + "\n" + durable, "", eos + "\n      properties: {transaction.timeout.ms: 5001}", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := job.Parse([]byte(l3SpecWith(c.jobExtra, c.inExtra, c.outExtra)))
			if err != nil {
				t.Fatal(err)
			}
			err = arkflow.Validate(spec, arkflow.WithDataDir(t.TempDir()))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validated; want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v\nwant it to contain %s", err, w)
				}
			}
		})
	}
	// A multi-topic transactional input is rejected.
	spec := l3SpecWith(durable, txnInput, pair)
	spec = strings.Replace(spec, `topics: ["orders"]`, `topics: ["orders", "returns"]`, 1)
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(s)
	want := `sources[0].config.transactional_offsets: needs exactly one topic (got 2 in topics)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("multi-topic: got %v\nwant %s", err, want)
	}
}

// l3Pair opens a transactional input's source (one subtask, subscribed)
// and an exactly-once sink with offset_commit_group on it.
func l3Pair(t *testing.T, in, out, group string, batch int) (*Source, *Sink) {
	t.Helper()
	input := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, BatchSize: batch, TransactionalOffsets: true})
	src := openSource(t, input, 0, 1, nil)
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, input.Schema())
	return src, openSink(t, output, 0)
}

// batchRange is the offsets [first, end) of a batch of one partition.
func batchRange(t *testing.T, b connectors.Batch) (int64, int64) {
	t.Helper()
	idx := b.Record.Schema().FieldIndices(connectors.MetaOffset)
	offs := b.Record.Column(idx[0]).(interface{ Value(int) int64 })
	return offs.Value(0), offs.Value(int(b.Record.NumRows())-1) + 1
}

func writeBatch(t *testing.T, s *Sink, b connectors.Batch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Write(ctx, b.Record); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func rawRecords(n int, from int) []kafka.Message {
	out := make([]kafka.Message, n)
	for i := range out {
		out[i] = kafka.Message{Value: []byte(fmt.Sprintf("r%d", from+i))}
	}
	return out
}

// The output commits the input's offsets clamped to its contiguous
// acknowledged frontier: a batch written and acknowledged ahead of an
// earlier, unacknowledged one never moves the group past the gap; once
// the gap closes, the next transaction commits up to the frontier.
func TestL3ClampNeverCommitsPastAGap(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	produce(t, p, in, 0, rawRecords(30, 0)...)
	src, snk := l3Pair(t, in, out, group, 10)
	bs := readBatches(t, src, 30)
	if len(bs) < 3 {
		t.Skipf("the records arrived in %d batches; the test needs 3", len(bs))
	}
	// The runtime's order: write, then acknowledge. Batches 2.. go first;
	// batch 1 stays unacknowledged.
	for _, b := range bs[1:] {
		writeBatch(t, snk, b)
		b.Ack(nil)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got > 0 {
		t.Fatalf("group offset %d with offsets 0..%d unacknowledged: committed past the gap", got, func() int64 { _, e := batchRange(t, bs[0]); return e }())
	}
	if fr := src.Positions()[0].Offset; fr != 0 {
		t.Fatalf("frontier %d, want 0", fr)
	}
	// The gap closes: the frontier moves over everything, but the
	// transaction that wrote batch 1 began before its acknowledgement.
	writeBatch(t, snk, bs[0])
	bs[0].Ack(nil)
	if fr := src.Positions()[0].Offset; fr != 30 {
		t.Fatalf("frontier %d after every ack, want 30", fr)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got > 0 {
		t.Fatalf("group offset %d: the transaction of the batch closing the gap committed past the frontier it saw", got)
	}
	// The next transaction commits the frontier: min(max offset + 1 = 40,
	// frontier = 30).
	produce(t, p, in, 0, rawRecords(10, 30)...)
	more := readBatches(t, src, 10)
	for _, b := range more {
		writeBatch(t, snk, b)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != 30 {
		t.Fatalf("group offset %d, want the frontier 30", got)
	}
	for _, b := range more {
		b.Ack(nil)
	}
	// The source itself commits nothing.
	time.Sleep(3 * commitInterval)
	if got := committedOffsets(t, group, in, 1)[0]; got != 30 {
		t.Fatalf("group offset %d after acknowledgements: the source committed on its own", got)
	}
	consumeAll(t, out, "read_committed", 40, 0)
	// A crash now (the producer goes away without Close's final commit,
	// the source without committing anything): a new source of the group
	// resumes at the committed offset 30, so it reads the last batch
	// again (the tail the crash duplicates) and skips nothing.
	snk.discard()
	snk.closed = true
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != 30 {
		t.Fatalf("group offset %d after the crash, want 30", got)
	}
	again := openSource(t, sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, BatchSize: 10, TransactionalOffsets: true}), 0, 1, nil)
	re := readBatches(t, again, 10)
	if first, _ := batchRange(t, re[0]); first != 30 {
		t.Fatalf("the restarted source starts at %d, want the committed 30", first)
	}
}

// The group offset moves only inside committed transactions: an aborted
// transaction leaves both the output (for read_committed readers) and
// the group offset unchanged; the batch's next transaction commits both.
func TestL3AbortLeavesGroupOffset(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	produce(t, p, in, 0, rawRecords(10, 0)...)
	src, snk := l3Pair(t, in, out, group, 10)
	first := readBatches(t, src, 10)
	for _, b := range first {
		writeBatch(t, snk, b)
		b.Ack(nil)
	}
	produce(t, p, in, 0, rawRecords(10, 10)...)
	second := readBatches(t, src, 10)
	// The next write's transaction carries offset 10 (the frontier); it
	// fails before its commit, every attempt. (While it is open, the
	// broker answers offset fetches of the group with
	// UNSTABLE_OFFSET_COMMIT: readers wait for the outcome.)
	attempts := 0
	snk.beforeCommit = func(*kafka.Producer, int) error {
		attempts++
		return errors.New("injected failure before commit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed bool
	for _, b := range second {
		failed = failed || snk.Write(ctx, b.Record) != nil
	}
	if !failed {
		t.Fatal("the write did not fail")
	}
	if attempts != MaxTransactionAttempts {
		t.Fatalf("%d attempts, want %d", attempts, MaxTransactionAttempts)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got > 0 {
		t.Fatalf("group offset %d after the aborted transactions, want none", got)
	}
	if n := len(consumeAll(t, out, "read_committed", 10, 2*time.Second)); n != 10 {
		t.Fatalf("read_committed sees %d records after the aborts, want 10", n)
	}
	// The range replays in a new transaction: rows and offsets commit.
	snk.beforeCommit = nil
	for _, b := range second {
		writeBatch(t, snk, b)
		b.Ack(nil)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != 10 {
		t.Fatalf("group offset %d, want 10", got)
	}
	if n := len(consumeAll(t, out, "read_committed", 20, 2*time.Second)); n != 20 {
		t.Fatalf("read_committed sees %d records, want 20", n)
	}
}

// A write whose offset_commit_group has no live transactional input fails
// with ErrUnpairedGroup and writes nothing.
func TestL3UnpairedWriteFails(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	p := newProducer(t, nil)
	produce(t, p, in, 0, rawRecords(5, 0)...)
	// A plain input supplies rows with Kafka metadata.
	input := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: uniqueName(t, "g")})
	src := openSource(t, input, 0, 1, nil)
	bs := readBatches(t, src, 5)
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: "nobody-" + uniqueName(t, "g")}, input.Schema())
	snk := openSink(t, output, 0)
	err := snk.Write(context.Background(), bs[0].Record)
	if !errors.Is(err, ErrUnpairedGroup) || !strings.Contains(err.Error(), "offset_commit_group") {
		t.Fatalf("Write: %v, want ErrUnpairedGroup naming offset_commit_group", err)
	}
	if n := len(consumeAll(t, out, "read_uncommitted", 0, time.Second)); n != 0 {
		t.Fatalf("%d records written", n)
	}
}

// Kafka → map → Kafka with L3 through a declarative job: the group's
// offsets are committed by the output's transactions only (the last ones
// by the output's final transaction at a clean stop); a restart that has
// only the group offsets to go by (a new data directory: no WAL
// positions) resumes from them: no gap, and no committed row written
// again.
func TestJobL3Restart(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism-%d", par), func(t *testing.T) { testJobL3Restart(t, par) })
	}
}

// testJobL3Restart runs the job with par subtasks per operator: one
// subscribed source, or par explicitly assigned ones sharing the group
// (the registry holds them all; each output subtask commits the
// partitions whose rows it wrote, through the source reading them).
func testJobL3Restart(t *testing.T, par int) {
	brokers(t)
	in, out := newTopic(t, 4), newTopic(t, 2)
	data := conformance.Data(4, 30)
	produceRows(t, in, data)
	group := uniqueName(t, "g")
	outExtra := fmt.Sprintf("exactly_once: true\n      transactional_id: %s-{subtask}\n      offset_commit_group: %s", uniqueName(t, "txn"), group)
	spec := l3SpecFor(fmt.Sprintf("parallelism: %d\n%s", par, durable), txnInput, outExtra, brokers(t)[0], in, out, group)
	stop := runJob(t, spec, arkflow.WithDataDir(t.TempDir()))
	consumeAll(t, out, "read_committed", 120, 0)
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	g1 := committedOffsets(t, group, in, 4)
	for p, off := range g1 {
		if off != 30 {
			t.Errorf("partition %d: group offset %d after a clean stop, want 30 (offsets: %v)", p, off, g1)
		}
	}
	// More input; the second run starts from the group offsets.
	more := make([][]conformance.Row, 4)
	p := newProducer(t, nil)
	for part := range more {
		for i := 0; i < 5; i++ {
			r := conformance.Row{ID: int64(10000 + part*100 + i), Name: fmt.Sprintf("more-%d-%d", part, i)}
			more[part] = append(more[part], r)
			produce(t, p, in, int32(part), kafka.Message{Value: r.JSON()})
		}
	}
	replayed := 0
	for _, off := range g1 {
		replayed += 30 - int(off)
	}
	stop = runJob(t, spec, arkflow.WithDataDir(t.TempDir()))
	recs := consumeAll(t, out, "read_committed", 140+replayed, time.Second)
	if err := stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	g2 := committedOffsets(t, group, in, 4)
	for p, off := range g2 {
		if off != 35 {
			t.Errorf("partition %d: group offset %d after the second run (first: %d)", p, off, g1[p])
		}
	}
	// Every id once.
	seen := map[int64]int{}
	for _, m := range decodeValues(t, recs) {
		seen[int64(m["id"].(float64))]++
	}
	for part, rows := range data {
		for off, r := range rows {
			switch n := seen[r.ID]; {
			case n == 0:
				t.Errorf("id %d (partition %d offset %d) missing", r.ID, part, off)
			case n > 1:
				t.Errorf("id %d (partition %d offset %d) written %d times (group offset after the first run: %d)", r.ID, part, off, n, g1[part])
			}
		}
	}
	for _, rows := range more {
		for _, r := range rows {
			if seen[r.ID] != 1 {
				t.Errorf("new id %d written %d times, want once", r.ID, seen[r.ID])
			}
		}
	}
	t.Logf("group offsets after run 1: %v, after run 2: %v; %d records", g1, g2, len(recs))
}

// A restart that resumes from a position older than the group's committed
// offset (a checkpoint's, or a WAL cursor lagging the acknowledgements)
// reads committed records again; the output drops their rows instead of
// writing them again, and writes the records after the group offset.
func TestL3DropsReplayedCommittedRows(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	produce(t, p, in, 0, rawRecords(30, 0)...)
	src, snk := l3Pair(t, in, out, group, 10)
	for _, b := range readBatches(t, src, 30) {
		writeBatch(t, snk, b)
		b.Ack(nil)
	}
	// A clean stop: the final transaction commits 30.
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != 30 {
		t.Fatalf("group offset %d after a clean stop, want 30", got)
	}
	produce(t, p, in, 0, rawRecords(5, 30)...)
	// The restart resumes from a checkpoint position 12.
	input := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, BatchSize: 10, TransactionalOffsets: true})
	src2 := openSource(t, input, 0, 1, []connectors.Position{{Topic: in, Partition: 0, Offset: 12}})
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, input.Schema())
	snk2 := openSink(t, output, 0)
	bs := readBatches(t, src2, 23)
	if first, _ := batchRange(t, bs[0]); first != 12 {
		t.Fatalf("resumed at %d, want the restored 12", first)
	}
	for _, b := range bs {
		writeBatch(t, snk2, b)
		b.Ack(nil)
	}
	if d := snk2.dropped.Load(); d != 18 {
		t.Errorf("dropped %d replayed rows, want 18 (offsets 12..29)", d)
	}
	recs := consumeAll(t, out, "read_committed", 35, 2*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.value)]++
	}
	for i := 0; i < 35; i++ {
		if n := seen[fmt.Sprintf("r%d", i)]; n != 1 {
			t.Errorf("record r%d written %d times, want once", i, n)
		}
	}
	if len(recs) != 35 {
		t.Errorf("%d records in the output, want 35", len(recs))
	}
	if err := snk2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != 35 {
		t.Fatalf("group offset %d after the second clean stop, want 35", got)
	}
}

// Behind a WAL the source is sought past what the WAL holds while the WAL
// replays its entries itself: the output commits no further than the WAL
// cursor covers, however far the source's own frontier got.
func TestL3FrontierCappedByWALCoverage(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	produce(t, p, in, 0, rawRecords(20, 0)...)
	input := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, BatchSize: 10, TransactionalOffsets: true})
	src, err := input.newSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The WAL holds 0..9; its cursor covers nothing of the partition yet
	// (no position: -1), later 20.
	var covered atomic.Int64
	covered.Store(-1)
	src.SetCovered(func() []connectors.Position {
		if c := covered.Load(); c >= 0 {
			return []connectors.Position{{Topic: in, Partition: 0, Offset: c}}
		}
		return nil
	})
	if err := src.Seek([]connectors.Position{{Topic: in, Partition: 0, Offset: 10}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := src.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, input.Schema())
	snk := openSink(t, output, 0)
	for _, b := range readBatches(t, src, 10) {
		writeBatch(t, snk, b)
		b.Ack(nil)
	}
	if fr := src.Positions()[0].Offset; fr != 20 {
		t.Fatalf("source frontier %d, want 20", fr)
	}
	produce(t, p, in, 0, rawRecords(5, 20)...)
	more := readBatches(t, src, 5)
	writeBatch(t, snk, more[0])
	if got := committedOffsets(t, group, in, 1)[0]; got != -1 {
		t.Fatalf("group offset %d while the WAL cursor covers nothing of the partition: committed past the WAL's replays", got)
	}
	// The replays were acknowledged: the cursor covers everything.
	covered.Store(20)
	more[0].Ack(nil)
	produce(t, p, in, 0, rawRecords(5, 25)...)
	last := readBatches(t, src, 5)
	writeBatch(t, snk, last[0])
	if got := committedOffsets(t, group, in, 1)[0]; got != 20 {
		t.Fatalf("group offset %d, want the covered 20", got)
	}
}

// Two subscribed transactional sources of one group in one process, one
// output: a rebalance moves partitions between them while the output
// keeps writing. Each transaction commits a partition's offset through
// the source that reads it (its group metadata: member and generation),
// revoked partitions get none, and the records of moved partitions are
// written again at most from the group offset on: every record arrives,
// duplicates stay within one batch per moved partition.
func TestL3Rebalance(t *testing.T) {
	brokers(t)
	in, out := newTopic(t, 4), newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	for part := int32(0); part < 4; part++ {
		produce(t, p, in, part, rawRecords(10, int(part)*1000)...)
	}
	cfg := SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, BatchSize: 5, TransactionalOffsets: true,
		Properties: Properties{"session.timeout.ms": "6000", "heartbeat.interval.ms": "100"}}
	input := sourceInput(t, cfg)
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, input.Schema())
	a := openSource(t, input, 0, 1, nil)
	snk := openSink(t, output, 0)
	var wmu sync.Mutex // the sink is used from one goroutine at a time
	var rows atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	consume := func(s *Source) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b, err := s.Read(ctx)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Read: %v", err)
					}
					return
				}
				wmu.Lock()
				err = snk.Write(context.Background(), b.Record)
				wmu.Unlock()
				rows.Add(b.Record.NumRows())
				b.Record.Release()
				b.Ack(err)
				if err != nil {
					t.Errorf("Write: %v", err)
					return
				}
			}
		}()
	}
	consume(a)
	polltest.Eventually(t, "the first source to read everything", func() bool { return rows.Load() >= 40 })
	// b joins while a keeps polling. Both are subtask 0 of 1 of the same
	// operator: b needs its own group.instance.id, or it would take a's
	// place (static membership) instead of sharing the partitions.
	cfg.Properties = Properties{"session.timeout.ms": "6000", "heartbeat.interval.ms": "100", "group.instance.id": "second"}
	b := openSource(t, sourceInput(t, cfg), 0, 1, nil)
	consume(b)
	polltest.Eventually(t, "a balanced assignment", func() bool { return len(a.Positions()) == 2 && len(b.Positions()) == 2 })
	for part := int32(0); part < 4; part++ {
		produce(t, p, in, part, rawRecords(5, int(part)*1000+10)...)
	}
	recs := consumeAll(t, out, "read_committed", 60, 2*time.Second)
	cancel()
	wg.Wait()
	wmu.Lock()
	if err := snk.Close(context.Background()); err != nil {
		t.Errorf("sink Close: %v", err)
	}
	wmu.Unlock()
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.value)]++
	}
	dups := 0
	for part := 0; part < 4; part++ {
		for i := 0; i < 15; i++ {
			n := seen[fmt.Sprintf("r%d", part*1000+i)]
			if n == 0 {
				t.Errorf("record %d of partition %d missing", i, part)
			}
			dups += max(n-1, 0)
		}
	}
	if dups > 2*cfg.BatchSize {
		t.Errorf("%d duplicates, want at most a batch for each of the 2 moved partitions", dups)
	}
	got := committedOffsets(t, group, in, 4)
	for part, off := range got {
		if off != 15 {
			t.Errorf("partition %d: group offset %d after the final commit, want 15 (%v)", part, off, got)
		}
	}
	t.Logf("%d records, %d duplicates; group offsets %v", len(recs), dups, got)
}

// Rows without the Kafka metadata columns (a window's or an aggregate's
// results) are written, but commit no offsets.
func TestL3RowsWithoutMetadataCommitNothing(t *testing.T) {
	in, out := newTopic(t, 1), newTopic(t, 1)
	group := uniqueName(t, "g")
	produce(t, newProducer(t, nil), in, 0, rawRecords(5, 0)...)
	input := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{in}, ConsumerGroup: group, TransactionalOffsets: true})
	src := openSource(t, input, 0, 1, nil)
	for _, b := range readBatches(t, src, 5) {
		b.Ack(nil) // the frontier moves to 5
	}
	output := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ExactlyOnce: true,
		TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, conformance.Schema())
	snk := openSink(t, output, 0)
	rec := conformance.NewRecord([]conformance.Row{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}})
	defer rec.Release()
	if err := snk.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(consumeAll(t, out, "read_committed", 2, time.Second)); n != 2 {
		t.Fatalf("%d records written, want 2", n)
	}
	if got := committedOffsets(t, group, in, 1)[0]; got != -1 {
		t.Fatalf("group offset %d: rows without metadata committed offsets", got)
	}
}

// An offset_commit_group whose transactional input does not feed the
// output is a validation error naming the field.
func TestL3ValidationInputMustFeedOutput(t *testing.T) {
	const spec = `
id: l3-apart
durability: {sync: group_commit}
operators:
  - {id: in, kind: source}
  - {id: other, kind: source}
  - {id: out, kind: sink}
  - {id: copy, kind: sink}
edges:
  - {id: a, from: in, to: out}
  - {id: b, from: other, to: copy}
sources:
  - operator_id: in
    input_type: kafka
    config: {brokers: ["b:9092"], topics: [orders], consumer_group: orders-group, transactional_offsets: true}
  - operator_id: other
    input_type: kafka
    config: {brokers: ["b:9092"], topics: [returns], consumer_group: returns-group}
sinks:
  - operator_id: out
    output_type: kafka
    config: {brokers: ["b:9092"], topic: orders-copy, value_field: value}
  - operator_id: copy
    output_type: kafka
    config: {brokers: ["b:9092"], topic: returns-copy, value_field: value, exactly_once: true, transactional_id: copy-0, offset_commit_group: orders-group}
`
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(s)
	want := `job "l3-apart": operator "copy": sinks[1].config.offset_commit_group: names consumer group "orders-group", but the kafka input with that consumer_group and transactional_offsets: true (sources[0]) does not feed this output`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
