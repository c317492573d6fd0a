package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// buildInput builds an input through the registry, as a spec would.
func buildInput(t testing.TB, cfg string) (connectors.Input, error) {
	t.Helper()
	f, ok := connectors.LookupInput("file")
	if !ok {
		t.Fatal("file input not registered")
	}
	return f(connectors.BuildContext{JobID: "job", OperatorID: "src", Config: json.RawMessage(cfg)})
}

func mustInput(t testing.TB, cfg string) connectors.Input {
	t.Helper()
	in, err := buildInput(t, cfg)
	if err != nil {
		t.Fatalf("config %s: %v", cfg, err)
	}
	return in
}

func writeFile(t testing.TB, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func idLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"id": %d}`, i)
	}
	return lines
}

func cfgJSON(path string, extra string) string {
	c := fmt.Sprintf(`{"path": %q, "schema": [{"name": "id", "type": "int64"}]`, path)
	if extra != "" {
		c += ", " + extra
	}
	return c + "}"
}

type gotBatch struct {
	Part    int
	IDs     []int64
	Offsets []int64
	Ack     func(error)
}

func (b gotBatch) String() string { return fmt.Sprintf("p%d%v", b.Part, b.Offsets) }

func open(t testing.TB, in connectors.Input, subtask, par int, seek []connectors.Position) *Source {
	t.Helper()
	src, err := in.NewSource(connectors.TaskInfo{JobID: "job", OperatorID: "src", Subtask: subtask, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*Source)
	if seek != nil {
		if err := s.Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// readAll reads every batch, checking the meta columns.
func readAll(t testing.TB, s *Source) []gotBatch {
	t.Helper()
	var out []gotBatch
	for {
		b, err := s.Read(context.Background())
		if errors.Is(err, connectors.ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := b.Record
		n := rec.NumCols()
		src := rec.Column(int(n - 3)).(*array.String)
		part := rec.Column(int(n - 2)).(*array.Int32)
		off := rec.Column(int(n - 1)).(*array.Int64)
		g := gotBatch{Part: b.Partition, Ack: b.Ack}
		for i := 0; i < int(rec.NumRows()); i++ {
			if src.Value(i) != "src" || int(part.Value(i)) != b.Partition {
				t.Fatalf("row %d: meta source %q partition %d, batch partition %d", i, src.Value(i), part.Value(i), b.Partition)
			}
			g.Offsets = append(g.Offsets, off.Value(i))
			if id, ok := rec.Column(0).(*array.Int64); ok && rec.Schema().Field(0).Name == "id" {
				g.IDs = append(g.IDs, id.Value(i))
			}
		}
		if !rec.Schema().Equal(s.in.Schema()) {
			t.Fatalf("batch schema %s, input schema %s", rec.Schema(), s.in.Schema())
		}
		rec.Release()
		out = append(out, g)
	}
}

func summary(bs []gotBatch) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b.String()
	}
	return strings.Join(parts, " ")
}

func TestPartitionsAndBatchBoundaries(t *testing.T) {
	path := writeFile(t, idLines(10)...)
	in := mustInput(t, cfgJSON(path, `"partitions": 3, "batch_size": 2`))
	if in.Partitions() != 3 {
		t.Fatalf("Partitions() = %d", in.Partitions())
	}
	got := summary(readAll(t, open(t, in, 0, 1, nil)))
	want := "p0[0 3] p1[1 4] p2[2 5] p0[6 9] p1[7] p2[8]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestBlankLinesCountButCarryNoRow(t *testing.T) {
	lines := idLines(10)
	lines[4] = ""
	lines[5] = "  \r"
	path := writeFile(t, lines...)
	in := mustInput(t, cfgJSON(path, `"partitions": 3, "batch_size": 2`))
	bs := readAll(t, open(t, in, 0, 1, nil))
	got := summary(bs)
	want := "p0[0 3] p1[1 7] p2[2 8] p0[6 9]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !reflect.DeepEqual(bs[0].IDs, []int64{0, 3}) {
		t.Errorf("ids %v", bs[0].IDs)
	}
}

func TestNoTrailingNewlineAndCRLF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(p, []byte("{\"id\":1}\r\n\r\n{\"id\":2}"), 0o644)
	bs := readAll(t, open(t, mustInput(t, cfgJSON(p, "")), 0, 1, nil))
	if got := summary(bs); got != "p0[0 2]" || !reflect.DeepEqual(bs[0].IDs, []int64{1, 2}) {
		t.Errorf("got %s %v", got, bs[0].IDs)
	}
}

func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 600<<10)
	path := writeFile(t, `{"id":1,"pad":"`+long+`"}`, `{"id":2}`, `{"pad":"`+long+`","id":3}`)
	bs := readAll(t, open(t, mustInput(t, cfgJSON(path, "")), 0, 1, nil))
	if len(bs) != 1 || !reflect.DeepEqual(bs[0].IDs, []int64{1, 2, 3}) {
		t.Errorf("got %v", bs)
	}
}

func TestSubtaskAssignment(t *testing.T) {
	path := writeFile(t, idLines(10)...)
	in := mustInput(t, cfgJSON(path, `"partitions": 3, "batch_size": 2`))
	if got, want := summary(readAll(t, open(t, in, 0, 2, nil))), "p0[0 3] p2[2 5] p0[6 9] p2[8]"; got != want {
		t.Errorf("subtask 0: got %s, want %s", got, want)
	}
	if got, want := summary(readAll(t, open(t, in, 1, 2, nil))), "p1[1 4] p1[7]"; got != want {
		t.Errorf("subtask 1: got %s, want %s", got, want)
	}
	// More subtasks than partitions: the extra one ends at once.
	s := open(t, in, 3, 4, nil)
	if _, err := s.Read(context.Background()); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Errorf("subtask 3 of 4: %v", err)
	}
	if len(s.Positions()) != 0 {
		t.Errorf("positions of an idle subtask: %v", s.Positions())
	}
}

func TestBadLineErrorNamesFileLineField(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	lines := []string{
		`{"id":1,"amount":1.5}`, `{"id":2,"amount":2}`, ``, `{"id":3,"amount":null}`,
		`{"id":4,"amount":4}`, `{"id":5,"amount":5}`, `{"id":6,"amount":"x"}`, `{"id":7,"amount":7}`,
	}
	os.WriteFile("in.jsonl", []byte(strings.Join(lines, "\n")), 0o644)
	in := mustInput(t, `{"path":"in.jsonl","schema":[{"name":"id","type":"int64","nullable":false},{"name":"amount","type":"float64"}],"batch_size":2}`)
	s := open(t, in, 0, 1, nil)
	var err error
	rows := 0
	for {
		var b connectors.Batch
		b, err = s.Read(context.Background())
		if err != nil {
			break
		}
		rows += int(b.Record.NumRows())
		b.Record.Release()
	}
	want := `file "in.jsonl" line 7: field "amount": must be a number (got string "x")`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if rows != 4 {
		t.Errorf("rows before the error: %d, want 4", rows)
	}
	// The error sticks.
	if _, err2 := s.Read(context.Background()); err2 == nil || err2.Error() != want {
		t.Errorf("second Read: %v", err2)
	}
}

func TestMissingNonNullableField(t *testing.T) {
	path := writeFile(t, `{"id":1,"name":"a"}`, `{"name":"b"}`)
	in := mustInput(t, fmt.Sprintf(`{"path":%q,"schema":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"string"}]}`, path))
	s := open(t, in, 0, 1, nil)
	_, err := s.Read(context.Background())
	want := fmt.Sprintf(`file %q line 2: field "id": is missing (the field is not nullable)`, path)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	// A missing nullable field is null.
	path2 := writeFile(t, `{"id":1}`)
	in2 := mustInput(t, fmt.Sprintf(`{"path":%q,"schema":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"string"}]}`, path2))
	b, err := open(t, in2, 0, 1, nil).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Record.Release()
	if !b.Record.Column(1).IsNull(0) {
		t.Error("missing nullable field is not null")
	}
}

func TestTimestamps(t *testing.T) {
	path := writeFile(t,
		`{"s":"2024-01-02T03:04:05Z","ms":"2024-01-02T03:04:05.123Z","us":"2024-01-02T03:04:05.123456Z","ns":"2024-01-02T03:04:05.123456789Z","d":"2024-01-02T03:04:05.123Z"}`,
		`{"s":1704164645,"ms":1704164645123,"us":1704164645123456,"ns":1704164645123456789,"d":1704164645123}`,
		`{"s":"1969-12-31T23:59:59Z","ms":"1969-12-31T23:59:59.999Z","us":-1,"ns":"1969-12-31T23:59:59.999999999Z","d":"2024-01-02T04:04:05.123+01:00"}`,
	)
	in := mustInput(t, fmt.Sprintf(`{"path":%q,"schema":[
		{"name":"s","type":"timestamp","unit":"s"},{"name":"ms","type":"timestamp","unit":"ms"},
		{"name":"us","type":"timestamp","unit":"us"},{"name":"ns","type":"timestamp","unit":"ns"},
		{"name":"d","type":"timestamp"}]}`, path))
	b, err := open(t, in, 0, 1, nil).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Record.Release()
	want := [][]int64{
		{1704164645, 1704164645, -1},
		{1704164645123, 1704164645123, -1},
		{1704164645123456, 1704164645123456, -1},
		{1704164645123456789, 1704164645123456789, -1},
		{1704164645123, 1704164645123, 1704164645123},
	}
	for c, w := range want {
		col := b.Record.Column(c).(*array.Timestamp)
		for r, v := range w {
			if int64(col.Value(r)) != v {
				t.Errorf("column %d row %d: got %d, want %d", c, r, col.Value(r), v)
			}
		}
	}
}

func TestSeekSkipsLines(t *testing.T) {
	path := writeFile(t, idLines(10)...)
	in := mustInput(t, cfgJSON(path, `"partitions": 3, "batch_size": 2`))
	s := open(t, in, 0, 1, []connectors.Position{
		{Partition: 0, Offset: 4}, // skips lines 0, 3
		{Partition: 1, Offset: 5}, // skips 1, 4; batch boundaries stay aligned
		{Partition: 7, Offset: 1}, // not ours: ignored
	})
	got := summary(readAll(t, s))
	want := "p2[2 5] p0[6 9] p1[7] p2[8]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Seek moved the frontier before anything was acknowledged.
	s2 := open(t, in, 0, 1, []connectors.Position{{Partition: 1, Offset: 2}})
	if got := s2.Positions(); !reflect.DeepEqual(got, []connectors.Position{{Partition: 0}, {Partition: 1, Offset: 2}, {Partition: 2}}) {
		t.Errorf("positions after seek: %v", got)
	}
	// Odd alignment: skipping one row of a partition makes the first batch
	// one row short, as in the original run.
	s3 := open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 1}})
	if got, want := summary(readAll(t, s3)), "p0[3] p1[1 4] p2[2 5] p0[6 9] p1[7] p2[8]"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if err := s3.Seek(nil); err == nil {
		t.Error("Seek after Connect succeeded")
	}
}

func TestPositionsAfterOutOfOrderAcks(t *testing.T) {
	path := writeFile(t, idLines(10)...)
	in := mustInput(t, cfgJSON(path, `"partitions": 2, "batch_size": 2`))
	s := open(t, in, 0, 1, nil)
	bs := readAll(t, s)
	// p0: [0 2] [4 6] [8]; p1: [1 3] [5 7] [9]
	if got, want := summary(bs), "p0[0 2] p1[1 3] p0[4 6] p1[5 7] p0[8] p1[9]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	pos := func() []connectors.Position { return s.Positions() }
	want := func(o0, o1 int64) []connectors.Position {
		return []connectors.Position{{Partition: 0, Offset: o0}, {Partition: 1, Offset: o1}}
	}
	// p1's first range starts at line 1: the frontier joins it.
	if got := pos(); !reflect.DeepEqual(got, want(0, 1)) {
		t.Fatalf("before acks: %v", got)
	}
	bs[2].Ack(nil) // p0 [4 6] before [0 2]: frontier stays
	bs[4].Ack(nil) // p0 [8]
	if got := pos(); !reflect.DeepEqual(got, want(0, 1)) {
		t.Errorf("after later acks: %v", got)
	}
	bs[1].Ack(errors.New("sink failed")) // p1 [1 3] failed: p1 stays at 1 for good
	bs[3].Ack(nil)
	bs[0].Ack(nil) // p0 [0 2]: frontier jumps over everything acknowledged
	if got := pos(); !reflect.DeepEqual(got, want(9, 1)) {
		t.Errorf("after all p0 acks: %v", got)
	}
	bs[5].Ack(nil)
	if got := pos(); !reflect.DeepEqual(got, want(9, 1)) {
		t.Errorf("failed ack passed: %v", got)
	}
}

func TestRateLimit(t *testing.T) {
	// 4000 rows/s allow 400 rows per 100 ms: batches of 100 stay whole,
	// batches of 1000 shrink to 400.
	path := writeFile(t, idLines(4000)...)
	in := mustInput(t, cfgJSON(path, `"batch_size": 100, "rate_per_sec": 4000`))
	if bs := readAll(t, open(t, in, 0, 1, nil)); len(bs) != 40 || len(bs[0].Offsets) != 100 {
		t.Fatalf("%d batches: %s", len(bs), summary(bs[:1]))
	}
	in2 := mustInput(t, cfgJSON(path, `"batch_size": 1000, "rate_per_sec": 4000`))
	bs := readAll(t, open(t, in2, 0, 1, nil))
	if len(bs) != 10 {
		t.Fatalf("%d batches", len(bs))
	}
	for i, b := range bs {
		if len(b.Offsets) != 400 || b.Offsets[0] != int64(400*i) {
			t.Fatalf("batch %d has offsets %d.., %d rows", i, b.Offsets[0], len(b.Offsets))
		}
	}
}

// At 2 rows/s the file is read a row at a time, about 6 rows in 3 s
// (plus the bucket's one at the start), not a batch_size batch at once.
func TestRatePerSecIsRowsPerSecond(t *testing.T) {
	const window = 3 * time.Second
	in := mustInput(t, cfgJSON(writeFile(t, idLines(2000)...), `"rate_per_sec": 2`))
	s := open(t, in, 0, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	rows := 0
	for {
		b, err := s.Read(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := b.Record.NumRows(); n != 1 {
			t.Errorf("a batch of %d rows, want 1", n)
		}
		rows += int(b.Record.NumRows())
		b.Record.Release()
	}
	if rows < 3 || rows > 9 {
		t.Errorf("%d rows in %v, want 3..9", rows, window)
	}
}

func TestRateLimitCancellable(t *testing.T) {
	path := writeFile(t, idLines(30)...)
	// 1 row/s: batches of one row, and the bucket holds one.
	in := mustInput(t, cfgJSON(path, `"batch_size": 10, "rate_per_sec": 1`))
	s := open(t, in, 0, 1, nil)
	b, err := s.Read(context.Background()) // the bucket's one token lets the first batch go
	if err != nil {
		t.Fatal(err)
	}
	b.Record.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Read(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancelled Read took %v", d)
	}
	// The batch was not lost: it is still delivered first.
	s.lim = nil
	b, err = s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Record.Release()
	if off := b.Record.Column(3).(*array.Int64).Value(0); off != 1 {
		t.Errorf("next batch starts at %d, want 1", off)
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	in := mustInput(t, cfgJSON(path, ""))
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	err = src.Connect(context.Background())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("file %q", path)) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

func TestSourceConfigErrors(t *testing.T) {
	cases := []struct{ cfg, want string }{
		{`{}`, "path: is required (or give input_type, ArkFlow's form)\nschema: is required"},
		{`{"path":"x","schema":[{"name":"a","type":"int"}]}`, `schema[0].type: must be one of int64, float32, float64, string, bool, timestamp (got "int")`},
		{`{"path":"x","schema":[{"name":"a","type":"int64"},{"name":"b","type":"int"}],"batch_size":0,"partitions":0,"rate_per_sec":-1,"format":"csv"}`,
			"format: must be \"jsonl\" (got \"csv\")\nschema[1].type: must be one of int64, float32, float64, string, bool, timestamp (got \"int\")\npartitions: must be >= 1 (got 0)\nbatch_size: must be > 0 (got 0)\nrate_per_sec: must be a finite number >= 0 (got -1)"},
		{`{"path":"x","schema":[{"name":"a","type":"int64"}],"batch_size":-3}`, "batch_size: must be > 0 (got -3)"},
		{`{"path":"x","schema":[{"name":"a","type":"int64"}],"bogus":1}`, "bogus: unknown field (known fields: path, format, schema, input_type, query, partitions, batch_size, rate_per_sec)"},
		{`{"path":"x","schema":[{"name":"a","type":"int64"}],"batch_size":"big"}`, `batch_size: must be an integer (got string "big")`},
		{`{"path":"x","schema":[]}`, "schema: must declare at least one field"},
	}
	for _, c := range cases {
		_, err := buildInput(t, c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

func TestSourceConfigDefaultsAndGoStruct(t *testing.T) {
	cfg := SourceConfig{Path: "in.jsonl", Schema: connectors.Schema{{Name: "id", Type: "int64"}}}
	if cfg.InputType() != "file" {
		t.Error(cfg.InputType())
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"path":"in.jsonl","schema":[{"name":"id","type":"int64"}]}` {
		t.Errorf("marshalled %s", raw)
	}
	in := mustInput(t, string(raw)).(*Input)
	got := in.Config()
	if got.Partitions != 1 || got.BatchSize != 1024 || got.RatePerSec != 0 || got.Format != "jsonl" {
		t.Errorf("defaults: %+v", got)
	}
	in2, err := NewInput(cfg)
	if err != nil || !in2.Schema().Equal(in.Schema()) {
		t.Errorf("NewInput: %v", err)
	}
	wantSchema := connectors.WithMeta(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil))
	if !in.Schema().Equal(wantSchema) {
		t.Errorf("schema %s", in.Schema())
	}
}

