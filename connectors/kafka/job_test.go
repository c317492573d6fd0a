package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/job"
)

const jobSpec = `
id: %[1]s
parallelism: %[2]d
%[3]s
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
    %[9]s
    config:
      brokers: [%[4]q]
      topics: [%[5]q]
      consumer_group: %[6]q
      schema: [{name: id, type: int64, nullable: false}, {name: name, type: string}]
      batch_size: 16
sinks:
  - operator_id: out
    output_type: kafka
    config:
      brokers: [%[4]q]
      topic: {type: value, value: %[7]q}
      key: name
      %[8]s
`

// runJob starts a job from a spec and returns a function that stops it
// and returns Run's error.
func runJob(t *testing.T, spec string, opts ...arkflow.Option) func() error {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		if err := stopWithin(j, 30*time.Second); err != nil {
			return err
		}
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// checkOutput checks the output records of ids: the JSON value holds id,
// name and twice = 2·id (no __meta_* columns), the key is the name.
func checkOutput(t *testing.T, recs []consumed, want map[int64]bool) {
	t.Helper()
	seen := map[int64]int{}
	for i, m := range decodeValues(t, recs) {
		id := int64(m["id"].(float64))
		seen[id]++
		if len(m) != 3 || m["twice"] != float64(2*id) || m["name"] != string(recs[i].key) {
			t.Errorf("record key %q value %s", recs[i].key, recs[i].value)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("id %d written %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct ids written, want %d", len(seen), len(want))
	}
}

func idSet(data [][]conformance.Row) map[int64]bool {
	out := map[int64]bool{}
	for _, rows := range data {
		for _, r := range rows {
			out[r.ID] = true
		}
	}
	return out
}

// A declarative job reads Kafka, maps and writes Kafka (at-least-once, one
// source subtask with a group subscription, event time from
// __meta_timestamp); the group ends up with the end offsets committed.
func TestJobRoundTrip(t *testing.T) {
	brokers(t)
	in, out := newTopic(t, 4), newTopic(t, 2)
	data := conformance.Data(4, 50)
	produceRows(t, in, data)
	group := uniqueName(t, "g")
	// Event time from the records' timestamps: the runtime asks the input
	// for its partitions (metadata) to track watermarks per partition.
	eventTime := "time: {mode: event_time, timestamp_field: __meta_timestamp, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 100}}"
	stop := runJob(t, fmt.Sprintf(jobSpec, "kafka-roundtrip", 1, "", brokers(t)[0], in, group, out, "", eventTime))
	recs := consumeAll(t, out, "read_committed", 200, 0)
	waitCommitted(t, group, in, []int64{50, 50, 50, 50})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutput(t, recs, idSet(data))
}

// Kafka → Kafka exactly-once (L2) behind a WAL, with two source subtasks
// (explicit assignment) and two transactional sink subtasks: read_committed
// consumers see every row once; a second run resumes after what the first
// committed and writes only the new rows.
func TestJobExactlyOnceRestart(t *testing.T) {
	brokers(t)
	in, out := newTopic(t, 4), newTopic(t, 2)
	data := conformance.Data(4, 30)
	produceRows(t, in, data)
	group, txn := uniqueName(t, "g"), uniqueName(t, "txn")
	dir := t.TempDir()
	spec := fmt.Sprintf(jobSpec, "kafka-eos", 2, "durability: {sync: group_commit}", brokers(t)[0], in, group, out,
		fmt.Sprintf("exactly_once: true\n      transactional_id: %s-{subtask}", txn), "")
	stop := runJob(t, spec, arkflow.WithDataDir(dir))
	consumeAll(t, out, "read_committed", 120, 0)
	waitCommitted(t, group, in, []int64{30, 30, 30, 30})
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	// More input, a second run from the same data directory and group.
	more := make([][]conformance.Row, 4)
	p := newProducer(t, nil)
	for part := range more {
		for i := 0; i < 5; i++ {
			r := conformance.Row{ID: int64(10000 + part*100 + i), Name: fmt.Sprintf("more-%d-%d", part, i)}
			more[part] = append(more[part], r)
			produce(t, p, in, int32(part), kafka.Message{Value: r.JSON()})
		}
	}
	stop = runJob(t, spec, arkflow.WithDataDir(dir))
	recs := consumeAll(t, out, "read_committed", 140, time.Second)
	waitCommitted(t, group, in, []int64{35, 35, 35, 35})
	if err := stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	want := idSet(data)
	for id := range idSet(more) {
		want[id] = true
	}
	checkOutput(t, recs, want)
}

// stopWithin stops j gracefully, giving up after d.
func stopWithin(j *arkflow.Job, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return j.Stop(ctx)
}
