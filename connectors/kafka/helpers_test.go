package kafka

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/kafkatest"
)

// The broker of the integration tests: ARKFLOW_TEST_KAFKA_BROKERS
// (host:port,…; .ci/test.sh starts kfake and sets it), else a kfake
// binary named by ARKFLOW_KFAKE_BIN that TestMain starts for this package.
var testBrokers string

const noBroker = "no Kafka broker: bash .ci/test.sh starts kfake and sets ARKFLOW_TEST_KAFKA_BROKERS " +
	"(or set ARKFLOW_TEST_KAFKA_BROKERS=host:port, or ARKFLOW_KFAKE_BIN to a kfake binary built with " +
	"`cd .ci/kfake && go build -o /tmp/kfake .`)"

func TestMain(m *testing.M) {
	os.Exit(func() int {
		testBrokers = os.Getenv("ARKFLOW_TEST_KAFKA_BROKERS")
		if bin := os.Getenv("ARKFLOW_KFAKE_BIN"); testBrokers == "" && bin != "" {
			brokers, stop, err := startKfake(bin)
			if err != nil {
				fmt.Fprintln(os.Stderr, "starting kfake:", err)
				return 1
			}
			defer stop()
			testBrokers = brokers
		}
		return m.Run()
	}())
}

// startKfake runs the kfake binary and waits for its "ready BROKERS" line.
func startKfake(bin string) (string, func(), error) {
	cmd := exec.Command(bin, "-partitions", "4")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if b, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				line <- b
			}
		}
	}()
	select {
	case b := <-line:
		return b, stop, nil
	case <-time.After(15 * time.Second):
		stop()
		return "", nil, fmt.Errorf("%s printed no ready line within 15s", bin)
	}
}

// brokers returns the test brokers, or skips the test.
func brokers(t testing.TB) []string {
	t.Helper()
	if testBrokers == "" {
		t.Skip(noBroker)
	}
	return strings.Split(testBrokers, ",")
}

var topicSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// uniqueName returns a topic, group or transactional id unique to this
// test and run.
func uniqueName(t testing.TB, what string) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("%s-%s-%d-%d", what, name, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

func adminConfig(t testing.TB) *kafka.ConfigMap {
	return &kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(t), ","), "log_level": 3}
}

// newTopic creates a topic with the given number of partitions.
func newTopic(t testing.TB, partitions int) string {
	t.Helper()
	topic := uniqueName(t, "t")
	kafkatest.CreateTopic(t, strings.Join(brokers(t), ","), topic, partitions)
	return topic
}

