package kafka

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Kafka → Kafka pass-through of 1 KB records on the same broker, through
// the engine (kafka source → kafka sink) and through a bare
// confluent-kafka-go consume → produce loop. Each iteration moves every
// record of a 4-partition input topic into a fresh output topic; the clock
// stops when the output's end offsets add up to the input's count.
//
//	ARKFLOW_KFAKE_BIN=/tmp/kfake go test -run '^$' -bench KafkaPassThrough -benchtime 3x ./connectors/kafka/
//
// Sub-benchmarks are engine variants (raw: the value is passed as bytes,
// value_field; json: decoded into 3 columns and encoded again; p4:
// parallelism 4, explicit assignment; wal: durability group_commit; eos:
// exactly-once sink (L2) behind the WAL; l3: offsets committed in the
// sink's transaction; batch256: the source's batch_size). Every
// iteration runs the bare loop and then the engine on the same records and
// broker; ratio = engine events/s over bare events/s.
//
// Each side also reports B/event (bare-B/event): what the Go process
// allocated (MemStats.TotalAlloc's delta) over the timed part of its
// passes, per record moved. librdkafka's C allocations are not in the Go
// heap, so neither side counts them. The delta covers the whole process:
// the harness's watermark queries, and for exactly-once outputs the
// read_committed consumer that counts the records, which copies each one
// into Go; that counter's share, estimated by counting the output once
// more outside the timer, is count-B/event. The engine's timed part
// includes Run opening its clients (a confluent-kafka-go producer makes
// 24 MB of channels), the bare loop's does not: a fixed cost, which
// shrinks per event as the input grows. heap-after-MB
// (bare-heap-after-MB) is the live heap after a pass, after runtime.GC,
// outside the timer, the largest of the iterations (MB = 10^6 bytes).
// ARKFLOW_BENCH_KAFKA_RECORDS sets the input's record count (default
// 100,000), to compare both at N and 2N.

const (
	benchPartitions = 4
	benchValueBytes = 1024
)

// benchRecords is the input's record count.
var benchRecords = benchRecordCount()

// benchRecordCount reads ARKFLOW_BENCH_KAFKA_RECORDS (default 100,000),
// rounded down to a multiple of benchPartitions.
func benchRecordCount() int {
	n, err := strconv.Atoi(os.Getenv("ARKFLOW_BENCH_KAFKA_RECORDS"))
	if err != nil || n < benchPartitions {
		return 100_000
	}
	return n - n%benchPartitions
}

// benchRun is one pass of one side: its time, and what the Go process
// allocated meanwhile (MemStats.TotalAlloc's delta).
type benchRun struct {
	elapsed time.Duration
	alloc   uint64
}

// totalAlloc is the bytes the Go heap allocated since the process began.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// heapAfterMB collects garbage and returns the live heap in MB.
func heapAfterMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / 1e6
}

var benchInput struct {
	once  sync.Once
	topic string
}

// benchValue is a 1 KB JSON object: {"id":…,"user":"…","payload":"…"}.
func benchValue(id int) []byte {
	head := fmt.Sprintf(`{"id":%d,"user":"user-%d","payload":"`, id, id%1000)
	pad := benchValueBytes - len(head) - 2
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

func setupBenchInput(b *testing.B) string {
	b.Helper()
	benchInput.once.Do(func() {
		benchInput.topic = newTopic(b, benchPartitions)
		// Closed here rather than at the end of the benchmark: its
		// channels (24 MB) would otherwise stay in heap-after-MB.
		p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(b), ","),
			"go.logs.channel.enable": true, "linger.ms": 5, "batch.num.messages": 10000})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range p.Logs() {
			}
		}()
		defer p.Close()
		for part := 0; part < benchPartitions; part++ {
			recs := make([]kafka.Message, 0, benchRecords/benchPartitions)
			for i := part; i < benchRecords; i += benchPartitions {
				recs = append(recs, kafka.Message{Value: benchValue(i)})
			}
			produce(b, p, benchInput.topic, int32(part), recs...)
		}
	})
	return benchInput.topic
}

// benchWatermarks queries end offsets (an AdminClient cannot).
var benchWatermarks *kafka.Consumer

// endOffsets is the sum of a topic's partition end offsets.
func endOffsets(b *testing.B, topic string, parts int) int64 {
	var sum int64
	for p := 0; p < parts; p++ {
		_, hi, err := benchWatermarks.QueryWatermarkOffsets(topic, int32(p), 5000)
		if err != nil {
			b.Fatal(err)
		}
		sum += hi
	}
	return sum
}

