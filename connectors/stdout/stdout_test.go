package stdout

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func record(t testing.TB) arrow.RecordBatch {
	schema := connectors.WithMeta(arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "g", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	f := rb.Fields()
	v := []bool{true, false}
	f[0].(*array.Int64Builder).AppendValues([]int64{7, 0}, v)
	f[1].(*array.Float32Builder).AppendValues([]float32{float32(math.NaN()), 0}, v)
	f[2].(*array.Float64Builder).AppendValues([]float64{2.5, 0}, v)
	f[3].(*array.StringBuilder).AppendValues([]string{"a\tb", ""}, v)
	f[4].(*array.BooleanBuilder).AppendValues([]bool{false, false}, v)
	f[5].(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{-1, 0}, v)
	f[6].(*array.StringBuilder).AppendValues([]string{"src", "src"}, nil)
	f[7].(*array.Int32Builder).AppendValues([]int32{1, 1}, nil)
	f[8].(*array.Int64Builder).AppendValues([]int64{3, 4}, nil)
	return rb.NewRecordBatch()
}

const want = `{"id":7,"f":"NaN","g":2.5,"s":"a\tb","b":false,"t":"1969-12-31T23:59:59.999999Z"%s}
{"id":null,"f":null,"g":null,"s":null,"b":null,"t":null%s}
`

func build(t testing.TB, cfg string, bound any, schema *arrow.Schema) (connectors.Output, error) {
	f, ok := connectors.LookupOutput("stdout")
	if !ok {
		t.Fatal("stdout not registered")
	}
	return f(connectors.BuildContext{OperatorID: "out", Config: json.RawMessage(cfg), Bound: bound}, schema)
}

func TestFormatAndKeepMeta(t *testing.T) {
	rec := record(t)
	defer rec.Release()
	for _, keep := range []bool{false, true} {
		var buf bytes.Buffer
		cfg := `{}`
		if keep {
			cfg = `{"keep_meta": true}`
		}
		out, err := build(t, cfg, Config{Writer: &buf}, rec.Schema())
		if err != nil {
			t.Fatal(err)
		}
		s, _ := out.NewSink(connectors.TaskInfo{Parallelism: 1})
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
		m1, m2 := "", ""
		if keep {
			m1 = `,"__meta_source":"src","__meta_partition":1,"__meta_offset":3`
			m2 = `,"__meta_source":"src","__meta_partition":1,"__meta_offset":4`
		}
		if got := buf.String(); got != strings.NewReplacer("%s}\n{", m1+"}\n{", "%s}\n", m2+"}\n").Replace(want) {
			t.Errorf("keep_meta %v: got\n%s", keep, got)
		}
	}
}

func TestDefaultsToStdout(t *testing.T) {
	rec := record(t)
	defer rec.Release()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	out, err := build(t, `{}`, nil, rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := out.NewSink(connectors.TaskInfo{Parallelism: 1})
	werr := s.Write(context.Background(), rec)
	os.Stdout = old
	w.Close()
	if werr != nil {
		t.Fatal(werr)
	}
	var got bytes.Buffer
	got.ReadFrom(r)
	if !strings.HasPrefix(got.String(), `{"id":7,`) || strings.Count(got.String(), "\n") != 2 {
		t.Errorf("got %s", got.String())
	}
}

func TestConcurrentSinksWriteWholeBatches(t *testing.T) {
	rec := record(t)
	defer rec.Release()
	var buf bytes.Buffer // not safe for concurrent use: the sinks' lock must serialize
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		s := NewSinkTo(&buf, false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				if err := s.Write(context.Background(), rec); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	batch := strings.NewReplacer("%s", "").Replace(want)
	if got := buf.String(); got != strings.Repeat(batch, 800) {
		t.Errorf("output is not 800 whole batches (%d bytes)", len(got))
	}
}

func TestConfig(t *testing.T) {
	if _, err := build(t, `{"keep_meta": 1}`, nil, nil); err == nil || err.Error() != `keep_meta: must be true or false (got number 1)` {
		t.Errorf("got %v", err)
	}
	if _, err := build(t, `{"path": "x"}`, nil, nil); err == nil || !strings.Contains(err.Error(), "path: unknown field") {
		t.Errorf("got %v", err)
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	if _, err := build(t, `{}`, nil, bad); err == nil || !strings.Contains(err.Error(), `column "l"`) {
		t.Errorf("got %v", err)
	}
	raw, _ := json.Marshal(Config{KeepMeta: true, Writer: os.Stderr})
	if string(raw) != `{"keep_meta":true}` || (Config{}).OutputType() != "stdout" {
		t.Errorf("got %s", raw)
	}
}

// value_field writes each row's bytes of that column as they are, a line
// each (ArkFlow's __value__ output), or back to back without
// append_newline; a null is an empty line. A column that is not string or
// binary is refused, naming value_field.
func TestValueField(t *testing.T) {
	rec := record(t)
	defer rec.Release()
	for cfg, want := range map[string]string{
		`{"value_field": "s"}`:                          "a\tb\n\n",
		`{"value_field": "s", "append_newline": false}`: "a\tb",
		`{"value_field": "s", "append_newline": true}`:  "a\tb\n\n",
	} {
		var buf bytes.Buffer
		out, err := build(t, cfg, Config{Writer: &buf}, rec.Schema())
		if err != nil {
			t.Fatal(err)
		}
		s, _ := out.NewSink(connectors.TaskInfo{})
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("%s: wrote %q, want %q", cfg, buf.String(), want)
		}
	}
	if _, err := build(t, `{"value_field": "id"}`, nil, rec.Schema()); err == nil || !strings.HasPrefix(err.Error(), `value_field: column "id" has type int64`) {
		t.Errorf("int64 value_field: %v", err)
	}
	out, _ := build(t, `{"value_field": "nope"}`, nil, nil)
	s, _ := out.NewSink(connectors.TaskInfo{})
	if err := s.Write(context.Background(), rec); err == nil || !strings.Contains(err.Error(), `no column "nope"`) {
		t.Errorf("missing column at write: %v", err)
	}
}
