package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// writeText writes a file named name in a test directory.
func writeText(t testing.TB, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func arkCfg(format, path, extra string) string {
	c := fmt.Sprintf(`{"input_type": {"type": %q, "path": %q}`, format, path)
	if extra != "" {
		c += ", " + extra
	}
	return c + "}"
}

// rowsRead is what a source gave: each row as "v1|v2|...", null as
// "null", the rows of every batch, and every row's __meta_offset.
type rowsRead struct {
	rows    []string
	sizes   []int
	offsets []int64
	acks    []func(error)
}

func readRows(t testing.TB, s *Source) rowsRead {
	t.Helper()
	var out rowsRead
	for {
		b, err := s.Read(context.Background())
		if errors.Is(err, connectors.ErrEndOfInput) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := b.Record
		if !rec.Schema().Equal(s.in.Schema()) {
			t.Fatalf("batch schema %s, input schema %s", rec.Schema(), s.in.Schema())
		}
		n := int(rec.NumCols())
		off := rec.Column(n - 1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			vals := make([]string, n-3)
			for c := range n - 3 {
				col := rec.Column(c)
				if col.IsNull(i) {
					vals[c] = "null"
				} else {
					vals[c] = col.ValueStr(i)
				}
			}
			if src := rec.Column(n - 3).(*array.String).Value(i); src != "src" {
				t.Fatalf("__meta_source %q", src)
			}
			if p := rec.Column(n - 2).(*array.Int32).Value(i); p != 0 || b.Partition != 0 {
				t.Fatalf("partition %d, batch partition %d", p, b.Partition)
			}
			out.rows = append(out.rows, strings.Join(vals, "|"))
			out.offsets = append(out.offsets, off.Value(i))
		}
		out.sizes = append(out.sizes, int(rec.NumRows()))
		out.acks = append(out.acks, b.Ack)
		rec.Release()
	}
}

// columns renders the data columns of a schema as "name:type ...".
func columns(s *arrow.Schema) string {
	var parts []string
	for _, f := range s.Fields() {
		if !connectors.IsMeta(f.Name) {
			parts = append(parts, f.Name+":"+f.Type.String())
		}
	}
	return strings.Join(parts, " ")
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestArkFlowCSV(t *testing.T) {
	path := writeText(t, "in.csv", "id,name,price,ok,empty,mixed\n"+
		"1,apple,1.5,true,,1\n"+
		"2,\"b,c\",2,false,,x\n"+
		"-3,,1e3,TRUE,,2.5\n")
	in := mustInput(t, arkCfg("csv", path, `"batch_size": 2`))
	if got, want := columns(in.Schema()), "id:int64 name:utf8 price:float64 ok:bool empty:utf8 mixed:utf8"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	got := readRows(t, open(t, in, 0, 1, nil))
	want := []string{"1|apple|1.5|true|null|1", "2|b,c|2|false|null|x", "-3|null|1000|true|null|2.5"}
	if fmt.Sprint(got.rows) != fmt.Sprint(want) || fmt.Sprint(got.sizes) != "[2 1]" || fmt.Sprint(got.offsets) != "[0 1 2]" {
		t.Errorf("got %q sizes %v offsets %v\nwant %q sizes [2 1] offsets [0 1 2]", got.rows, got.sizes, got.offsets, want)
	}
}

func TestArkFlowCSVHeaderOnlyAndBOM(t *testing.T) {
	path := writeText(t, "in.csv", "\ufeffa,b\r\n")
	in := mustInput(t, arkCfg("csv", path, ""))
	if got := columns(in.Schema()); got != "a:utf8 b:utf8" {
		t.Fatalf("columns %s", got)
	}
	if got := readRows(t, open(t, in, 0, 1, nil)); len(got.rows) != 0 {
		t.Errorf("rows %q", got.rows)
	}
}

func TestArkFlowJSON(t *testing.T) {
	path := writeText(t, "in.json", `{"id":1,"name":"a","score":1,"ok":true}`+"\n"+
		`{"id":2,"score":2.5}`+"\n"+
		"\n"+
		`{"id":3,"name":null,"ok":false}`+"\n")
	in := mustInput(t, arkCfg("json", path, `"batch_size": 2`))
	if got, want := columns(in.Schema()), "id:int64 name:utf8 score:float64 ok:bool"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	got := readRows(t, open(t, in, 0, 1, nil))
	want := []string{"1|a|1|true", "2|null|2.5|null", "3|null|null|false"}
	if fmt.Sprint(got.rows) != fmt.Sprint(want) || fmt.Sprint(got.sizes) != "[2 1]" || fmt.Sprint(got.offsets) != "[0 1 2]" {
		t.Errorf("got %q sizes %v offsets %v\nwant %q sizes [2 1] offsets [0 1 2]", got.rows, got.sizes, got.offsets, want)
	}
}

// writeParquet writes rows id 0..n-1, name "n<id>" and v = id/2 (null for
// every third row), in row groups of group rows.
func writeParquet(t testing.TB, n, group int) string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		if i%3 == 2 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(group))), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return writeText(t, "in.parquet", buf.String())
}

