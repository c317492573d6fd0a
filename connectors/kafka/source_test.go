package kafka

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// offsetsOf returns the __meta_offset values of a batch.
func offsetsOf(b connectors.Batch) []int64 {
	c := b.Record.Column(b.Record.Schema().FieldIndices(connectors.MetaOffset)[0]).(*array.Int64)
	return append([]int64(nil), c.Int64Values()...)
}

// waitCommitted waits until the group's committed offsets of a topic are
// want.
func waitCommitted(t *testing.T, group, topic string, want []int64) {
	t.Helper()
	var got []int64
	polltest.Eventually(t, fmt.Sprintf("group %s to commit %v on %s", group, want, topic), func() bool {
		got = committedOffsets(t, group, topic, len(want))
		return fmt.Sprint(got) == fmt.Sprint(want)
	}, func() string { return fmt.Sprintf("it committed %v", got) })
}

// Positions and the offsets committed to the group are the
// contiguous acknowledged frontier; acknowledgements out of order never
// skip a gap. Both assignment modes.
func TestCommitsContiguousFrontier(t *testing.T) {
	brokers(t)
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism%d", par), func(t *testing.T) {
			topic := newTopic(t, 2)
			produceRows(t, topic, conformance.Data(2, 8))
			group := uniqueName(t, "g")
			in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: group, Schema: conformance.Declared(), BatchSize: 2})
			src := openSource(t, in, 0, par, nil)
			batches := readBatches(t, src, 16/par)
			var p0 []connectors.Batch
			for _, b := range batches {
				if b.Partition == 0 {
					p0 = append(p0, b)
				} else {
					b.Ack(nil)
				}
			}
			if len(p0) < 4 {
				t.Fatalf("partition 0 in %d batches", len(p0))
			}
			for i := len(p0) - 1; i >= 1; i-- {
				p0[i].Ack(nil)
			}
			if err := src.commit(nil); err != nil {
				t.Fatal(err)
			}
			got := committedOffsets(t, group, topic, 2)
			if got[0] > offsetsOf(p0[0])[0] {
				t.Fatalf("committed %d for partition 0 while the batch at offset %d is unacknowledged", got[0], offsetsOf(p0[0])[0])
			}
			if pos, _ := positionOf(src, 0); pos != 0 {
				t.Errorf("position %d, want 0", pos)
			}
			p0[0].Ack(nil)
			want := []int64{8, 8}
			if par == 2 {
				want[1] = -1 // subtask 0 of 2 reads partition 0 only
			}
			waitCommitted(t, group, topic, want) // by the background committer
			if pos, _ := positionOf(src, 0); pos != 8 {
				t.Errorf("position %d, want 8", pos)
			}
		})
	}
}

func positionOf(s *Source, part int32) (int64, bool) {
	for _, p := range s.Positions() {
		if p.Partition == part {
			return p.Offset, true
		}
	}
	return 0, false
}

// rowsByPartition reads until n rows arrived and returns, per partition,
// the offsets read; then checks that nothing more comes.
func rowsByPartition(t *testing.T, src *Source, n int) map[int32][]int64 {
	t.Helper()
	out := map[int32][]int64{}
	for _, b := range readBatches(t, src, n) {
		out[int32(b.Partition)] = append(out[int32(b.Partition)], offsetsOf(b)...)
		b.Ack(nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if b, err := src.Read(ctx); err == nil {
		t.Fatalf("unexpected batch: partition %d offsets %v", b.Partition, offsetsOf(b))
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// A checkpoint with positions for partitions 0–1 of a
// 4-partition topic restores 0–1 at their offsets and 2–3 at the
// configured start: the group's committed offset (partition 2) or, without
// one, the end (start_from_latest; partition 3). The restored positions
// are the positions until rows are acknowledged. Both assignment modes.
func TestRestoreMergesPositions(t *testing.T) {
	brokers(t)
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism%d", par), func(t *testing.T) {
			topic := newTopic(t, 4)
			produceRows(t, topic, conformance.Data(4, 10))
			group := uniqueName(t, "g")
			commitOffsets(t, group, topic, map[int32]int64{2: 5})
			in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: group, Schema: conformance.Declared(), StartFromLatest: true})
			seek := []connectors.Position{{Topic: topic, Partition: 0, Offset: 3}, {Topic: topic, Partition: 1, Offset: 7}}
			var srcs []*Source
			for s := 0; s < par; s++ {
				srcs = append(srcs, openSource(t, in, s, par, seek))
			}
			// Rows before the end, then one more per partition.
			want := map[int32][]int64{0: span(3, 11), 1: span(7, 11), 2: span(5, 11), 3: span(10, 11)}
			got := map[int32][]int64{}
			// Wait for the assignment (a subscription gets it in Read).
			for _, src := range srcs {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				for len(src.Positions()) == 0 && ctx.Err() == nil {
					b, err := src.Read(ctx)
					if err == nil {
						got[int32(b.Partition)] = append(got[int32(b.Partition)], offsetsOf(b)...)
						b.Record.Release()
						// not acknowledged: positions stay where they were restored
					}
				}
				cancel()
			}
			pos := map[int32]int64{}
			for _, src := range srcs {
				for _, p := range src.Positions() {
					if p.Topic != topic {
						t.Errorf("position topic %q", p.Topic)
					}
					pos[p.Partition] = p.Offset
				}
			}
			if fmt.Sprint(pos) != fmt.Sprint(map[int32]int64{0: 3, 1: 7, 2: 5, 3: 10}) {
				t.Errorf("positions after restore %v, want 0:3 1:7 2:5 3:10", pos)
			}
			p := newProducer(t, nil)
			for part := int32(0); part < 4; part++ {
				produce(t, p, topic, part, kafka.Message{Value: conformance.Row{ID: 9000 + int64(part), Name: "late"}.JSON()})
			}
			for i, src := range srcs {
				mine := 0
				for part, offs := range want {
					if int(part)%par == i {
						mine += len(offs)
						mine -= len(got[part])
					}
				}
				for part, offs := range rowsByPartition(t, src, mine) {
					got[part] = append(got[part], offs...)
				}
			}
			for part := range got {
				sort.Slice(got[part], func(i, j int) bool { return got[part][i] < got[part][j] })
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read offsets %v, want %v", got, want)
			}
		})
	}
}

