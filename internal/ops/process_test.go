package ops

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// seenSchema is what the counting process function emits.
var seenSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "seen", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// countSeen numbers the rows of each user, in keyed state: every row
// emits (user, how many rows of that user so far).
func countSeen(_ context.Context, keyed func(int) (*statestore.Keyed, error), r arrow.RecordBatch) (arrow.RecordBatch, error) {
	seen := state.NewValue[int64]("seen")
	users := r.Column(0).(*array.String)
	b := array.NewRecordBuilder(memory.DefaultAllocator, seenSchema)
	defer b.Release()
	for row := 0; row < int(r.NumRows()); row++ {
		ek, err := keyed(row)
		if err != nil {
			return nil, err
		}
		k := statestore.Public(ek).(*state.Keyed)
		n, _, err := seen.Get(k)
		if err != nil {
			return nil, err
		}
		n++
		if err := seen.Set(k, n); err != nil {
			return nil, err
		}
		b.Field(0).(*array.StringBuilder).Append(users.Value(row))
		b.Field(1).(*array.Int64Builder).Append(n)
	}
	return b.NewRecordBatch(), nil
}

func processOp(fn ProcessFunc) opSpec {
	return opSpec{kind: job.KindUDF, keyField: "user", keyed: true, input: clicks, config: `{"function":"p"}`,
		bound: ProcessBinding{Name: "p", Fn: fn, Output: seenSchema}}
}

// A process function's keyed state carries across batches (staged writes
// are visible before they commit) and, once the output is delivered,
// across instances over the same backend.
func TestProcessKeyedStateAcrossBatches(t *testing.T) {
	t.Parallel()
	b := statestore.NewMemory()
	built, err := processOp(countSeen).build()
	if err != nil {
		t.Fatal(err)
	}
	in, err := built.New(task(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := in.(Journaled); !ok {
		t.Errorf("a process instance is not Journaled")
	}
	var a acks
	var e emitter
	ctx := context.Background()
	for _, rows := range []string{`[{"user":"a"},{"user":"b"},{"user":"a"}]`, `[{"user":"a"}]`} {
		if err := in.Process(ctx, Batch{Rec: rec(t, clicks, rows), Ack: a.node()}, &e); err != nil {
			t.Fatal(err)
		}
	}
	got := e.take()
	if len(got) != 2 {
		t.Fatalf("emitted %d batches, want 2", len(got))
	}
	for i, want := range []string{`[{"seen":1,"user":"a"},{"seen":1,"user":"b"},{"seen":2,"user":"a"}]`, `[{"seen":3,"user":"a"}]`} {
		if rows := rowsOf(t, got[i].Rec); rows != want {
			t.Errorf("batch %d: rows %s, want %s", i, rows, want)
		}
	}
	if n, _ := a.done(); n != 0 {
		t.Fatalf("%d input acks completed before delivery", n)
	}
	deliver(got)
	if n, failed := a.done(); n != 2 || failed != 0 {
		t.Fatalf("%d input acks completed (%d failed), want 2 with nil", n, failed)
	}
	in.Close()

	in2, err := built.New(task(b))
	if err != nil {
		t.Fatal(err)
	}
	defer in2.Close()
	if err := in2.Process(ctx, Batch{Rec: rec(t, clicks, `[{"user":"b"},{"user":"a"}]`)}, &e); err != nil {
		t.Fatal(err)
	}
	got = e.take()
	if len(got) != 1 {
		t.Fatalf("after restore: emitted %d batches, want 1", len(got))
	}
	if rows, want := rowsOf(t, got[0].Rec), `[{"seen":2,"user":"b"},{"seen":4,"user":"a"}]`; rows != want {
		t.Errorf("after restore: rows %s, want %s", rows, want)
	}
	deliver(got)
}

// A process function that returns nothing releases the input's ack once
// its (empty) epoch commits.
func TestProcessEmptyResultReleasesTheAck(t *testing.T) {
	t.Parallel()
	in, _ := instance(t, processOp(func(context.Context, func(int) (*statestore.Keyed, error), arrow.RecordBatch) (arrow.RecordBatch, error) {
		return nil, nil
	}))
	var a acks
	var e emitter
	if err := in.Process(context.Background(), Batch{Rec: rec(t, clicks, `[{"user":"a"}]`), Ack: a.node()}, &e); err != nil {
		t.Fatal(err)
	}
	if n, failed := a.done(); len(e.got) != 0 || n != 1 || failed != 0 {
		t.Errorf("emitted %d, input ack completed %d times (%d failed); want nothing emitted and the ack released", len(e.got), n, failed)
	}
}

func TestProcessConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		keyField string
		keyed    bool
		input    *arrow.Schema
		want     string
	}{
		{"", true, nil, "key_field: a stateful udf needs key_field: call KeyBy before Process"},
		{"", true, clicks, "key_field: the udf operator needs key_field"},
		{"nope", true, clicks, `key_field: unknown column "nope" (columns: user, amount)`},
		{"user", false, clicks, `key_field: rows of one key must all reach the same subtask: make every input edge of "op" partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by "user"`},
	}
	for _, c := range cases {
		o := processOp(countSeen)
		o.keyField, o.keyed, o.input = c.keyField, c.keyed, c.input
		_, err := o.build()
		if err == nil || err.Error() != c.want {
			t.Errorf("key_field %q keyed %v: error %v\nwant %s", c.keyField, c.keyed, err, c.want)
		}
	}
}
