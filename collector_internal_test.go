package arkflow

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// A running job's state is measured at most once a minute, and less often
// when measuring it is slow; a job that is not running is read each time
// (the runtime answers it without walking the state). Not parallel: it
// times a real 0.7 s sleep against a 0.75 s margin.
func TestCollectorMeasuresStateRarely(t *testing.T) {
	j, err := NewJob("rare").
		Source("in", generate.Config{Count: 1, Fields: []generate.Field{{Name: "user", Type: "string"}}}).
		Sink("out", memory.NewSink()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	c := j.Collector().(*collector)
	clock := time.Unix(1000, 0)
	c.now = func() time.Time { return clock }
	reads := 0
	var cost time.Duration
	c.readState = func() map[string]runtime.StateSize {
		reads++
		time.Sleep(cost)
		return map[string]runtime.StateSize{"w": {Bytes: int64(reads), Keys: 1}}
	}
	read := func(running bool) int64 { return c.stateSizes(running)["w"].Bytes }

	if got := read(true); got != 1 {
		t.Fatalf("first read: %d", got)
	}
	clock = clock.Add(stateEvery - time.Second)
	if got := read(true); got != 1 || reads != 1 {
		t.Fatalf("within a minute the state was measured again: value %d, %d reads", got, reads)
	}
	clock = clock.Add(time.Second)
	cost = 700 * time.Millisecond // 1 % of it is 70 s, more than a minute
	if got := read(true); got != 2 {
		t.Fatalf("after a minute: value %d, want a new measurement", got)
	}
	cost = 0
	clock = clock.Add(stateEvery)
	if got := read(true); got != 2 {
		t.Fatalf("a measurement of 0.7 s was repeated after 60 s, not 70 s: value %d", got)
	}
	clock = clock.Add(15 * time.Second) // the sleep took a little more than 0.7 s
	if got := read(true); got != 3 {
		t.Fatalf("after 75 s: value %d, want a new measurement", got)
	}
	if got := read(false); got != 4 {
		t.Fatalf("a job that is not running: value %d, want a read each time", got)
	}
}

// The families connectors declare are exported unless Prometheus would
// refuse them or they would clash with the collector's own: a bad
// connector costs its own series, never the scrape.
func TestConnectorDescs(t *testing.T) {
	t.Parallel()
	d := newDescs("j")
	got := connectorDescs("j", []connectors.MetricFamily{
		{Name: "x_lag_messages", Help: "ok", Labels: []string{"topic", "partition"}},
		{Name: "x_events_total", Help: "ok", Kind: connectors.Counter},
		{Name: "x_bad", Help: "repeats a job label", Labels: []string{"subtask"}},
		{Name: "x-bad", Help: "not a name"},
		{Name: "x_bad_label", Help: "not a label", Labels: []string{"1x"}},
		{Name: "rows_in_total", Help: "the collector's own family"},
	}, d.all())
	if len(got) != 2 {
		t.Fatalf("kept %v, want x_lag_messages and x_events_total", got)
	}
	if c := got["x_lag_messages"]; c.labels != 2 || c.kind != prometheus.GaugeValue {
		t.Errorf("x_lag_messages: %+v", c)
	}
	if c := got["x_events_total"]; c.labels != 0 || c.kind != prometheus.CounterValue {
		t.Errorf("x_events_total: %+v", c)
	}
}