// idRows are the rows of writeParquet and writeArrow from..to-1.
func idRows(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		v := "null"
		if i%3 != 2 {
			v = fmt.Sprint(float64(i) / 2)
		}
		out = append(out, fmt.Sprintf("%d|n%d|%s", i, i, v))
	}
	return out
}

func TestArkFlowParquet(t *testing.T) {
	path := writeParquet(t, 10, 4)
	in := mustInput(t, arkCfg("parquet", path, `"batch_size": 3`))
	if got, want := columns(in.Schema()), "id:int64 name:utf8 v:float64"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	s := open(t, in, 0, 1, nil)
	got := readRows(t, s)
	if fmt.Sprint(got.rows) != fmt.Sprint(idRows(0, 10)) || fmt.Sprint(got.sizes) != "[3 3 3 1]" || fmt.Sprint(got.offsets) != fmt.Sprint(seq(0, 10)) {
		t.Errorf("got %q sizes %v offsets %v", got.rows, got.sizes, got.offsets)
	}
	if p := s.Progress(); p != (connectors.Progress{Position: 10, End: 10, Unit: "rows"}) {
		t.Errorf("progress %+v", p)
	}
	// Seeking to a row inside the second row group keeps the batch
	// boundaries at multiples of batch_size.
	got = readRows(t, open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 5}}))
	if fmt.Sprint(got.rows) != fmt.Sprint(idRows(5, 10)) || fmt.Sprint(got.sizes) != "[1 3 1]" || fmt.Sprint(got.offsets) != fmt.Sprint(seq(5, 10)) {
		t.Errorf("after seek: got %q sizes %v offsets %v", got.rows, got.sizes, got.offsets)
	}
	got = readRows(t, open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 10}}))
	if len(got.rows) != 0 {
		t.Errorf("seek to the end: rows %q", got.rows)
	}
}

// writeArrow writes the rows of writeParquet in record batches of group
// rows, in the IPC file format or else the stream format.
func writeArrow(t testing.TB, n, group int, fileFormat bool) string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	var buf bytes.Buffer
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if fileFormat {
		fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	} else {
		w = ipc.NewWriter(&buf, ipc.WithSchema(schema))
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		if i%3 == 2 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
		}
		if (i+1)%group == 0 || i == n-1 {
			rec := b.NewRecordBatch()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return writeText(t, "in.arrow", buf.String())
}

func TestArkFlowArrow(t *testing.T) {
	for _, fileFormat := range []bool{true, false} {
		t.Run(fmt.Sprintf("file format %v", fileFormat), func(t *testing.T) {
			path := writeArrow(t, 12, 4, fileFormat)
			in := mustInput(t, arkCfg("arrow", path, `"batch_size": 5`))
			if got, want := columns(in.Schema()), "id:int64 name:utf8 v:float64"; got != want {
				t.Fatalf("columns %s, want %s", got, want)
			}
			got := readRows(t, open(t, in, 0, 1, nil))
			if fmt.Sprint(got.rows) != fmt.Sprint(idRows(0, 12)) || fmt.Sprint(got.sizes) != "[5 5 2]" {
				t.Errorf("got %q sizes %v", got.rows, got.sizes)
			}
			got = readRows(t, open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 7}}))
			if fmt.Sprint(got.rows) != fmt.Sprint(idRows(7, 12)) || fmt.Sprint(got.sizes) != "[3 2]" || fmt.Sprint(got.offsets) != fmt.Sprint(seq(7, 12)) {
				t.Errorf("after seek: got %q sizes %v offsets %v", got.rows, got.sizes, got.offsets)
			}
		})
	}
}

