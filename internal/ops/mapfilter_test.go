package ops

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A map passes the input's acknowledgement on with the one batch it
// emits; a filter does too, or releases it when no row is left.
func TestMapAndFilterExpressions(t *testing.T) {
	t.Parallel()
	withMeta := connectors.WithMeta(clicks)
	const metaRow = `"__meta_source":"s","__meta_partition":0,"__meta_offset":7`
	cases := []struct {
		name, kind, config string
		input              *arrow.Schema
		rows               string
		wantCols, wantRows string // wantRows "" : nothing emitted
	}{{
		name: "set adds a column before the metadata", kind: job.KindMap, input: withMeta,
		config:   `{"set":[{"name":"double","expr":"amount * 2"}]}`,
		rows:     `[{"user":"a","amount":1,` + metaRow + `},{"user":"b","amount":null,` + metaRow + `}]`,
		wantCols: "user:utf8 amount:int64 double:int64 __meta_source:utf8 __meta_partition:int32 __meta_offset:int64",
		wantRows: `[{"__meta_offset":7,"__meta_partition":0,"__meta_source":"s","amount":1,"double":2,"user":"a"},` +
			`{"__meta_offset":7,"__meta_partition":0,"__meta_source":"s","amount":null,"double":null,"user":"b"}]`,
	}, {
		name: "set replaces in place, and a later set sees it", kind: job.KindMap, input: clicks,
		config:   `{"set":[{"name":"amount","expr":"amount + 1"},{"name":"big","expr":"amount > 1"}]}`,
		rows:     `[{"user":"a","amount":1},{"user":"b","amount":0}]`,
		wantCols: "user:utf8 amount:int64 big:bool",
		wantRows: `[{"amount":2,"big":true,"user":"a"},{"amount":1,"big":false,"user":"b"}]`,
	}, {
		name: "drop", kind: job.KindMap, input: clicks,
		config:   `{"drop":["amount"]}`,
		rows:     `[{"user":"a","amount":1}]`,
		wantCols: "user:utf8", wantRows: `[{"user":"a"}]`,
	}, {
		name: "select reorders and keeps the metadata", kind: job.KindMap, input: withMeta,
		config:   `{"select":["amount","user"]}`,
		rows:     `[{"user":"a","amount":1,` + metaRow + `}]`,
		wantCols: "amount:int64 user:utf8 __meta_source:utf8 __meta_partition:int32 __meta_offset:int64",
		wantRows: `[{"__meta_offset":7,"__meta_partition":0,"__meta_source":"s","amount":1,"user":"a"}]`,
	}, {
		name: "filter keeps true rows; null is false", kind: job.KindFilter, input: clicks,
		config:   `{"expr":"amount > 1"}`,
		rows:     `[{"user":"a","amount":1},{"user":"b","amount":2},{"user":"c","amount":null},{"user":"d","amount":5}]`,
		wantCols: "user:utf8 amount:int64",
		wantRows: `[{"amount":2,"user":"b"},{"amount":5,"user":"d"}]`,
	}, {
		name: "filter that keeps nothing emits nothing", kind: job.KindFilter, input: clicks,
		config:   `{"expr":"amount > 100"}`,
		rows:     `[{"user":"a","amount":1},{"user":"b","amount":null}]`,
		wantCols: "user:utf8 amount:int64",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in, out := instance(t, opSpec{kind: c.kind, config: c.config, input: c.input})
			if got := colsOf(out); got != c.wantCols {
				t.Errorf("output schema %s, want %s", got, c.wantCols)
			}
			var a acks
			node := a.node()
			var e emitter
			if err := in.Process(context.Background(), Batch{Rec: rec(t, c.input, c.rows), Ack: node}, &e); err != nil {
				t.Fatal(err)
			}
			got := e.take()
			if c.wantRows == "" {
				if len(got) != 0 {
					t.Fatalf("emitted %d batches, want none", len(got))
				}
				if n, failed := a.done(); n != 1 || failed != 0 {
					t.Errorf("input ack completed %d times (%d failed), want once with nil", n, failed)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("emitted %d batches, want 1", len(got))
			}
			b := got[0]
			if b.Ack != node || b.Port != PortMain {
				t.Errorf("emitted ack %p port %d, want the input's %p on PortMain", b.Ack, b.Port, node)
			}
			if got := colsOf(b.Rec.Schema()); got != c.wantCols {
				t.Errorf("emitted schema %s, want %s", got, c.wantCols)
			}
			if got := rowsOf(t, b.Rec); got != c.wantRows {
				t.Errorf("rows\n%s\nwant\n%s", got, c.wantRows)
			}
			if n, _ := a.done(); n != 0 {
				t.Fatalf("input ack completed before the output was delivered")
			}
			deliver(got)
			if n, failed := a.done(); n != 1 || failed != 0 {
				t.Errorf("input ack completed %d times (%d failed), want once with nil", n, failed)
			}
		})
	}
}

