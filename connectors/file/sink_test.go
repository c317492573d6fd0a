package file

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func buildOutput(t testing.TB, cfg string, schema *arrow.Schema) (connectors.Output, error) {
	t.Helper()
	f, ok := connectors.LookupOutput("file")
	if !ok {
		t.Fatal("file output not registered")
	}
	return f(connectors.BuildContext{JobID: "job", OperatorID: "sink", Config: json.RawMessage(cfg)}, schema)
}

func openSink(t testing.TB, cfg string, schema *arrow.Schema, subtask int) *Sink {
	t.Helper()
	out, err := buildOutput(t, cfg, schema)
	if err != nil {
		t.Fatal(err)
	}
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "job", OperatorID: "sink", Subtask: subtask, Parallelism: subtask + 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close(context.Background()) })
	return snk.(*Sink)
}

func tsType(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }

// allTypesRecord has a column of every declarable type plus meta columns.
func allTypesRecord(t testing.TB) arrow.RecordBatch {
	schema := connectors.WithMeta(arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "t_s", Type: tsType(arrow.Second), Nullable: true},
		{Name: "t_ms", Type: tsType(arrow.Millisecond), Nullable: true},
		{Name: "t_us", Type: tsType(arrow.Microsecond), Nullable: true},
		{Name: "t_ns", Type: tsType(arrow.Nanosecond), Nullable: true},
	}, nil))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	f := rb.Fields()
	v := []bool{true, true, true, false}
	f[0].(*array.Int64Builder).AppendValues([]int64{-9223372036854775808, 0, 42, 0}, v)
	f[1].(*array.Float32Builder).AppendValues([]float32{0.1, float32(math.Inf(-1)), 3e38, 0}, v)
	f[2].(*array.Float64Builder).AppendValues([]float64{0.1, math.NaN(), 1e-7, 0}, v)
	f[3].(*array.StringBuilder).AppendValues([]string{"plain", "q\"\\\n\x00", "日本", ""}, v)
	f[4].(*array.BooleanBuilder).AppendValues([]bool{true, false, true, false}, v)
	f[5].(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704164645, -1, 0, 0}, v)
	f[6].(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704164645123, -1, 0, 0}, v)
	f[7].(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704164645123456, -1, 0, 0}, v)
	f[8].(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704164645123456789, -1, 0, 0}, v)
	f[9].(*array.StringBuilder).AppendValues([]string{"src", "src", "src", "src"}, nil)
	f[10].(*array.Int32Builder).AppendValues([]int32{2, 2, 2, 2}, nil)
	f[11].(*array.Int64Builder).AppendValues([]int64{5, 8, 11, 14}, nil)
	return rb.NewRecordBatch()
}

const goldenRows = `{"i":-9223372036854775808,"f32":0.1,"f64":0.1,"s":"plain","b":true,"t_s":"2024-01-02T03:04:05Z","t_ms":"2024-01-02T03:04:05.123Z","t_us":"2024-01-02T03:04:05.123456Z","t_ns":"2024-01-02T03:04:05.123456789Z"%s}
{"i":0,"f32":"-Inf","f64":"NaN","s":"q\"\\\n\u0000","b":false,"t_s":"1969-12-31T23:59:59Z","t_ms":"1969-12-31T23:59:59.999Z","t_us":"1969-12-31T23:59:59.999999Z","t_ns":"1969-12-31T23:59:59.999999999Z"%s}
{"i":42,"f32":3e+38,"f64":1e-07,"s":"日本","b":true,"t_s":"1970-01-01T00:00:00Z","t_ms":"1970-01-01T00:00:00.000Z","t_us":"1970-01-01T00:00:00.000000Z","t_ns":"1970-01-01T00:00:00.000000000Z"%s}
{"i":null,"f32":null,"f64":null,"s":null,"b":null,"t_s":null,"t_ms":null,"t_us":null,"t_ns":null%s}
`

func TestSinkFormatAllTypes(t *testing.T) {
	rec := allTypesRecord(t)
	defer rec.Release()
	for _, keep := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "a", "b", "out.jsonl") // parents are created
		s := openSink(t, fmt.Sprintf(`{"path":%q,"keep_meta":%v}`, path, keep), rec.Schema(), 0)
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(context.Background(), rec.NewSlice(0, 0)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := []any{"", "", "", ""}
		if keep {
			for i, off := range []int{5, 8, 11, 14} {
				m[i] = fmt.Sprintf(`,"__meta_source":"src","__meta_partition":2,"__meta_offset":%d`, off)
			}
		}
		if want := fmt.Sprintf(goldenRows, m...); string(got) != want {
			t.Errorf("keep_meta %v: got\n%s\nwant\n%s", keep, got, want)
		}
	}
}

func TestSinkAppends(t *testing.T) {
	rec := allTypesRecord(t)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	os.WriteFile(path, []byte("existing\n"), 0o644)
	s := openSink(t, fmt.Sprintf(`{"path":%q,"fsync":false}`, path), rec.Schema(), 0)
	if s.fsync {
		t.Error("fsync: false ignored")
	}
	s.Write(context.Background(), rec)
	s.Close(context.Background())
	got, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(got), "existing\n{") || strings.Count(string(got), "\n") != 5 {
		t.Errorf("got %s", got)
	}
}