// TestArkFlowResume acknowledges the first batch, then resumes a new
// source from the positions: it reads the rows after that batch.
func TestArkFlowResume(t *testing.T) {
	var csvText, jsonText strings.Builder
	csvText.WriteString("n,s\n")
	for i := range 7 {
		fmt.Fprintf(&csvText, "%d,s%d\n", i, i)
		fmt.Fprintf(&jsonText, "{\"n\":%d,\"s\":\"s%d\"}\n", i, i)
	}
	for _, c := range []struct{ format, text string }{{"csv", csvText.String()}, {"json", jsonText.String()}} {
		t.Run(c.format, func(t *testing.T) {
			in := mustInput(t, arkCfg(c.format, writeText(t, "in."+c.format, c.text), `"batch_size": 3`))
			s := open(t, in, 0, 1, nil)
			b, err := s.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b.Ack(nil)
			b.Record.Release()
			pos := s.Positions()
			if fmt.Sprint(pos) != fmt.Sprint([]connectors.Position{{Partition: 0, Offset: 3}}) {
				t.Fatalf("positions %v", pos)
			}
			got := readRows(t, open(t, in, 0, 1, pos))
			want := []string{"3|s3", "4|s4", "5|s5", "6|s6"}
			if fmt.Sprint(got.rows) != fmt.Sprint(want) || fmt.Sprint(got.sizes) != "[3 1]" || fmt.Sprint(got.offsets) != "[3 4 5 6]" {
				t.Errorf("got %q sizes %v offsets %v", got.rows, got.sizes, got.offsets)
			}
			for _, ack := range got.acks {
				ack(nil)
			}
		})
	}
}

// TestArkFlowPartitions deals row i to partition i mod 3 and cuts each
// partition's rows into batches of 2; a seek per partition resumes each.
func TestArkFlowPartitions(t *testing.T) {
	for _, format := range []string{"parquet", "csv"} {
		t.Run(format, func(t *testing.T) {
			path := writeParquet(t, 10, 4)
			if format == "csv" {
				var b strings.Builder
				b.WriteString("id,name,v\n")
				for i := range 10 {
					v := ""
					if i%3 != 2 {
						v = fmt.Sprint(float64(i) / 2)
					}
					fmt.Fprintf(&b, "%d,n%d,%s\n", i, i, v)
				}
				path = writeText(t, "in.csv", b.String())
			}
			in := mustInput(t, arkCfg(format, path, `"partitions": 3, "batch_size": 2`))
			got := readAll(t, open(t, in, 0, 1, nil))
			if s, want := summary(got), "p0[0 3] p1[1 4] p2[2 5] p0[6 9] p1[7] p2[8]"; s != want {
				t.Errorf("got  %s\nwant %s", s, want)
			}
			for _, b := range got {
				if fmt.Sprint(b.IDs) != fmt.Sprint(b.Offsets) {
					t.Errorf("partition %d: ids %v at offsets %v", b.Part, b.IDs, b.Offsets)
				}
			}
			seek := []connectors.Position{{Partition: 0, Offset: 6}, {Partition: 2, Offset: 8}}
			if s, want := summary(readAll(t, open(t, in, 0, 1, seek))), "p1[1 4] p0[6 9] p1[7] p2[8]"; s != want {
				t.Errorf("after seek: got  %s\nwant %s", s, want)
			}
			if s, want := summary(readAll(t, open(t, in, 1, 2, nil))), "p1[1 4] p1[7]"; s != want {
				t.Errorf("subtask 1 of 2: got  %s\nwant %s", s, want)
			}
		})
	}
}

// TestArkFlowSeekPastTheEnd reads nothing, and closes cleanly.
func TestArkFlowSeekPastTheEnd(t *testing.T) {
	files := map[string]string{
		"csv":     writeText(t, "in.csv", "a\n1\n2\n"),
		"json":    writeText(t, "in.json", "{\"a\":1}\n{\"a\":2}\n"),
		"parquet": writeParquet(t, 2, 4),
		"arrow":   writeArrow(t, 2, 4, true),
	}
	for format, path := range files {
		in := mustInput(t, arkCfg(format, path, ""))
		s := open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 5}})
		if got := readRows(t, s); len(got.rows) != 0 {
			t.Errorf("%s: rows %q", format, got.rows)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("%s: Close: %v", format, err)
		}
	}
}