// A map with nothing to do is a Passthrough: it emits the batch itself.
func TestMapIdentityPassesTheBatchThrough(t *testing.T) {
	t.Parallel()
	in, out := instance(t, opSpec{kind: job.KindMap, config: `{"select":["user","amount"]}`, input: clicks})
	if _, ok := in.(Passthrough); !ok || !out.Equal(clicks) {
		t.Fatalf("instance %T, output %v; want Passthrough with the input schema", in, out)
	}
	var e emitter
	r := rec(t, clicks, `[{"user":"a","amount":1}]`)
	if err := in.Process(context.Background(), Batch{Rec: r}, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.got) != 1 || e.got[0].Rec != r {
		t.Fatalf("emitted %v, want the input record", e.got)
	}
	deliver(e.take())
}

// Go functions: the batch a MapFunc returns goes on with the input's ack;
// an empty result releases it; a failure or a schema other than the
// declared one releases it with the error and fails Process.
func TestGoFunctions(t *testing.T) {
	t.Parallel()
	lens := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	boom := errors.New("boom")
	rowCount := func(_ context.Context, r arrow.RecordBatch) (arrow.RecordBatch, error) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, lens)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(r.NumRows())
		return b.NewRecordBatch(), nil
	}
	cases := []struct {
		name     string
		kind     string
		bound    any
		wantRows string // "" : nothing emitted
		wantErr  string // "" : no error
	}{
		{name: "map", kind: job.KindMap, bound: MapBinding{Name: "f", Fn: rowCount, Output: lens}, wantRows: `[{"n":3}]`},
		{name: "map returns nil", kind: job.KindMap, bound: MapBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, nil }}},
		{name: "map fails", kind: job.KindMap, bound: MapBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, boom }},
			wantErr: `operator "op": boom`},
		{name: "map returns another schema", kind: job.KindMap, bound: MapBinding{Name: "f", Fn: rowCount},
			wantErr: `operator "op": function returned schema schema:
  fields: 1
    - n: type=int64, but the operator declares schema:
  fields: 2
    - user: type=utf8, nullable
    - amount: type=int64, nullable`},
		{name: "filter", kind: job.KindFilter, bound: FilterBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) ([]bool, error) { return []bool{false, true, false}, nil }},
			wantRows: `[{"amount":2,"user":"b"}]`},
		{name: "filter keeps nothing", kind: job.KindFilter, bound: FilterBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) ([]bool, error) { return make([]bool, 3), nil }}},
		{name: "filter mask of the wrong length", kind: job.KindFilter, bound: FilterBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) ([]bool, error) { return []bool{true}, nil }},
			wantErr: `operator "op": filter returned 1 values for 3 rows`},
		{name: "filter fails", kind: job.KindFilter, bound: FilterBinding{Name: "f", Fn: func(context.Context, arrow.RecordBatch) ([]bool, error) { return nil, boom }},
			wantErr: `operator "op": boom`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in, _ := instance(t, opSpec{kind: c.kind, config: `{"function":"f"}`, input: clicks, bound: c.bound})
			var a acks
			node := a.node()
			var e emitter
			err := in.Process(context.Background(), Batch{Rec: rec(t, clicks, `[{"user":"a","amount":1},{"user":"b","amount":2},{"user":"c","amount":3}]`), Ack: node}, &e)
			got := e.take()
			switch {
			case c.wantErr != "":
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("Process error %v, want %s", err, c.wantErr)
				}
				if n, failed := a.done(); len(got) != 0 || n != 1 || failed != 1 {
					t.Errorf("emitted %d, input ack completed %d times (%d failed); want nothing emitted and the ack failed", len(got), n, failed)
				}
			case err != nil:
				t.Fatal(err)
			case c.wantRows == "":
				if n, failed := a.done(); len(got) != 0 || n != 1 || failed != 0 {
					t.Errorf("emitted %d, input ack completed %d times (%d failed); want nothing emitted and the ack released", len(got), n, failed)
				}
			default:
				if len(got) != 1 || got[0].Ack != node {
					t.Fatalf("emitted %d batches, want 1 with the input's ack", len(got))
				}
				if rows := rowsOf(t, got[0].Rec); rows != c.wantRows {
					t.Errorf("rows %s, want %s", rows, c.wantRows)
				}
				deliver(got)
				if n, failed := a.done(); n != 1 || failed != 0 {
					t.Errorf("input ack completed %d times (%d failed), want once with nil", n, failed)
				}
			}
		})
	}
}