func TestSinkSubtaskPath(t *testing.T) {
	rec := allTypesRecord(t)
	defer rec.Release()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "part-{subtask}", "out-{subtask}.jsonl"))
	for sub := 0; sub < 3; sub++ {
		s := openSink(t, cfg, rec.Schema(), sub)
		if !s.fsync {
			t.Error("fsync defaults to true")
		}
		one := rec.NewSlice(int64(sub), int64(sub+1))
		if err := s.Write(context.Background(), one); err != nil {
			t.Fatal(err)
		}
		one.Release()
	}
	for sub := 0; sub < 3; sub++ {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("part-%d", sub), fmt.Sprintf("out-%d.jsonl", sub)))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Split(fmt.Sprintf(goldenRows, "", "", "", ""), "\n")[sub] + "\n"; string(got) != want {
			t.Errorf("subtask %d: got %s want %s", sub, got, want)
		}
	}
}

func TestConcurrentSubtasksAppendWholeLines(t *testing.T) {
	const subtasks, batches, rows = 8, 50, 20
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "sub", Type: arrow.PrimitiveTypes.Int64},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
		{Name: "pad", Type: arrow.BinaryTypes.String},
	}, nil)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	cfg := fmt.Sprintf(`{"path":%q,"fsync":false}`, path)
	sinks := make([]*Sink, subtasks)
	for i := range sinks {
		sinks[i] = openSink(t, cfg, schema, i)
	}
	pad := strings.Repeat("x", 3000) // lines longer than a pipe buffer's atomic write
	var wg sync.WaitGroup
	for i, s := range sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer rb.Release()
			for b := 0; b < batches; b++ {
				for r := 0; r < rows; r++ {
					rb.Field(0).(*array.Int64Builder).Append(int64(i))
					rb.Field(1).(*array.Int64Builder).Append(int64(b*rows + r))
					rb.Field(2).(*array.StringBuilder).Append(pad)
				}
				rec := rb.NewRecordBatch()
				if err := s.Write(context.Background(), rec); err != nil {
					t.Error(err)
				}
				rec.Release()
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	next := make([]int64, subtasks)
	n := 0
	for sc.Scan() {
		var row struct {
			Sub, Seq int64
			Pad      string
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Pad != pad {
			t.Fatalf("line %d is not a whole row: %v", n+1, err)
		}
		if row.Seq != next[row.Sub] {
			t.Fatalf("subtask %d: seq %d, want %d", row.Sub, row.Seq, next[row.Sub])
		}
		next[row.Sub]++
		n++
	}
	if n != subtasks*batches*rows {
		t.Errorf("%d lines, want %d", n, subtasks*batches*rows)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	cases := []struct{ cfg, want string }{
		{`{}`, "path: is required"},
		{`{"path":"x","format":"csv"}`, `format: must be "jsonl" (got "csv")`},
		{`{"path":"x","fsync":"yes"}`, `fsync: must be true or false (got string "yes")`},
		{`{"path":"x","mode":1}`, "mode: unknown field (known fields: path, format, keep_meta, fsync)"},
	}
	for _, c := range cases {
		_, err := buildOutput(t, c.cfg, nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	if _, err := buildOutput(t, `{"path":"x"}`, bad); err == nil || !strings.Contains(err.Error(), `column "l"`) {
		t.Errorf("unencodable schema: %v", err)
	}
}

func TestFactoriesDoNoIO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	out, err := buildOutput(t, fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "x.jsonl")), nil)
	if err != nil {
		t.Fatal(err)
	}
	snk, err := out.NewSink(connectors.TaskInfo{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := mustInput(t, cfgJSON(filepath.Join(dir, "in.jsonl"), ""))
	src, err := in.NewSource(connectors.TaskInfo{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("factory created %s: %v", dir, err)
	}
	cfg := SinkConfig{Path: "out.jsonl"}
	raw, _ := json.Marshal(cfg)
	if cfg.OutputType() != "file" || string(raw) != `{"path":"out.jsonl"}` {
		t.Errorf("SinkConfig: %s %s", cfg.OutputType(), raw)
	}
}

// A crash in the middle of a write leaves a line without its newline; the
// next run cuts it off (its rows are delivered again) so new lines do not
// glue onto the fragment.
func TestSinkCutsTornLine(t *testing.T) {
	for _, tc := range []struct{ name, before, after string }{
		{"torn", "{\"a\":1}\n{\"a\":2}\n{\"a\":", "{\"a\":1}\n{\"a\":2}\n"},
		{"whole", "{\"a\":1}\n", "{\"a\":1}\n"},
		{"only fragment", "{\"a\"", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
			openSink(t, `{"path": "`+path+`"}`, schema, 0)
			got, _ := os.ReadFile(path)
			if string(got) != tc.after {
				t.Fatalf("after Connect: %q, want %q", got, tc.after)
			}
		})
	}
}