// commitOffsets commits offsets for a group (as an earlier run would have).
func commitOffsets(t *testing.T, group, topic string, offs map[int32]int64) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(t), ","), "group.id": group, "go.logs.channel.enable": true})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	defer c.Close()
	var parts []kafka.TopicPartition
	for p, o := range offs {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(o)})
	}
	if _, err := c.CommitOffsets(parts); err != nil {
		t.Fatal(err)
	}
}

// A restored position the broker does not have fails the source instead of
// silently resetting (never by auto.offset.reset).
func TestRestoredOffsetOutOfRange(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	produceRows(t, topic, conformance.Data(2, 3))
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g")})
	seek := []connectors.Position{{Topic: topic, Partition: 0, Offset: 50}}
	// Explicit assignment: Connect fails.
	s, err := in.newSource(connectors.TaskInfo{OperatorID: "src", Subtask: 0, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.Seek(seek); err != nil {
		t.Fatal(err)
	}
	err = s.Connect(context.Background())
	want := fmt.Sprintf(`kafka: checkpoint offset 50 of topic %q partition 0 is outside the broker's range 0..3`, topic)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Connect: %v\nwant %s", err, want)
	}
	// A subscription: Connect waits for the group's assignment and fails
	// the same way.
	sub, err := in.newSource(connectors.TaskInfo{OperatorID: "src", Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(context.Background())
	if err := sub.Seek(seek); err != nil {
		t.Fatal(err)
	}
	if err := sub.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Connect of a subscription: %v\nwant %s", err, want)
	}
}

func TestMissingTopic(t *testing.T) {
	brokers(t)
	topic := uniqueName(t, "missing")
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: "g"})
	s, err := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	err = s.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("topic %q does not exist", topic)) {
		t.Fatalf("Connect: %v", err)
	}
}

// A value that does not match the schema stops the source with an error
// naming topic, partition, offset and field.
func TestDecodeErrorNamesRecord(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 1)
	p := newProducer(t, nil)
	produce(t, p, topic, 0,
		kafka.Message{Value: []byte(`{"id":1,"name":"a"}`)},
		kafka.Message{Value: []byte(`{"id":"two","name":"b"}`)})
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g"), Schema: conformance.Declared()})
	src := openSource(t, in, 0, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	for err == nil {
		var b connectors.Batch
		b, err = src.Read(ctx)
		if err == nil {
			b.Record.Release()
		}
	}
	want := fmt.Sprintf(`kafka: topic %q partition 0 offset 1: field "id": must be an integer`, topic)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Read: %v\nwant %s", err, want)
	}
}

// Format raw keeps value bytes; a null value (tombstone) is a null value,
// or a row of nulls with format json.
func TestRawFormatAndTombstones(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 1)
	p := newProducer(t, nil)
	produce(t, p, topic, 0, kafka.Message{Value: []byte("\x00raw\xff")}, kafka.Message{Key: []byte("k")})
	raw := openSource(t, sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g")}), 0, 2, nil)
	b := readBatches(t, raw, 2)[0]
	v := b.Record.Column(0).(*array.Binary)
	if string(v.Value(0)) != "\x00raw\xff" || !v.IsNull(1) {
		t.Errorf("raw values %q null=%v", v.Value(0), v.IsNull(1))
	}
	key := b.Record.Column(b.Record.Schema().FieldIndices(connectors.MetaKey)[0]).(*array.Binary)
	if !key.IsNull(0) || string(key.Value(1)) != "k" {
		t.Errorf("keys null=%v %q", key.IsNull(0), key.Value(1))
	}
	topic2 := newTopic(t, 1)
	produce(t, p, topic2, 0, kafka.Message{Key: []byte("k")})
	nullable := conformance.Declared()
	nullable[0].Nullable = nil
	js := openSource(t, sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic2}, ConsumerGroup: uniqueName(t, "g"), Schema: nullable}), 0, 2, nil)
	b = readBatches(t, js, 1)[0]
	if !b.Record.Column(0).IsNull(0) || !b.Record.Column(1).IsNull(0) {
		t.Errorf("tombstone row: %v", b.Record)
	}
}

