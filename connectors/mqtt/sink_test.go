package mqtt

import (
	"context"
	"sort"
	"strings"
	"testing"

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