func TestArkFlowSecondSubtaskReadsNothing(t *testing.T) {
	in := mustInput(t, arkCfg("csv", writeText(t, "in.csv", "a\n1\n"), ""))
	if got := readRows(t, open(t, in, 1, 2, nil)); len(got.rows) != 0 {
		t.Errorf("subtask 1 read %q", got.rows)
	}
	if got := readRows(t, open(t, in, 0, 2, nil)); fmt.Sprint(got.rows) != "[1]" {
		t.Errorf("subtask 0 read %q", got.rows)
	}
}

func TestArkFlowConfigErrors(t *testing.T) {
	cases := []struct{ cfg, want string }{
		{`{"input_type": {"type": "xml", "path": "x"}}`, `input_type.type: must be csv, json, parquet, arrow or avro (got "xml")`},
		{`{"input_type": {"type": "csv"}}`, `input_type.path: is required`},
		{`{"input_type": {"path": "x"}}`, `input_type.type: is required: csv, json, parquet, arrow or avro`},
		{`{"path": "x", "input_type": {"type": "csv", "path": "y"}}`, `path: give either path (JSON lines with a schema) or input_type (ArkFlow's form), not both`},
		{`{"input_type": {"type": "csv", "path": "y"}, "format": "jsonl", "schema": [{"name": "a", "type": "int64"}]}`,
			"format: is for path; with input_type, give the format as input_type.type\nschema: is for path; with input_type the columns come from the file"},
		{`{"input_type": {"type": "avro", "path": "x.avro"}}`, `input_type.type: avro files are not readable here: convert the file to parquet or arrow`},
		{`{"input_type": {"type": "csv", "path": "x", "store": {"type": "s3", "bucket": "b"}}}`, `input_type.store: object stores are not available here: copy the file to a local path`},
		{`{"input_type": {"type": "csv", "path": "x"}, "query": {"query": "SELECT 1", "table": "flow"}}`, `query: SQL over the file is not available here: put a sql processor after the input`},
		{`{"input_type": {"type": "csv", "path": "x"}, "partitions": 0}`, `partitions: must be >= 1 (got 0)`},
		{`{"input_type": {"type": "csv", "path": "x", "bogus": 1}}`, `input_type.bogus: unknown field (known fields: type, path, store)`},
	}
	for _, c := range cases {
		_, err := buildInput(t, c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

// TestArkFlowMissingFile: building the input creates nothing and opens
// nothing; the schema read then fails with an error naming
// input_type.path and the file, as does NewSource.
func TestArkFlowMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.csv")
	in := mustInput(t, arkCfg("csv", path, "")).(*Input)
	err := in.SchemaErr()
	if err == nil || !strings.HasPrefix(err.Error(), "input_type.path: ") || !strings.Contains(err.Error(), path) {
		t.Fatalf("SchemaErr: %v", err)
	}
	if got := columns(in.Schema()); got != "" {
		t.Errorf("columns %q", got)
	}
	if _, err := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("NewSource: %v", err)
	}
	// A file removed after its columns were read fails Connect, and Read
	// after that fails too.
	path = writeText(t, "in.csv", "a\n1\n")
	in = mustInput(t, arkCfg("csv", path, "")).(*Input)
	src, err := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	os.Remove(path)
	if err := src.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Connect: %v", err)
	}
	if _, err := src.Read(context.Background()); err == nil {
		t.Error("Read after a failed Connect succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the directory has %d entries", len(entries))
	}
}

// readErr returns the first error of reading an input: of its schema, of
// Connect or of Read.
func readErr(t *testing.T, cfg string) error {
	t.Helper()
	in := mustInput(t, cfg).(*Input)
	if err := in.SchemaErr(); err != nil {
		return err
	}
	src, err := in.newSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		return err
	}
	defer src.Close(context.Background())
	if err := src.Connect(context.Background()); err != nil {
		return err
	}
	for {
		b, err := src.Read(context.Background())
		if err != nil {
			if errors.Is(err, connectors.ErrEndOfInput) {
				return nil
			}
			return err
		}
		b.Record.Release()
	}
}

