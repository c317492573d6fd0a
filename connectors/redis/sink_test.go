package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

func writeRows(t *testing.T, cfg SinkConfig, rows []conformance.Row) {
	t.Helper()
	out := buildOutput(t, cfg, conformance.Schema())
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "j", OperatorID: "snk"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := snk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)
	rec := conformance.NewRecord(rows)
	defer rec.Release()
	if err := snk.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// The hashes, strings and publish outputs, with keys computed per row by
// an expression and a value column: every row's command is done when
// Write returns.
func TestSinkKinds(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := uniqueKey(t, "kinds")
	rows := []conformance.Row{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 3, Name: "c"}}
	keyExpr := &Expr{Expr: fmt.Sprintf("concat('%s:', name)", prefix)}

	writeRows(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypeHashes, Key: &Expr{Value: prefix + ":h"}, Field: &Expr{Expr: "id"}}, ValueField: "name"}, rows)
	if got := c.HGetAll(ctx, prefix+":h").Val(); fmt.Sprint(got) != "map[1:a 2:b 3:c]" {
		t.Errorf("hash: %v", got)
	}
	writeRows(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypeStrings, Key: keyExpr}}, rows)
	for _, r := range rows {
		if got, want := c.Get(ctx, prefix+":"+r.Name).Val(), string(r.JSON()); got != want {
			t.Errorf("string %s: %q, want %q", r.Name, got, want)
		}
	}
	ps := c.Subscribe(ctx, prefix+":ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	writeRows(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypePublish, Channel: &Expr{Value: prefix + ":ch"}}, ValueField: "name"}, rows)
	for _, r := range rows {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Payload != r.Name {
			t.Errorf("published %q, want %q", m.Payload, r.Name)
		}
	}
}

// A key expression that is null for a row fails the write, naming it.
func TestSinkNullKey(t *testing.T) {
	serverURL(t)
	out := buildOutput(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypeStrings, Key: &Expr{Expr: "name"}}}, conformance.Schema())
	snk, _ := out.NewSink(connectors.TaskInfo{JobID: "j", OperatorID: "snk"})
	ctx := context.Background()
	if err := snk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)
	nulls := nullNames()
	defer nulls.Release()
	if err := snk.Write(ctx, nulls); err == nil || err.Error() != `redis: redis_type.key: "name" is null in row 0` {
		t.Errorf("Write: %v", err)
	}
}

// nullNames returns one row of conformance.Schema whose name is null.
func nullNames() arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, conformance.Schema())
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).AppendNull()
	return b.NewRecordBatch()
}