// Factory errors name their field relative to the operator.
func TestMapAndFilterConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ kind, config, want string }{
		{job.KindMap, `{"sett":1}`, "config.sett: unknown field (known fields: set, drop, select, function, sql, table_name); did you mean \"set\"?"},
		{job.KindMap, `{"function":"f","drop":["user"]}`, "config.function: cannot be combined with set, drop or select"},
		{job.KindMap, `{"set":[{"expr":"1"}],"drop":["nope"],"select":["amount"]}`, "config.set[0].name: is required\n" +
			`config.drop[0]: unknown column "nope" (columns: user, amount)`},
		{job.KindMap, `{"drop":["user"],"select":["user"]}`, `config.select[0]: column "user" is also dropped`},
		{job.KindUDF, `{}`, "config.function: a udf operator needs a Go function bound by the builder"},
		{job.KindFilter, `{"expr":"amount > 1","function":"f"}`, "config: set either expr or function, not both"},
		{job.KindFilter, `{"expr":"amount"}`, "config.expr: must be a boolean expression (got int64)"},
		{job.KindFilter, `{"expr":"nope > 1"}`, `config.expr: column 1: unknown column "nope" (columns: user, amount)`},
	}
	for _, c := range cases {
		_, err := opSpec{kind: c.kind, config: c.config, input: clicks}.build()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %s: error %v\nwant %s", c.kind, c.config, err, c.want)
		}
	}
}

// A bound function's Check runs at build with the input schema, or nil
// when an upstream failed, and its errors fail the build under config.
func TestBoundFunctionCheck(t *testing.T) {
	t.Parallel()
	noMap := func(context.Context, arrow.RecordBatch) (arrow.RecordBatch, error) { return nil, nil }
	noFilter := func(context.Context, arrow.RecordBatch) ([]bool, error) { return nil, nil }
	noProcess := func(context.Context, func(int) (*statestore.Keyed, error), arrow.RecordBatch) (arrow.RecordBatch, error) {
		return nil, nil
	}
	var seen []*arrow.Schema
	check := func(input *arrow.Schema) error {
		seen = append(seen, input)
		if input == nil {
			return errors.New("refused type")
		}
		return errors.Join(Errf("In", "no column %q", "usr"), Errf("Out", "refused"))
	}
	want := "config.In: no column \"usr\"\nconfig.Out: refused"
	for _, c := range []struct {
		kind  string
		bound any
	}{
		{job.KindMap, MapBinding{Name: "f", Fn: noMap, Check: check}},
		{job.KindFilter, FilterBinding{Name: "f", Fn: noFilter, Check: check}},
		{job.KindUDF, ProcessBinding{Name: "f", Fn: noProcess, Check: check}},
	} {
		seen = nil
		_, err := opSpec{kind: c.kind, config: `{"function":"f"}`, keyField: "user", keyed: true, input: clicks, bound: c.bound}.build()
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v\nwant %s", c.kind, err, want)
		}
		_, err = opSpec{kind: c.kind, config: `{"function":"f"}`, keyField: "user", keyed: true, bound: c.bound}.build()
		if err == nil || err.Error() != "config: refused type" {
			t.Errorf("%s without input: error %v, want config: refused type", c.kind, err)
		}
		if len(seen) != 2 || seen[0] != clicks || seen[1] != nil {
			t.Errorf("%s: Check saw %v, want the input, then nil", c.kind, seen)
		}
	}
	// Without a Check, or one that accepts the input, the function builds.
	for _, bound := range []any{MapBinding{Name: "f", Fn: noMap}, MapBinding{Name: "f", Fn: noMap, Check: func(*arrow.Schema) error { return nil }}} {
		if _, err := (opSpec{kind: job.KindMap, config: `{"function":"f"}`, input: clicks, bound: bound}).build(); err != nil {
			t.Errorf("%+v: %v", bound, err)
		}
	}
}