// The source reads with read_committed: records of aborted transactions
// are skipped, and positions move over the gaps they and the transaction
// markers leave.
func TestSkipsAbortedTransactions(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 1)
	p := newProducer(t, kafka.ConfigMap{"transactional.id": uniqueName(t, "txn")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	txn := func(commit bool, ids ...int64) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: conformance.Row{ID: id}.JSON()}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Send them first: an abort would purge records still queued.
		for p.Flush(100) > 0 {
		}
		var err error
		if commit {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for range p.Events() {
		}
	}()
	txn(false, 1, 2, 3) // offsets 0-2, abort marker 3
	txn(true, 4, 5)     // offsets 4-5, commit marker 6
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g"), Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	var ids, offs []int64
	for _, b := range readBatches(t, src, 2) {
		ids = append(ids, b.Record.Column(0).(*array.Int64).Int64Values()...)
		offs = append(offs, offsetsOf(b)...)
		b.Ack(nil)
	}
	if fmt.Sprint(ids) != "[4 5]" || fmt.Sprint(offs) != "[4 5]" {
		t.Fatalf("read ids %v at offsets %v, want [4 5] at [4 5]", ids, offs)
	}
	if pos, _ := positionOf(src, 0); pos != 6 {
		t.Errorf("position %d, want 6 (after offset 5)", pos)
	}
}

// Two subscribed sources in one group: the second joining revokes the
// first's partitions cleanly (it commits its frontier first), so together
// they read every record once.
func TestRebalanceRevokesCleanly(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 4)
	produceRows(t, topic, conformance.Data(4, 5))
	group := uniqueName(t, "g")
	cfg := SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: group, Schema: conformance.Declared(),
		Properties: Properties{"session.timeout.ms": "6000", "heartbeat.interval.ms": "100"}}
	var mu sync.Mutex
	seen := map[int64]int{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// consume reads a source until the test ends, acknowledging every batch.
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
				mu.Lock()
				for _, id := range b.Record.Column(0).(*array.Int64).Int64Values() {
					seen[id]++
				}
				mu.Unlock()
				b.Record.Release()
				b.Ack(nil)
			}
		}()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	a := openSource(t, sourceInput(t, cfg), 0, 1, nil)
	consume(a)
	polltest.Eventually(t, "the first source to read everything", func() bool { return count() == 20 })
	// b joins while a keeps polling. Both are subtask 0 of 1 of the same
	// operator: b needs its own group.instance.id, or it would take a's
	// place (static membership) instead of sharing the partitions.
	cfg.Properties = Properties{"session.timeout.ms": "6000", "heartbeat.interval.ms": "100", "group.instance.id": "second"}
	b := openSource(t, sourceInput(t, cfg), 0, 1, nil)
	consume(b)
	polltest.Eventually(t, "a balanced assignment", func() bool { return len(a.Positions()) == 2 && len(b.Positions()) == 2 })
	p := newProducer(t, nil)
	for part := int32(0); part < 4; part++ {
		produce(t, p, topic, part, kafka.Message{Value: conformance.Row{ID: 5000 + int64(part), Name: "after"}.JSON()})
	}
	polltest.Eventually(t, "the new records", func() bool { return count() == 24 })
	time.Sleep(300 * time.Millisecond) // anything extra?
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("id %d read %d times", id, n)
		}
	}
	if len(seen) != 24 {
		t.Errorf("read %d distinct ids, want 24", len(seen))
	}
}

// Partitions comes from the brokers' metadata: the largest partition
// count of the topics (batches carry the Kafka partition number); 0 when
// the topics cannot be looked up.
func TestPartitionsFromMetadata(t *testing.T) {
	brokers(t)
	a, b := newTopic(t, 3), newTopic(t, 5)
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{a, b}, ConsumerGroup: "g"})
	if n := in.Partitions(); n != 5 {
		t.Errorf("Partitions() = %d, want 5", n)
	}
	missing := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{uniqueName(t, "missing")}, ConsumerGroup: "g"})
	if n := missing.Partitions(); n != 0 {
		t.Errorf("Partitions() of a missing topic = %d, want 0", n)
	}
}