// The file sink's output reads back through the file source.
func TestSinkToSourceRoundTrip(t *testing.T) {
	dir := t.TempDir()
	srcPath := writeFile(t,
		`{"i":1,"f":1.25,"s":"a\nb","b":true,"t":"2024-01-02T03:04:05.123Z"}`,
		`{"i":-2,"f":null,"s":"é","b":false,"t":-1}`,
	)
	schema := `[{"name":"i","type":"int64"},{"name":"f","type":"float64"},{"name":"s","type":"string"},{"name":"b","type":"bool"},{"name":"t","type":"timestamp","unit":"ms"}]`
	in := mustInput(t, fmt.Sprintf(`{"path":%q,"schema":%s}`, srcPath, schema))
	b, err := open(t, in, 0, 1, nil).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Record.Release()
	out := filepath.Join(dir, "out.jsonl")
	sink := openSink(t, fmt.Sprintf(`{"path":%q}`, out), in.Schema(), 0)
	if err := sink.Write(context.Background(), b.Record); err != nil {
		t.Fatal(err)
	}
	in2 := mustInput(t, fmt.Sprintf(`{"path":%q,"schema":%s}`, out, schema))
	b2, err := open(t, in2, 0, 1, nil).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Record.Release()
	if !array.RecordEqual(b.Record, b2.Record) {
		e1, _ := rowjson.AppendRecord(nil, b.Record)
		e2, _ := rowjson.AppendRecord(nil, b2.Record)
		t.Errorf("round trip differs:\n%s\n%s", e1, e2)
	}
}

// Progress counts the bytes of the file read, per batch, of its size;
// every subtask reads the whole file.
func TestProgress(t *testing.T) {
	path := writeFile(t, idLines(100)...)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, mustInput(t, cfgJSON(path, `"partitions": 2, "batch_size": 10`)), 1, 2, nil)
	if got, want := s.Progress(), (connectors.Progress{End: fi.Size(), Unit: "bytes"}); got != want {
		t.Fatalf("after Connect: %+v, want %+v", got, want)
	}
	if _, err := s.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.Progress(); got.Position <= 0 || got.Position >= fi.Size() {
		t.Fatalf("after a batch: %+v, want between 0 and %d", got, fi.Size())
	}
	readAll(t, s)
	if got, want := s.Progress(), (connectors.Progress{Position: fi.Size(), End: fi.Size(), Unit: "bytes"}); got != want {
		t.Fatalf("at the end: %+v, want %+v", got, want)
	}
}
