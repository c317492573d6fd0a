package ops

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

const aggConfig = `"aggregates":[{"function":"count","as":"n"},{"function":"count","field":"amount","as":"n_amount"},{"function":"sum","field":"amount"}]`

func aggOp(emit string) opSpec {
	return opSpec{kind: job.KindAggregate, keyField: "user", keyed: true, input: clicks, config: `{"emit":"` + emit + `",` + aggConfig + `}`}
}

// In updates mode every batch emits the running aggregates of the keys it
// touched, in order of first appearance. count(field) and sum skip nulls;
// a null key is a key of its own.
func TestAggregateUpdatesRunPerKeyAcrossBatches(t *testing.T) {
	t.Parallel()
	b := statestore.NewMemory()
	built, err := aggOp("updates").build()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := colsOf(built.Output), "user:utf8 n:int64 n_amount:int64 sum_amount:int64"; got != want {
		t.Fatalf("output schema %s, want %s", got, want)
	}
	in, err := built.New(task(b))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var a acks
	var e emitter
	steps := []struct{ rows, want string }{
		{`[{"user":"a","amount":1},{"user":"b","amount":2},{"user":"a","amount":3}]`,
			`[{"n":2,"n_amount":2,"sum_amount":4,"user":"a"},{"n":1,"n_amount":1,"sum_amount":2,"user":"b"}]`},
		{`[{"user":"b","amount":null},{"user":null,"amount":5},{"user":"a","amount":10}]`,
			`[{"n":2,"n_amount":1,"sum_amount":2,"user":"b"},{"n":1,"n_amount":1,"sum_amount":5,"user":null},{"n":3,"n_amount":3,"sum_amount":14,"user":"a"}]`},
	}
	for i, s := range steps {
		node := a.node()
		if err := in.Process(context.Background(), Batch{Rec: rec(t, clicks, s.rows), Ack: node}, &e); err != nil {
			t.Fatal(err)
		}
		got := e.take()
		if len(got) != 1 {
			t.Fatalf("batch %d: emitted %d batches, want 1", i, len(got))
		}
		if rows := rowsOf(t, got[0].Rec); rows != s.want {
			t.Errorf("batch %d: rows\n%s\nwant\n%s", i, rows, s.want)
		}
		// The emitted batch has an ack of its own: the state it staged
		// commits, and the input's ack completes, once it is delivered.
		if got[0].Ack == node || got[0].Port != PortMain {
			t.Errorf("batch %d: emitted the input's ack or port %d", i, got[0].Port)
		}
		if n, _ := a.done(); n != i {
			t.Fatalf("batch %d: %d input acks completed before delivery, want %d", i, n, i)
		}
		deliver(got)
		if n, failed := a.done(); n != i+1 || failed != 0 {
			t.Fatalf("batch %d: %d input acks completed (%d failed), want %d", i, n, failed, i+1)
		}
	}

	// A new instance over the same backend restores the committed state.
	in2, err := built.New(task(b))
	if err != nil {
		t.Fatal(err)
	}
	defer in2.Close()
	if err := in2.Process(context.Background(), Batch{Rec: rec(t, clicks, `[{"user":"a","amount":1}]`)}, &e); err != nil {
		t.Fatal(err)
	}
	got := e.take()
	if len(got) != 1 {
		t.Fatalf("after restore: emitted %d batches, want 1", len(got))
	}
	if rows, want := rowsOf(t, got[0].Rec), `[{"n":4,"n_amount":4,"sum_amount":15,"user":"a"}]`; rows != want {
		t.Errorf("after restore: rows %s, want %s", rows, want)
	}
	deliver(got)
}

// In final mode nothing is emitted until the input ends; then every key
// once, with one ack that completes every input's when delivered.
func TestAggregateFinalEmitsOnceAtTheEnd(t *testing.T) {
	t.Parallel()
	in, _ := instance(t, aggOp("final"))
	var a acks
	var e emitter
	ctx := context.Background()
	for _, rows := range []string{`[{"user":"a","amount":1},{"user":"b","amount":2}]`, `[{"user":"a","amount":null}]`} {
		if err := in.Process(ctx, Batch{Rec: rec(t, clicks, rows), Ack: a.node()}, &e); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Watermark(ctx, 1_000, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.got) != 0 {
		t.Fatalf("emitted %d batches before the input ended", len(e.got))
	}
	if err := in.Watermark(ctx, math.MaxInt64, &e); err != nil {
		t.Fatal(err)
	}
	got := e.take()
	if len(got) != 1 {
		t.Fatalf("emitted %d batches at the end, want 1", len(got))
	}
	if rows, want := rowsOf(t, got[0].Rec), `[{"n":2,"n_amount":1,"sum_amount":1,"user":"a"},{"n":1,"n_amount":1,"sum_amount":2,"user":"b"}]`; rows != want {
		t.Errorf("rows\n%s\nwant\n%s", rows, want)
	}
	if n, _ := a.done(); n != 0 {
		t.Fatalf("%d input acks completed before delivery", n)
	}
	deliver(got)
	if n, failed := a.done(); n != 2 || failed != 0 {
		t.Errorf("%d input acks completed (%d failed), want 2 with nil", n, failed)
	}
}

// Closing a final aggregate before the end releases the acks it holds
// with ErrAbandoned: their rows will be replayed.
func TestAggregateCloseAbandonsHeldAcks(t *testing.T) {
	t.Parallel()
	built, err := aggOp("final").build()
	if err != nil {
		t.Fatal(err)
	}
	in, err := built.New(task(statestore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	var a acks
	for range 2 {
		if err := in.Process(context.Background(), Batch{Rec: rec(t, clicks, `[{"user":"a","amount":1}]`), Ack: a.node()}, &emitter{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	errs := a.errs
	if len(errs) != 2 || !errors.Is(errs[0], ErrAbandoned) || !errors.Is(errs[1], ErrAbandoned) {
		t.Errorf("input acks completed with %v, want 2 × ErrAbandoned", errs)
	}
}

// Config problems, each with its field path, all at once.
func TestAggregateConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		o    opSpec
		want string
	}{
		{opSpec{keyField: "user", keyed: true, config: `{"emit":"sometimes",` + aggConfig + `}`}, `config.emit: must be "updates" or "final" (got "sometimes")`},
		{opSpec{keyed: true, config: `{"aggregates":[{"function":"median","field":"amount"}]}`}, "key_field: the aggregate operator needs key_field\n" +
			`config.aggregates[0].function: unknown aggregate function "median" (known: count, sum, min, max, avg, first, last)`},
		{opSpec{keyField: "user", config: `{` + aggConfig + `}`}, `key_field: rows of one key must all reach the same subtask: make every input edge of "op" partitioned, give it parallelism 1, or (when the input is already partitioned by this key) declare the source's keyed_by "user"`},
		{opSpec{keyField: "user", keyed: true, config: `{"aggregates":[{"function":"count","as":"user"}]}`}, `config.aggregates[0].as: output column "user" collides with the key column`},
	}
	for _, c := range cases {
		c.o.kind, c.o.input = job.KindAggregate, clicks
		_, err := c.o.build()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v\nwant %s", c.o.config, err, c.want)
		}
	}
}