// waitOutput waits until the output's end offsets add up to n.
func waitOutput(b *testing.B, topic string, parts int, n int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for endOffsets(b, topic, parts) < n {
		if time.Now().After(deadline) {
			b.Fatalf("output %s did not reach %d records", topic, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func BenchmarkKafkaPassThrough(b *testing.B) {
	brokers(b)
	in := setupBenchInput(b)
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(b), ","), "group.id": "bench-watermarks", "go.logs.channel.enable": true})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	benchWatermarks = c
	defer c.Close()
	for _, v := range []passVariant{
		{"raw", "raw", "", "value_field: value", 1, false},
		{"json", "json", "", "", 1, false},
		{"raw-p4", "raw", "", "value_field: value", 4, false},
		// What exactly-once costs, against at-least-once with the WAL that
		// exactly-once requires, and how the batch size moves it.
		{"raw-wal", "raw", "", "value_field: value", 1, true},
		{"raw-eos", "raw", "", "value_field: value\n      exactly_once: true\n      transactional_id: {txn}-{subtask}", 1, true},
		{"raw-eos-l3", "raw", "transactional_offsets: true", "value_field: value\n      exactly_once: true\n      transactional_id: {txn}-{subtask}\n      offset_commit_group: {group}", 1, true},
		{"raw-wal-batch256", "raw", "batch_size: 256", "value_field: value", 1, true},
		{"raw-eos-batch256", "raw", "batch_size: 256", "value_field: value\n      exactly_once: true\n      transactional_id: {txn}-{subtask}", 1, true},
		{"raw-eos-l3-batch256", "raw", "batch_size: 256\n      transactional_offsets: true", "value_field: value\n      exactly_once: true\n      transactional_id: {txn}-{subtask}\n      offset_commit_group: {group}", 1, true},
	} {
		b.Run(v.name, func(b *testing.B) { runPassThrough(b, in, v) })
	}
}

// passVariant is one engine variant of BenchmarkKafkaPassThrough.
type passVariant struct {
	name, format, srcExtra, sinkExtra string
	par                               int
	wal                               bool
}

// runPassThrough runs b.N paired passes of the bare loop and of the engine
// variant v, and reports both sides' rates and allocations.
func runPassThrough(b *testing.B, in string, v passVariant) {
	b.StopTimer()
	var engine, bare benchRun
	var counter uint64
	var heap, bareHeap float64
	for i := 0; i < b.N; i++ {
		// Paired: the bare loop and the engine move the same
		// records on the same broker, one after the other.
		r := benchBare(b, in)
		bare.elapsed += r.elapsed
		bare.alloc += r.alloc
		bareHeap = max(bareHeap, heapAfterMB())
		r, c := benchEngine(b, in, v.format, v.srcExtra, v.sinkExtra, v.par, v.wal)
		engine.elapsed += r.elapsed
		engine.alloc += r.alloc
		counter += c
		heap = max(heap, heapAfterMB())
	}
	events := float64(b.N * benchRecords)
	ev := events / engine.elapsed.Seconds()
	bareEv := events / bare.elapsed.Seconds()
	b.ReportMetric(float64(engine.elapsed.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(ev, "events/s")
	b.ReportMetric(ev*benchValueBytes/1e6, "MB/s")
	b.ReportMetric(bareEv, "bare-events/s")
	b.ReportMetric(bareEv*benchValueBytes/1e6, "bare-MB/s")
	b.ReportMetric(ev/bareEv, "ratio")
	b.ReportMetric(float64(engine.alloc)/events, "B/event")
	b.ReportMetric(float64(bare.alloc)/events, "bare-B/event")
	if counter > 0 {
		b.ReportMetric(float64(counter)/events, "count-B/event")
	}
	b.ReportMetric(heap, "heap-after-MB")
	b.ReportMetric(bareHeap, "bare-heap-after-MB")
}

// deleteTopic drops a benchmark's output (kfake keeps everything in
// memory).
func deleteTopic(b *testing.B, topic string) {
	a, err := kafka.NewAdminClient(adminConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.DeleteTopics(ctx, []string{topic}); err != nil {
		b.Logf("deleting %s: %v", topic, err)
	}
}

// benchBare moves the input once with Poll → Produce (asynchronous,
// delivery reports drained; no offset commits; read_committed like the
// engine's source) and returns the time it took and what it allocated.
func benchBare(b *testing.B, in string) benchRun {
	out := newTopic(b, benchPartitions)
	defer deleteTopic(b, out)
	cons, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": strings.Join(brokers(b), ","), "group.id": uniqueName(b, "bare"),
		"enable.auto.commit": false, "go.logs.channel.enable": true,
	})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range cons.Logs() {
		}
	}()
	prod, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(b), ","),
		"go.logs.channel.enable": true, "go.delivery.report.fields": "none"})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range prod.Logs() {
		}
	}()
	go func() {
		for range prod.Events() {
		}
	}()
	var parts []kafka.TopicPartition
	for p := 0; p < benchPartitions; p++ {
		parts = append(parts, kafka.TopicPartition{Topic: &in, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	alloc := totalAlloc()
	start := time.Now()
	if err := cons.Assign(parts); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		moved := 0
		for moved < benchRecords {
			m, ok := cons.Poll(100).(*kafka.Message)
			if !ok || m.TopicPartition.Error != nil {
				continue
			}
			msg := kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &out, Partition: kafka.PartitionAny}, Value: m.Value}
			for prod.Produce(&msg, nil) != nil {
				time.Sleep(time.Millisecond)
			}
			moved++
		}
	}()
	waitOutput(b, out, benchPartitions, int64(benchRecords))
	run := benchRun{elapsed: time.Since(start), alloc: totalAlloc() - alloc}
	<-done
	cons.Close()
	prod.Close()
	return run
}

