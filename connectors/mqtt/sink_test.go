package mqtt

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func sinkRows(t testing.TB, devices, values []string) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "device", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(devices, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(values, nil)
	return b.NewRecordBatch()
}

// topic.expr gives every row its topic; value_field its payload.
func TestSinkTopicExprAndValueField(t *testing.T) {
	base := uniqueName(t, "dev")
	c := collect(t, base+"/#", 1)
	rec := sinkRows(t, []string{"a", "b", "a"}, []string{"1", "2", "3"})
	defer rec.Release()
	cfg := sinkConfig(t, "")
	cfg.Topic = Topic{Expr: "concat('" + base + "/', device)"}
	cfg.ValueField = "value"
	s := openSink(t, buildOutput(t, cfg, rec.Schema()))
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range c.wait(t, 3) {
		got = append(got, strings.TrimPrefix(m.Topic(), base+"/")+"="+string(m.Payload()))
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "a=1,a=3,b=2" {
		t.Fatalf("got %v, want a=1,a=3,b=2", got)
	}
}

// With retain, a subscriber that comes after the write gets the last
// message of the topic.
func TestSinkRetain(t *testing.T) {
	topic := uniqueName(t, "retained")
	rec := sinkRows(t, []string{"a", "a"}, []string{"old", "new"})
	defer rec.Release()
	cfg := sinkConfig(t, topic)
	cfg.Retain = true
	cfg.ValueField = "value"
	s := openSink(t, buildOutput(t, cfg, rec.Schema()))
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client(t, nil).Publish(topic, 1, true, []byte{}).Wait() }) // clear it
	got := collect(t, topic, 1).wait(t, 1)
	if string(got[0].Payload()) != "new" || !got[0].Retained() {
		t.Fatalf("late subscriber got %q (retained %v), want the retained \"new\"", got[0].Payload(), got[0].Retained())
	}
}

func TestSinkTopicExprErrors(t *testing.T) {
	rec := sinkRows(t, []string{"a+"}, []string{"1"})
	defer rec.Release()
	cfg := sinkConfig(t, "")
	cfg.Topic = Topic{Expr: "device"}
	s := openSink(t, buildOutput(t, cfg, rec.Schema()))
	err := s.Write(context.Background(), rec)
	if err == nil || !strings.Contains(err.Error(), `gives "a+" for row 0`) {
		t.Fatalf("Write with a wildcard topic: %v", err)
	}
}

// A QoS 0 write while the client reconnects returns an error naming the
// topic and the broker, rather than reporting the rows delivered (the
// client would drop them).
func TestSinkWriteFailsWithoutBroker(t *testing.T) {
	px := newProxy(t)
	topic := uniqueName(t, "gone")
	rec := sinkRows(t, []string{"a"}, []string{"1"})
	defer rec.Release()
	cfg := sinkConfig(t, topic)
	cfg.Port = px.port()
	qos := 0
	cfg.QoS = &qos
	s := openSink(t, buildOutput(t, cfg, rec.Schema()))
	px.l.Close()
	px.cut()
	// Once the client noticed (a QoS 0 message written to a connection
	// that is going down without its knowing is lost, at-most-once).
	deadline := time.Now().Add(10 * time.Second)
	for s.(*sink).client.IsConnectionOpen() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.Write(ctx, rec)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("publishing 1 rows to %q (QoS 0): not connected", topic)) {
		t.Fatalf("Write without a broker: %v", err)
	}
	t.Logf("Write: %v", err)
}
