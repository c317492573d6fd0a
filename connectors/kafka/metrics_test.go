package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// lagOf returns the consumer lag a source reports per "topic/partition".
func lagOf(s *Source) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s.Metrics() {
		if m.Name == MetricConsumerLag {
			out[m.LabelValues[0]+"/"+m.LabelValues[1]] = m.Value
		}
	}
	return out
}

// waitLag waits until ok accepts a source's lag of one partition, and
// returns that lag.
func waitLag(t *testing.T, s *Source, key string, ok func(float64) bool) float64 {
	t.Helper()
	var lag float64
	var found bool
	polltest.Eventually(t, "the lag of "+key, func() bool {
		lag, found = lagOf(s)[key]
		return found && ok(lag)
	}, func() string { return fmt.Sprintf("lag %v (found %v)", lag, found) })
	return lag
}

// A source reports the lag of the partition it reads from librdkafka's
// caches: the records it has not read yet, none once it read them all,
// and nothing before Connect or after Close.
func TestSourceConsumerLag(t *testing.T) {
	topic := newTopic(t, 2)
	rows := make([][]conformance.Row, 2)
	for i := range 200 {
		rows[0] = append(rows[0], conformance.Row{ID: int64(i), Name: fmt.Sprint("r", i)})
	}
	produceRows(t, topic, rows)
	in := sourceInput(t, SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g"), Schema: conformance.Declared(), BatchSize: 10})
	if fams := in.MetricFamilies(); len(fams) != 1 || fams[0].Name != MetricConsumerLag || len(fams[0].Labels) != 2 {
		t.Fatalf("families %+v", fams)
	}
	unconnected, err := in.newSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: 0, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m := unconnected.Metrics(); m != nil {
		t.Fatalf("metrics before Connect: %+v", m)
	}
	// Subtask 0 of 2 reads partition 0 (explicit assignment).
	s := openSource(t, in, 0, 2, nil)
	bs := readBatches(t, s, 10)
	if len(bs) != 1 || bs[0].Record.NumRows() != 10 {
		t.Fatalf("first read: %d batches", len(bs))
	}
	key := topic + "/0"
	lag := waitLag(t, s, key, func(v float64) bool { return v > 0 })
	if lag > 190 {
		t.Fatalf("lag %v after reading 10 of 200 records, want at most 190", lag)
	}
	if _, ok := lagOf(s)[topic+"/1"]; ok {
		t.Fatal("subtask 0 reports partition 1, which subtask 1 reads")
	}
	readBatches(t, s, 190)
	waitLag(t, s, key, func(v float64) bool { return v == 0 })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := s.Metrics(); m != nil {
		t.Fatalf("metrics after Close: %+v", m)
	}
}

// A Kafka → Kafka exactly-once job's collector exports the source's lag
// per topic and partition (all read: 0) and the sink's committed
// transactions, with the task's labels, and promlint accepts them.
func TestJobKafkaMetrics(t *testing.T) {
	brokers(t)
	in, out := newTopic(t, 4), newTopic(t, 2)
	data := conformance.Data(4, 20)
	produceRows(t, in, data)
	group, txn := uniqueName(t, "g"), uniqueName(t, "txn")
	s, err := job.Parse([]byte(fmt.Sprintf(jobSpec, "kafka-metrics", 1, "durability: {sync: group_commit}", brokers(t)[0], in, group, out,
		fmt.Sprintf("exactly_once: true\n      transactional_id: %s-{subtask}", txn), "")))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(s, arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := stopWithin(j, 30*time.Second); err == nil {
			<-done
		}
	})
	consumeAll(t, out, "read_committed", 80, 0)

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(j.Collector()); err != nil {
		t.Fatal(err)
	}
	var fams map[string]*dto.MetricFamily
	polltest.Eventually(t, "a lag of 0 on all 4 partitions", func() bool {
		got, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		fams = map[string]*dto.MetricFamily{}
		for _, f := range got {
			fams[f.GetName()] = f
		}
		lag := fams["arkflow_"+MetricConsumerLag]
		zero := lag != nil && len(lag.GetMetric()) == 4
		for _, m := range lag.GetMetric() {
			zero = zero && m.GetGauge().GetValue() == 0
		}
		return zero
	}, func() string { return fmt.Sprintf("lag series: %v", fams["arkflow_"+MetricConsumerLag]) })
	parts := map[string]bool{}
	for _, m := range fams["arkflow_"+MetricConsumerLag].GetMetric() {
		l := labels(m)
		if l["job"] != "kafka-metrics" || l["operator"] != "in" || l["subtask"] != "0" || l["topic"] != in || len(l) != 5 {
			t.Errorf("lag series labels %v", l)
		}
		parts[l["partition"]] = true
	}
	if len(parts) != 4 {
		t.Errorf("lag of partitions %v, want 0-3", parts)
	}
	committed := fams["arkflow_"+MetricTxnCommitted].GetMetric()
	if len(committed) != 1 || committed[0].GetCounter().GetValue() < 1 || labels(committed[0])["operator"] != "out" {
		t.Errorf("committed transactions: %v", committed)
	}
	if aborted := fams["arkflow_"+MetricTxnAborted].GetMetric(); len(aborted) != 1 || aborted[0].GetCounter().GetValue() != 0 {
		t.Errorf("aborted transactions: %v", aborted)
	}
	problems, err := testutil.CollectAndLint(j.Collector())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
