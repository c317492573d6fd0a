package nats

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// metaRows returns rows with their source position: source "src",
// partition 0, offsets from off.
func metaRows(rows []conformance.Row, off int64) arrow.RecordBatch {
	rec := conformance.NewRecord(rows)
	defer rec.Release()
	return connectors.AddMeta(connectors.WithMeta(conformance.Schema()), rec, "src", 0, off)
}

func write(t testing.TB, s connectors.Sink, rec arrow.RecordBatch) {
	t.Helper()
	defer rec.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Write(ctx, rec); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// Rows written again (a restart writing what it wrote before the crash)
// are stored once: their Nats-Msg-Id is the job and the row's source
// position, and the stream drops the duplicates, which the sink counts.
func TestJetStreamSinkDeduplicates(t *testing.T) {
	stream, js := newStream(t, nil)
	out := buildOutput(t, SinkConfig{URL: serverURL(t), Mode: SinkMode{Type: ModeJetStream, Subject: Subject(stream + ".out")}}, connectors.WithMeta(conformance.Schema()))
	snk := openSink(t, out)
	rows := conformance.Data(1, 10)[0]
	write(t, snk, metaRows(rows[:6], 100))
	write(t, snk, metaRows(rows[3:], 103)) // rows 3–5 again, at the same positions
	msgs := streamMsgs(t, js, stream, 10, 0)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
	}
	if want := "[test:src:0:100 test:src:0:101 test:src:0:102 test:src:0:103 test:src:0:104 test:src:0:105 test:src:0:106 test:src:0:107 test:src:0:108 test:src:0:109]"; fmt.Sprint(ids) != want {
		t.Errorf("message IDs %v\nwant %s", ids, want)
	}
	checkRows(t, payloadRows(t, msgs), rows)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 10 {
		t.Fatalf("stream holds %d messages (%v), want 10", info.State.Msgs, err)
	}
	if m := snk.(connectors.Metered).Metrics(); len(m) != 1 || m[0].Name != MetricDuplicates || m[0].Value != 3 {
		t.Errorf("metrics %v, want 3 duplicates", m)
	}
}

func checkRows(t testing.TB, got []map[string]any, want []conformance.Row) {
	t.Helper()
	var g []string
	for _, m := range got {
		g = append(g, fmt.Sprintf("%v/%v", m["id"], m["name"]))
	}
	var w []string
	for _, r := range want {
		w = append(w, fmt.Sprintf("%d/%s", r.ID, r.Name))
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("rows %v\nwant %v", g, w)
	}
}

// msg_id_fields make the IDs of rows without a position; value_field
// makes the payload; two rows of one write with one ID are an error (the
// stream would keep one of them).
func TestJetStreamSinkMsgIDFields(t *testing.T) {
	stream, js := newStream(t, nil)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "window_start", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "body", Type: arrow.BinaryTypes.Binary},
	}, nil)
	out := buildOutput(t, SinkConfig{URL: serverURL(t), Mode: SinkMode{Type: ModeJetStream, Subject: Subject(stream + ".w")},
		MsgIDFields: []string{"user", "window_start"}, ValueField: "body"}, schema)
	snk := openSink(t, out)
	rec := func(users []*string, starts []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i, u := range users {
			if u == nil {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.StringBuilder).Append(*u)
			}
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(starts[i]))
			b.Field(2).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("payload %d", i)))
		}
		return b.NewRecordBatch()
	}
	s := func(v string) *string { return &v }
	write(t, snk, rec([]*string{s("a:b"), s("a"), nil, s("%N")}, []int64{1000, 1000, 1000, 1000}))
	msgs := streamMsgs(t, js, stream, 4, 0)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Headers().Get(jetstream.MsgIDHeader)+"="+string(m.Data()))
	}
	if want := "[test:a%3Ab:1000=payload 0 test:a:1000=payload 1 test:%N:1000=payload 2 test:%25N:1000=payload 3]"; fmt.Sprint(got) != want {
		t.Errorf("messages %v\nwant %s", got, want)
	}
	dup := rec([]*string{s("x"), s("y"), s("x")}, []int64{5, 5, 5})
	defer dup.Release()
	err := snk.Write(context.Background(), dup)
	want := `nats: rows 0 and 2 of one write have the same message ID "test:x:5"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Write of rows with one ID: %v\nwant %s", err, want)
	}
}

// A JetStream sink whose subject no stream captures fails at Connect,
// saying so.
func TestJetStreamSinkNeedsAStream(t *testing.T) {
	out := buildOutput(t, SinkConfig{URL: serverURL(t), Mode: SinkMode{Type: ModeJetStream, Subject: Subject(uniqueName(t, "nostream"))}, MsgIDFields: []string{"id"}}, conformance.Schema())
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "test", OperatorID: "snk", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close(context.Background())
	err = snk.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no JetStream stream captures subject") {
		t.Fatalf("Connect: %v", err)
	}
}