func TestArkFlowBadFiles(t *testing.T) {
	parquetFile, _ := os.ReadFile(writeParquet(t, 100, 30))
	arrowFile, _ := os.ReadFile(writeArrow(t, 100, 30, true))
	arrowStream, _ := os.ReadFile(writeArrow(t, 100, 30, false))
	var late strings.Builder
	late.WriteString("n\n")
	var lateJSON, lateKey, lateFloat strings.Builder
	for i := range InferRows {
		fmt.Fprintf(&late, "%d\n", i)
		fmt.Fprintf(&lateJSON, "{\"n\":%d}\n", i)
	}
	lateKey.WriteString(lateJSON.String() + `{"n":1,"m":2}` + "\n")
	lateFloat.WriteString(lateJSON.String() + `{"n":1.5}` + "\n")
	cases := []struct{ name, format, text, want string }{
		{"truncated parquet", "parquet", string(parquetFile[:len(parquetFile)/2]), "not a readable parquet file"},
		{"parquet without footer", "parquet", string(parquetFile[:len(parquetFile)-4]), "not a readable parquet file"},
		{"garbage parquet", "parquet", "not parquet at all", "not a readable parquet file"},
		{"empty parquet", "parquet", "", "not a readable parquet file"},
		{"truncated arrow file", "arrow", string(arrowFile[:len(arrowFile)/2]), "not a readable arrow file"},
		{"truncated arrow stream", "arrow", string(arrowStream[:len(arrowStream)/2]), "EOF"},
		{"garbage arrow", "arrow", "not arrow at all", "not a readable arrow file"},
		{"empty csv", "csv", "", "empty: a csv file starts with a header row"},
		{"csv bad quote", "csv", "a,b\n1,\"x\n", `extraneous or missing " in quoted-field`},
		{"csv wrong field count", "csv", "a,b\n1,2\n3\n", "record on line 3: wrong number of fields"},
		{"csv repeated header", "csv", "a,a\n1,2\n", `header column 2 is empty or repeated ("a")`},
		{"csv meta column", "csv", "__meta_offset\n1\n", `column "__meta_offset": names starting with __meta_ are reserved`},
		{"csv late text in an int column", "csv", late.String() + "x\n", fmt.Sprintf(`line %d: column "n": "x" does not fit type int64, inferred from the first 1000 rows`, InferRows+2)},
		{"json bad line", "json", "{\"a\":1}\n{bad\n", "line 2: "},
		{"json not an object", "json", "{\"a\":1}\n\n[1]\n", "line 3: expected a JSON object"},
		{"json conflicting types", "json", "{\"a\":1}\n\n{\"a\":\"x\"}\n", `line 3: field "a": found a string, incompatible with the number seen before`},
		{"json late key", "json", lateKey.String(), fmt.Sprintf(`line %d: key "m" is not a column of the first 1000 lines`, InferRows+1)},
		{"json late float", "json", lateFloat.String(), fmt.Sprintf(`line %d: key "n": float64 here, but int64 in the first 1000 lines`, InferRows+1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeText(t, "bad."+c.format, c.text)
			err := readErr(t, arkCfg(c.format, path, `"batch_size": 7`))
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("file %q", path)) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant an error naming the file and containing %q", err, c.want)
			}
		})
	}
}

// TestArkFlowCorruptBytes overwrites bytes inside a parquet file, and
// truncates arrow files (IPC file and stream format) at many lengths:
// reading them may fail or, for overwritten data, give other values, but
// must not panic, and an error names the file.
func TestArkFlowCorruptBytes(t *testing.T) {
	dir := t.TempDir()
	check := func(format string, data []byte, what string) {
		path := filepath.Join(dir, "bad."+format)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := readErr(t, arkCfg(format, path, `"batch_size": 16`))
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("file %q", path)) {
			t.Fatalf("%s %s: %v", format, what, err)
		}
	}
	pq, _ := os.ReadFile(writeParquet(t, 100, 30))
	for at := 0; at < len(pq)-4; at += 5 {
		bad := bytes.Clone(pq)
		for i := at; i < at+4; i++ {
			bad[i] ^= 0xa5
		}
		check("parquet", bad, fmt.Sprintf("corrupt at %d", at))
	}
	for _, fileFormat := range []bool{true, false} {
		data, _ := os.ReadFile(writeArrow(t, 40, 16, fileFormat))
		for n := 0; n < len(data); n += 3 {
			check("arrow", data[:n], fmt.Sprintf("file format %v truncated to %d bytes", fileFormat, n))
		}
	}
}