// newProducer returns a plain producer (closed at the end of the test).
func newProducer(t testing.TB, extra kafka.ConfigMap) *kafka.Producer {
	t.Helper()
	conf := kafka.ConfigMap{"bootstrap.servers": strings.Join(brokers(t), ","), "go.logs.channel.enable": true, "linger.ms": 1}
	for k, v := range extra {
		conf[k] = v
	}
	p, err := kafka.NewProducer(&conf)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range p.Logs() {
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// produce writes records and waits for their delivery. part < 0 lets the
// partitioner choose.
func produce(t testing.TB, p *kafka.Producer, topic string, part int32, recs ...kafka.Message) {
	t.Helper()
	dr := make(chan kafka.Event, len(recs))
	for i := range recs {
		m := recs[i]
		m.TopicPartition = kafka.TopicPartition{Topic: &topic, Partition: part}
		if part < 0 {
			m.TopicPartition.Partition = kafka.PartitionAny
		}
		for {
			err := p.Produce(&m, dr)
			if err == nil {
				break
			}
			if ke, ok := err.(kafka.Error); ok && ke.Code() == kafka.ErrQueueFull {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			t.Fatalf("produce: %v", err)
		}
	}
	for range recs {
		ev := <-dr
		if m := ev.(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatalf("delivery: %v", m.TopicPartition.Error)
		}
	}
}

// baseTime is the timestamp of record id 0 of produceRows; id i has
// baseTime + i ms.
var baseTime = time.UnixMilli(1_700_000_000_000)

// produceRows writes data[p] to partition p as JSON values, keyed by the
// id in decimal, timestamped baseTime + id ms.
func produceRows(t testing.TB, topic string, data [][]conformance.Row) {
	t.Helper()
	p := newProducer(t, nil)
	for part, rows := range data {
		recs := make([]kafka.Message, len(rows))
		for i, r := range rows {
			recs[i] = kafka.Message{Key: []byte(strconv.FormatInt(r.ID, 10)), Value: r.JSON(), Timestamp: baseTime.Add(time.Duration(r.ID) * time.Millisecond)}
		}
		produce(t, p, topic, int32(part), recs...)
	}
}

// consumed is one record read back.
type consumed struct {
	part   int32
	offset int64
	key    []byte
	value  []byte
}

// consumeAll reads a topic from its beginning (every partition, no group)
// until n records arrived, then for settle more to catch extra ones (0:
// return at once). isolation is read_committed or read_uncommitted.
func consumeAll(t testing.TB, topic string, isolation string, n int, settle time.Duration) []consumed {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": strings.Join(brokers(t), ","), "group.id": uniqueName(t, "reader"),
		"isolation.level": isolation, "enable.auto.commit": false, "go.logs.channel.enable": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 5000)
	if err != nil {
		t.Fatal(err)
	}
	var parts []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(parts); err != nil {
		t.Fatal(err)
	}
	var out []consumed
	deadline := time.Now().Add(30 * time.Second)
	var settleEnd time.Time
	for {
		now := time.Now()
		if len(out) >= n && settleEnd.IsZero() {
			if settle == 0 {
				return out
			}
			settleEnd = now.Add(settle)
		}
		if !settleEnd.IsZero() && now.After(settleEnd) {
			return out
		}
		if now.After(deadline) {
			t.Fatalf("read %d of %d records from %s (%s) in 30s", len(out), n, topic, isolation)
		}
		switch e := c.Poll(50).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				t.Fatalf("reading %s: %v", topic, e.TopicPartition.Error)
			}
			out = append(out, consumed{e.TopicPartition.Partition, int64(e.TopicPartition.Offset), e.Key, e.Value})
		case kafka.Error:
			if e.IsFatal() {
				t.Fatal(e)
			}
		}
	}
}

// decodeValues decodes the JSON values of records into rows.
func decodeValues(t testing.TB, recs []consumed) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.value, &out[i]); err != nil {
			t.Fatalf("value %q: %v", r.value, err)
		}
	}
	return out
}

// committedOffsets returns the group's committed offsets of a topic's
// partitions (-1: none).
func committedOffsets(t testing.TB, group, topic string, partitions int) []int64 {
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
	for p := 0; p < partitions; p++ {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: int32(p)})
	}
	res, err := c.Committed(parts, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for _, p := range res {
		out[p.Partition] = int64(p.Offset)
		if p.Offset < 0 {
			out[p.Partition] = -1
		}
	}
	return out
}

// sourceInput builds a kafka input from a config.
func sourceInput(t testing.TB, cfg SourceConfig) *Input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("kafka input not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "src", Config: raw})
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in.(*Input)
}

// sinkOutput builds a kafka output from a config for rows of schema.
func sinkOutput(t testing.TB, cfg SinkConfig, schema *arrow.Schema) *Output {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("kafka output not registered")
	}
	out, err := f(connectors.BuildContext{OperatorID: "snk", Config: raw}, schema)
	if err != nil {
		t.Fatalf("building the output: %v", err)
	}
	return out.(*Output)
}

// openSource creates and connects subtask sub of par.
func openSource(t testing.TB, in *Input, sub, par int, seek []connectors.Position) *Source {
	t.Helper()
	s, err := in.newSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	if seek != nil {
		if err := s.Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// openSink creates and connects a sink subtask.
func openSink(t testing.TB, out *Output, sub int) *Sink {
	t.Helper()
	s := out.newSink(connectors.TaskInfo{JobID: "test", OperatorID: "snk", Subtask: sub, Parallelism: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// readBatches reads until n rows arrived (30 s at most) and returns the
// batches, unacknowledged.
func readBatches(t testing.TB, s connectors.Source, n int) []connectors.Batch {
	t.Helper()
	var out []connectors.Batch
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for total < n {
		b, err := s.Read(ctx)
		if err != nil {
			t.Fatalf("Read after %d of %d rows: %v", total, n, err)
		}
		out = append(out, b)
		total += int(b.Record.NumRows())
	}
	t.Cleanup(func() {
		for _, b := range out {
			b.Record.Release()
		}
	})
	return out
}