const benchSpec = `
id: kafka-bench
parallelism: %[1]d
%[9]s
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: in-out, from: in, to: out}
sources:
  - operator_id: in
    input_type: kafka
    config:
      brokers: [%[2]q]
      topics: [%[3]q]
      consumer_group: %[4]q
      format: %[5]s
      %[6]s
sinks:
  - operator_id: out
    output_type: kafka
    config:
      brokers: [%[2]q]
      topic: %[7]q
      %[8]s
`

// benchEngine moves the input once through a job and returns the time it
// took (from Run until the output holds every record) and what it
// allocated, and for an exactly-once output what counting it allocated.
func benchEngine(b *testing.B, in, format, srcExtra, sinkExtra string, par int, wal bool) (benchRun, uint64) {
	schema := srcExtra
	if format == "json" {
		schema = "schema: [{name: id, type: int64}, {name: user, type: string}, {name: payload, type: string}]"
	}
	group := uniqueName(b, "g")
	sinkExtra = strings.NewReplacer("{txn}", uniqueName(b, "txn"), "{group}", group).Replace(sinkExtra)
	jobExtra := ""
	if wal {
		jobExtra = fmt.Sprintf("durability: {sync: group_commit, path: %q}", b.TempDir())
	}
	out := newTopic(b, benchPartitions)
	defer deleteTopic(b, out)
	spec, err := job.Parse([]byte(fmt.Sprintf(benchSpec, par, brokers(b)[0], in, group, format, schema, out, sinkExtra, jobExtra)))
	if err != nil {
		b.Fatal(err)
	}
	j, err := arkflow.FromSpec(spec)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	alloc := totalAlloc()
	start := time.Now()
	go func() { done <- j.Run(context.Background()) }()
	// Exactly-once outputs also hold commit markers: count the records
	// with a read_committed consumer instead of end offsets.
	eos := strings.Contains(sinkExtra, "exactly_once")
	if eos {
		waitCommittedRecords(b, out, benchRecords)
	} else {
		waitOutput(b, out, benchPartitions, int64(benchRecords))
	}
	run := benchRun{elapsed: time.Since(start), alloc: totalAlloc() - alloc}
	if err := stopWithin(j, time.Minute); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	var counter uint64
	if eos {
		// The counter's share of run.alloc: count the output again.
		alloc = totalAlloc()
		waitCommittedRecords(b, out, benchRecords)
		counter = totalAlloc() - alloc
	}
	return run, counter
}

// waitCommittedRecords counts a topic's records with a read_committed
// consumer until n arrived.
func waitCommittedRecords(b *testing.B, topic string, n int) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": strings.Join(brokers(b), ","), "group.id": uniqueName(b, "count"),
		"enable.auto.commit": false, "go.logs.channel.enable": true, "fetch.max.bytes": 52428800,
	})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	defer c.Close()
	var parts []kafka.TopicPartition
	for p := 0; p < benchPartitions; p++ {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(parts); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for got := 0; got < n; {
		if _, ok := c.Poll(100).(*kafka.Message); ok {
			got++
		}
		if time.Now().After(deadline) {
			b.Fatalf("read %d of %d committed records", got, n)
		}
	}
}
