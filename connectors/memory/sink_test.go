package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	gomem "github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
)

// metaBatch is a batch as a source delivers it: v plus metadata columns.
func metaBatch(t *testing.T, vals ...int64) arrow.RecordBatch {
	t.Helper()
	schema := connectors.WithMeta(valueSchema)
	b := array.NewRecordBuilder(gomem.DefaultAllocator, schema)
	defer b.Release()
	for i, v := range vals {
		b.Field(0).(*array.Int64Builder).Append(v)
		b.Field(1).(*array.StringBuilder).Append("src")
		b.Field(2).(*array.Int32Builder).Append(0)
		b.Field(3).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

func output(t *testing.T, config string, bound *memory.Sink) connectors.Sink {
	t.Helper()
	f, ok := connectors.LookupOutput("memory")
	if !ok {
		t.Fatal("memory output not registered")
	}
	bc := connectors.BuildContext{Config: json.RawMessage(config)}
	if bound != nil {
		bc.Bound = bound
	}
	out, err := f(bc, connectors.WithMeta(valueSchema))
	if err != nil {
		t.Fatal(err)
	}
	s, err := out.NewSink(connectors.TaskInfo{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func colNames(rec arrow.RecordBatch) []string {
	var out []string
	for _, f := range rec.Schema().Fields() {
		out = append(out, f.Name)
	}
	return out
}

func TestSinkCapture(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep_meta=", keep), func(t *testing.T) {
			sink := memory.NewSink()
			sink.KeepMeta = keep
			s := output(t, `{}`, sink)
			recs := []arrow.RecordBatch{metaBatch(t, 1, 2), metaBatch(t), metaBatch(t, 3, 4, 5)}
			for _, r := range recs {
				if err := s.Write(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				r.Release() // the runtime releases after Write; the sink retained what it keeps
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if sink.NumRows() != 5 {
				t.Fatalf("NumRows = %d", sink.NumRows())
			}
			got := sink.Records()
			if len(got) != 3 {
				t.Fatalf("%d records", len(got))
			}
			var vals []int64
			for _, r := range got {
				want := []string{"v"}
				if keep {
					want = []string{"v", connectors.MetaSource, connectors.MetaPartition, connectors.MetaOffset}
				}
				if !reflect.DeepEqual(colNames(r), want) {
					t.Fatalf("columns %v, want %v", colNames(r), want)
				}
				v := r.Column(0).(*array.Int64)
				for i := 0; i < v.Len(); i++ {
					vals = append(vals, v.Value(i))
				}
			}
			if !reflect.DeepEqual(vals, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("values %v", vals)
			}
			// Records returns a copy of the list.
			got[0] = nil
			if sink.Records()[0] == nil {
				t.Fatal("Records exposes the sink's slice")
			}
			sink.Reset()
			if sink.NumRows() != 0 || len(sink.Records()) != 0 {
				t.Fatalf("after Reset: %d rows, %d records", sink.NumRows(), len(sink.Records()))
			}
		})
	}
}

func TestSinkRetainsWhatItKeeps(t *testing.T) {
	mem := gomem.NewCheckedAllocator(gomem.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, keep := range []bool{false, true} {
		sink := &memory.Sink{KeepMeta: keep}
		s := output(t, `{}`, sink)
		b := array.NewInt64Builder(mem)
		b.AppendValues([]int64{42}, nil)
		a := b.NewArray()
		b.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}, {Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{a, a}, 1)
		a.Release()
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if got := sink.Records()[0].Column(0).(*array.Int64).Value(0); got != 42 {
			t.Fatalf("captured value %d", got)
		}
		sink.Reset() // releases the last reference
	}
}

func TestSinkOnWrite(t *testing.T) {
	boom := errors.New("injected")
	sink := memory.NewSink()
	var seen []int64
	sink.OnWrite = func(ctx context.Context, rec arrow.RecordBatch) error {
		if ctx == nil {
			t.Error("nil ctx")
		}
		n := rec.NumRows()
		seen = append(seen, n)
		if n == 2 {
			return boom
		}
		return nil
	}
	s := output(t, `{}`, sink)
	for _, n := range []int{1, 2, 3} {
		rec := metaBatch(t, seq(0, n)...)
		err := s.Write(context.Background(), rec)
		rec.Release()
		if n == 2 {
			if !errors.Is(err, boom) {
				t.Fatalf("Write = %v, want the injected error", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(seen, []int64{1, 2, 3}) {
		t.Fatalf("OnWrite saw %v", seen)
	}
	// The failed batch was not captured.
	if sink.NumRows() != 4 || len(sink.Records()) != 2 {
		t.Fatalf("captured %d rows in %d records, want 4 in 2", sink.NumRows(), len(sink.Records()))
	}
	sink.Reset()
}

func TestSinkSpec(t *testing.T) {
	sink := memory.NewSink()
	if sink.OutputType() != "memory" {
		t.Fatalf("OutputType = %q", sink.OutputType())
	}
	for _, keep := range []bool{false, true} {
		sink.KeepMeta = keep
		b, err := json.Marshal(sink)
		if err != nil {
			t.Fatal(err)
		}
		want := `{}`
		if keep {
			want = `{"keep_meta":true}`
		}
		if string(b) != want {
			t.Fatalf("MarshalJSON = %s, want %s", b, want)
		}
		var cfg memory.SinkConfig
		if err := connectors.DecodeConfig(b, &cfg); err != nil || cfg.KeepMeta != keep {
			t.Fatalf("decoded %+v, %v", cfg, err)
		}
	}
	// Declarative sinks capture privately, honouring keep_meta.
	for _, cfg := range []string{`{"keep_meta": true}`, `{}`, ``} {
		s := output(t, cfg, nil)
		rec := metaBatch(t, 1)
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	f, _ := connectors.LookupOutput("memory")
	for _, bad := range []string{`{"keep_meta": "yes"}`, `{"keepmeta": true}`} {
		if _, err := f(connectors.BuildContext{Config: json.RawMessage(bad)}, nil); err == nil {
			t.Errorf("config %s accepted", bad)
		}
	}
	// A bound sink's own KeepMeta wins over the config.
	bound := memory.NewSink()
	s := output(t, `{"keep_meta": true}`, bound)
	rec := metaBatch(t, 1)
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if got := colNames(bound.Records()[0]); !reflect.DeepEqual(got, []string{"v"}) {
		t.Fatalf("bound sink columns %v", got)
	}
	bound.Reset()
}

func TestSinkConcurrentSubtasks(t *testing.T) {
	sink := memory.NewSink()
	f, _ := connectors.LookupOutput("memory")
	out, err := f(connectors.BuildContext{Config: json.RawMessage(`{}`), Bound: sink}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const subtasks, writes = 4, 50
	var wg sync.WaitGroup
	for s := 0; s < subtasks; s++ {
		task, err := out.NewSink(connectors.TaskInfo{Subtask: s, Parallelism: subtasks})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := 0; i < writes; i++ {
				rec := metaBatch(t, int64(s), int64(i))
				if err := task.Write(context.Background(), rec); err != nil {
					t.Error(err)
				}
				rec.Release()
				_ = sink.NumRows()
			}
		})
	}
	wg.Wait()
	if sink.NumRows() != subtasks*writes*2 || len(sink.Records()) != subtasks*writes {
		t.Fatalf("captured %d rows in %d records", sink.NumRows(), len(sink.Records()))
	}
	sink.Reset()
}
