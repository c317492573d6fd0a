package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

func build(t testing.TB, cfg string) (connectors.Input, error) {
	t.Helper()
	f, ok := connectors.LookupInput("generate")
	if !ok {
		t.Fatal("generate not registered")
	}
	return f(connectors.BuildContext{JobID: "job", OperatorID: "gen", Config: json.RawMessage(cfg)})
}

func mustBuild(t testing.TB, cfg string) connectors.Input {
	t.Helper()
	in, err := build(t, cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg, err)
	}
	return in
}

func open(t testing.TB, in connectors.Input, sub, par int, seek []connectors.Position) *Source {
	t.Helper()
	src, err := in.NewSource(connectors.TaskInfo{JobID: "job", OperatorID: "gen", Subtask: sub, Parallelism: par})
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

type batch struct {
	part  int
	first int64
	rows  []string // JSON lines with meta
	ack   func(error)
}

func (b batch) String() string { return fmt.Sprintf("p%d@%d+%d", b.part, b.first, len(b.rows)) }

// read reads up to max batches (all when max < 0), checking meta columns.
func read(t testing.TB, s *Source, max int) ([]batch, error) {
	t.Helper()
	var out []batch
	for max < 0 || len(out) < max {
		b, err := s.Read(context.Background())
		if err != nil {
			return out, err
		}
		rec := b.Record
		if !rec.Schema().Equal(s.in.Schema()) {
			t.Fatalf("schema %s", rec.Schema())
		}
		n := int(rec.NumCols())
		src := rec.Column(n - 3).(*array.String)
		part := rec.Column(n - 2).(*array.Int32)
		off := rec.Column(n - 1).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if src.Value(i) != "gen" || int(part.Value(i)) != b.Partition || off.Value(i) != off.Value(0)+int64(i) {
				t.Fatalf("bad meta at row %d: %q %d %d", i, src.Value(i), part.Value(i), off.Value(i))
			}
		}
		enc, err := rowjson.AppendRecord(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, batch{part: b.Partition, first: off.Value(0), rows: strings.Split(strings.TrimSuffix(string(enc), "\n"), "\n"), ack: b.Ack})
		rec.Release()
	}
	return out, nil
}

func summary(bs []batch) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = b.String()
	}
	return strings.Join(s, " ")
}

const allFields = `"fields": [
	{"name": "id", "type": "int64", "sequence": true},
	{"name": "n", "type": "int64", "min": -5, "max": 5, "null_rate": 0.2},
	{"name": "f32", "type": "float32", "min": 1, "max": 2},
	{"name": "f64", "type": "float64"},
	{"name": "k", "type": "string", "cardinality": 7},
	{"name": "v", "type": "string", "values": ["a", "b", "c"], "null_rate": 0.5},
	{"name": "b", "type": "bool"},
	{"name": "ts", "type": "timestamp", "start_ms": 1000, "step_ms": 10, "jitter_ms": 3},
	{"name": "ts_s", "type": "timestamp", "unit": "s", "start_ms": -5000, "step_ms": 1},
	{"name": "ts_ns", "type": "timestamp", "unit": "ns"}]`

func TestDeterminism(t *testing.T) {
	cfg := `{"seed": 42, "count": 100, "partitions": 2, "batch_size": 16, ` + allFields + `}`
	a, err := read(t, open(t, mustBuild(t, cfg), 0, 1, nil), -1)
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatal(err)
	}
	b, _ := read(t, open(t, mustBuild(t, cfg), 0, 1, nil), -1)
	if !reflect.DeepEqual(rowsOf(a), rowsOf(b)) || summary(a) != summary(b) {
		t.Fatal("two runs differ")
	}
	// Another seed gives other values.
	c, _ := read(t, open(t, mustBuild(t, strings.Replace(cfg, `"seed": 42`, `"seed": 43`, 1)), 0, 1, nil), -1)
	if reflect.DeepEqual(rowsOf(a), rowsOf(c)) {
		t.Fatal("seed has no effect")
	}
	// Values depend on (seed, partition, offset, field) only: not on the
	// batch size, the number of partitions or the parallelism.
	d, _ := read(t, open(t, mustBuild(t, `{"seed": 42, "count": 100, "partitions": 5, "batch_size": 7, `+allFields+`}`), 1, 3, nil), -1)
	byKey := func(bs []batch) map[string]string {
		m := map[string]string{}
		for _, b := range bs {
			for i, r := range b.rows {
				m[fmt.Sprintf("%d/%d", b.part, b.first+int64(i))] = r[:strings.Index(r, `,"__meta_source"`)]
			}
		}
		return m
	}
	ma, md := byKey(a), byKey(d)
	if len(md) != 200 { // partitions 1 and 4
		t.Fatalf("%d rows", len(md))
	}
	for k, v := range md {
		if k[0] == '1' && ma[k] != v {
			t.Fatalf("row %s: %s vs %s", k, v, ma[k])
		}
	}
}

func rowsOf(bs []batch) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.rows...)
	}
	return out
}

func TestSeekRegeneratesSameRows(t *testing.T) {
	cfg := `{"seed": 9, "count": 50, "partitions": 2, "batch_size": 8, ` + allFields + `}`
	in := mustBuild(t, cfg)
	orig, _ := read(t, open(t, in, 0, 1, nil), -1)
	resumed, err := read(t, open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 13}, {Partition: 1, Offset: 40}}), -1)
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatal(err)
	}
	// Batches stay aligned to multiples of batch_size.
	if got, want := summary(resumed), "p0@13+3 p1@40+8 p0@16+8 p1@48+2 p0@24+8 p0@32+8 p0@40+8 p0@48+2"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	want := map[string]bool{}
	for _, b := range orig {
		for i, r := range b.rows {
			if (b.part == 0 && b.first+int64(i) >= 13) || (b.part == 1 && b.first+int64(i) >= 40) {
				want[r] = true
			}
		}
	}
	got := rowsOf(resumed)
	if len(got) != len(want) {
		t.Fatalf("%d rows after seek, want %d", len(got), len(want))
	}
	for _, r := range got {
		if !want[r] {
			t.Fatalf("row not in the original run: %s", r)
		}
	}
	// Seeking past the end of a bounded partition finishes it.
	s := open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: 50}, {Partition: 1, Offset: 99}})
	if _, err := s.Read(context.Background()); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Errorf("got %v", err)
	}
}

func TestBoundedPartitionsAndSubtasks(t *testing.T) {
	in := mustBuild(t, `{"count": 10, "partitions": 3, "batch_size": 4, "fields": [{"name": "x", "type": "int64"}]}`)
	if in.Partitions() != 3 {
		t.Fatal(in.Partitions())
	}
	cases := []struct {
		sub, par int
		want     string
	}{
		{0, 1, "p0@0+4 p1@0+4 p2@0+4 p0@4+4 p1@4+4 p2@4+4 p0@8+2 p1@8+2 p2@8+2"},
		{0, 2, "p0@0+4 p2@0+4 p0@4+4 p2@4+4 p0@8+2 p2@8+2"},
		{1, 2, "p1@0+4 p1@4+4 p1@8+2"},
		{3, 4, ""},
	}
	for _, c := range cases {
		s := open(t, in, c.sub, c.par, nil)
		bs, err := read(t, s, -1)
		if !errors.Is(err, connectors.ErrEndOfInput) {
			t.Fatalf("%d/%d: %v", c.sub, c.par, err)
		}
		if got := summary(bs); got != c.want {
			t.Errorf("%d/%d: got %s, want %s", c.sub, c.par, got, c.want)
		}
		// Still the end afterwards.
		if _, err := s.Read(context.Background()); !errors.Is(err, connectors.ErrEndOfInput) {
			t.Errorf("%d/%d: Read after end: %v", c.sub, c.par, err)
		}
	}
}

func TestUnbounded(t *testing.T) {
	in := mustBuild(t, `{"partitions": 2, "batch_size": 100, "fields": [{"name": "x", "type": "int64"}]}`)
	s := open(t, in, 0, 1, nil)
	bs, err := read(t, s, 1000)
	if err != nil || len(bs) != 1000 {
		t.Fatalf("%d batches, %v", len(bs), err)
	}
	if last := bs[999]; last.part != 1 || last.first != 49900 {
		t.Errorf("last batch %s", last)
	}
}

func TestPositionsAndAcks(t *testing.T) {
	in := mustBuild(t, `{"count": 6, "partitions": 2, "batch_size": 2, "fields": [{"name": "x", "type": "bool"}]}`)
	s := open(t, in, 0, 1, nil)
	bs, _ := read(t, s, -1) // p0@0 p1@0 p0@2 p1@2 p0@4 p1@4
	pos := func(a, b int64) []connectors.Position {
		return []connectors.Position{{Partition: 0, Offset: a}, {Partition: 1, Offset: b}}
	}
	bs[2].ack(nil)
	bs[4].ack(nil)
	bs[1].ack(nil)
	if got := s.Positions(); !reflect.DeepEqual(got, pos(0, 2)) {
		t.Errorf("got %v", got)
	}
	bs[0].ack(nil)
	bs[3].ack(errors.New("failed"))
	bs[5].ack(nil)
	if got := s.Positions(); !reflect.DeepEqual(got, pos(6, 2)) {
		t.Errorf("got %v", got)
	}
}

func TestValues(t *testing.T) {
	in := mustBuild(t, `{"seed": 1, "count": 20000, "batch_size": 4096, `+allFields+`}`)
	s := open(t, in, 0, 1, nil)
	schema := in.Schema()
	wantNullable := map[string]bool{"n": true, "v": true}
	for _, f := range schema.Fields()[:10] {
		if f.Nullable != wantNullable[f.Name] {
			t.Errorf("%s nullable %v", f.Name, f.Nullable)
		}
	}
	nulls := map[string]int{}
	seen := map[string]map[string]bool{"k": {}, "v": {}, "b": {}, "n": {}}
	rows := 0
	for {
		b, err := s.Read(context.Background())
		if errors.Is(err, connectors.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := b.Record
		off := rec.Column(12).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			o := off.Value(i)
			rows++
			if id := rec.Column(0).(*array.Int64).Value(i); id != o {
				t.Fatalf("sequence %d at offset %d", id, o)
			}
			if c := rec.Column(1).(*array.Int64); c.IsNull(i) {
				nulls["n"]++
			} else if v := c.Value(i); v < -5 || v > 5 {
				t.Fatalf("n = %d", v)
			} else {
				seen["n"][strconv.FormatInt(v, 10)] = true
			}
			if v := rec.Column(2).(*array.Float32).Value(i); v < 1 || v >= 2 {
				t.Fatalf("f32 = %v", v)
			}
			if v := rec.Column(3).(*array.Float64).Value(i); v < 0 || v >= 1 {
				t.Fatalf("f64 = %v", v)
			}
			seen["k"][rec.Column(4).(*array.String).Value(i)] = true
			if c := rec.Column(5).(*array.String); c.IsNull(i) {
				nulls["v"]++
			} else {
				seen["v"][c.Value(i)] = true
			}
			seen["b"][strconv.FormatBool(rec.Column(6).(*array.Boolean).Value(i))] = true
			if v, base := int64(rec.Column(7).(*array.Timestamp).Value(i)), 1000+o*10; v < base-3 || v > base+3 {
				t.Fatalf("ts %d at offset %d", v, o)
			}
			if v, want := int64(rec.Column(8).(*array.Timestamp).Value(i)), int64(math.Floor(float64(-5000+o)/1000)); v != want {
				t.Fatalf("ts_s %d at offset %d, want %d", v, o, want)
			}
			if v, want := int64(rec.Column(9).(*array.Timestamp).Value(i)), (DefaultStartMs+o)*1_000_000; v != want {
				t.Fatalf("ts_ns %d, want %d", v, want)
			}
		}
		rec.Release()
	}
	if rows != 20000 {
		t.Fatalf("%d rows", rows)
	}
	if len(seen["k"]) != 7 || len(seen["v"]) != 3 || len(seen["b"]) != 2 || len(seen["n"]) != 11 {
		t.Errorf("distinct values: k %d, v %d, b %d, n %d", len(seen["k"]), len(seen["v"]), len(seen["b"]), len(seen["n"]))
	}
	for k := range seen["k"] {
		if n, err := strconv.Atoi(strings.TrimPrefix(k, "key-")); err != nil || n < 0 || n >= 7 {
			t.Errorf("k = %q", k)
		}
	}
	if r := float64(nulls["n"]) / 20000; r < 0.18 || r > 0.22 {
		t.Errorf("null rate of n: %v", r)
	}
	if r := float64(nulls["v"]) / 20000; r < 0.47 || r > 0.53 {
		t.Errorf("null rate of v: %v", r)
	}
}

func TestEdgeRanges(t *testing.T) {
	in := mustBuild(t, `{"count": 1000, "fields": [
		{"name": "c", "type": "int64", "min": 3, "max": 3},
		{"name": "f", "type": "float64", "min": 2, "max": 2},
		{"name": "e", "type": "string", "prefix": "", "cardinality": 1},
		{"name": "z", "type": "int64", "null_rate": 1}]}`)
	bs, _ := read(t, open(t, in, 0, 1, nil), -1)
	for _, r := range rowsOf(bs) {
		if !strings.HasPrefix(r, `{"c":3,"f":2,"e":"0","z":null,`) {
			t.Fatalf("row %s", r)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ cfg, want string }{
		{`{}`, "fields: must declare at least one field"},
		{`{"fields":[{"name":"a","type":"int"}]}`, `fields[0].type: must be one of int64, float32, float64, string, bool, timestamp (got "int")`},
		{`{"batch_size":0,"partitions":0,"count":-1,"rate_per_sec":-2,"fields":[{"name":"a","type":"bool"}]}`,
			"count: must be >= 0 (got -1)\npartitions: must be >= 1 (got 0)\nbatch_size: must be > 0 (got 0)\nrate_per_sec: must be a finite number >= 0 (got -2)"},
		{`{"fields":[{"name":"a","type":"bool"},{"name":"b","type":"int64"},{"name":"c","type":"string","cardinality":0}]}`, "fields[2].cardinality: must be > 0 (got 0)"},
		{`{"fields":[{"name":"a","type":"int64","min":5,"max":1}]}`, "fields[0].max: must be >= min (got max 1 < min 5)"},
		{`{"fields":[{"name":"a","type":"float32","min":0.5,"max":0.25}]}`, "fields[0].max: must be >= min (got max 0.25 < min 0.5)"},
		{`{"fields":[{"name":"a","type":"int64","min":1.5}]}`, "fields[0].min: must be an integer in int64 range for int64 fields (got 1.5)"},
		{`{"fields":[{"name":"a","type":"float32","max":1e39}]}`, "fields[0].max: must be a finite float32 (got 1e+39)"},
		{`{"fields":[{"name":"a","type":"int64","values":["x"]}]}`, `fields[0].values: only string fields have values (type is "int64")`},
		{`{"fields":[{"name":"a","type":"string","min":1,"start_ms":5,"sequence":true}]}`,
			"fields[0].min: only int64 and float32 and float64 fields have min (type is \"string\")\nfields[0].start_ms: only timestamp fields have start_ms (type is \"string\")\nfields[0].sequence: only int64 fields have sequence (type is \"string\")"},
		{`{"fields":[{"name":"a","type":"string","values":[]}]}`, "fields[0].values: must not be empty"},
		{`{"fields":[{"name":"a","type":"string","values":["x"],"cardinality":3,"prefix":"p"}]}`, "fields[0].cardinality: cannot be combined with values\nfields[0].prefix: cannot be combined with values"},
		{`{"fields":[{"name":"a","type":"bool","null_rate":1.5}]}`, "fields[0].null_rate: must be between 0 and 1 (got 1.5)"},
		{`{"fields":[{"name":"a","type":"bool","null_rate":-0.1}]}`, "fields[0].null_rate: must be between 0 and 1 (got -0.1)"},
		{`{"fields":[{"name":"a","type":"timestamp","jitter_ms":-1}]}`, "fields[0].jitter_ms: must be between 0 and 4611686018427387904 (got -1)"},
		{`{"fields":[{"name":"a","type":"int64","sequence":true,"max":3}]}`, "fields[0].sequence: cannot be combined with min or max"},
		{`{"fields":[{"name":"a","type":"int64","unit":"ms"}]}`, `fields[0].unit: only timestamp fields have a unit (type is "int64")`},
		{`{"fields":[{"name":"a","type":"int64"},{"name":"a","type":"bool"},{"name":"__meta_x","type":"bool"},{"type":"bool"}]}`,
			"fields[1].name: duplicate field \"a\" (also fields[0])\nfields[2].name: names starting with \"__meta_\" are reserved for source metadata (got \"__meta_x\")\nfields[3].name: is required"},
		{`{"fields":[{"name":"a","type":"int64","colour":1}]}`, "fields[0].colour: unknown field (known fields: name, type, unit, min, max, values, cardinality, prefix, start_ms, step_ms, jitter_ms, null_rate, sequence)"},
	}
	for _, c := range cases {
		_, err := build(t, c.cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

func TestGoConfig(t *testing.T) {
	cfg := Config{Seed: 3, Count: 10, Fields: []Field{
		{Name: "k", Type: "string", Cardinality: 5, Prefix: Ptr("u")},
		{Name: "f", Type: "float64", Min: Ptr(-1.0), Max: Ptr(0.0)},
	}}
	if cfg.InputType() != "generate" {
		t.Fatal(cfg.InputType())
	}
	raw, _ := json.Marshal(cfg)
	if want := `{"seed":3,"count":10,"fields":[{"name":"k","type":"string","cardinality":5,"prefix":"u"},{"name":"f","type":"float64","min":-1,"max":0}]}`; string(raw) != want {
		t.Errorf("got  %s\nwant %s", raw, want)
	}
	a, err := NewInput(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config().BatchSize != DefaultBatchSize || a.Config().Partitions != 1 {
		t.Errorf("defaults %+v", a.Config())
	}
	b := mustBuild(t, string(raw))
	ra, _ := read(t, open(t, a, 0, 1, nil), -1)
	rb, _ := read(t, open(t, b, 0, 1, nil), -1)
	if !reflect.DeepEqual(rowsOf(ra), rowsOf(rb)) {
		t.Error("Go config and spec differ")
	}
}

func TestRateLimitCancellable(t *testing.T) {
	// 5 rows/s: batches of one row, and the bucket holds one.
	in := mustBuild(t, `{"batch_size": 10, "rate_per_sec": 5, "fields": [{"name": "x", "type": "int64"}]}`)
	s := open(t, in, 0, 1, nil)
	if _, err := read(t, s, 1); err != nil { // a full bucket lets the first batch go
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancelled Read took %v", d)
	}
	s.lim = nil
	bs, err := read(t, s, 1)
	if err != nil || bs[0].first != 1 || len(bs[0].rows) != 1 {
		t.Errorf("after cancel: %v %v", bs, err)
	}
}

func BenchmarkGenerate(b *testing.B) {
	cfg := Config{BatchSize: 4096, Fields: []Field{
		{Name: "id", Type: "int64"},
		{Name: "key", Type: "string"},
		{Name: "amount", Type: "float64"},
	}}
	in, err := NewInput(cfg)
	if err != nil {
		b.Fatal(err)
	}
	src, _ := in.NewSource(connectors.TaskInfo{OperatorID: "gen", Parallelism: 1})
	src.Connect(context.Background())
	defer src.Close(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	rows := 0
	for b.Loop() {
		bt, err := src.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rows += int(bt.Record.NumRows())
		bt.Ack(nil)
		bt.Record.Release()
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// Schema types are the declared ones.
func TestSchema(t *testing.T) {
	in := mustBuild(t, `{"fields":[{"name":"t","type":"timestamp","unit":"us"},{"name":"f","type":"float32","null_rate":0.1}]}`)
	want := connectors.WithMeta(arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil))
	if !in.Schema().Equal(want) {
		t.Errorf("got %s", in.Schema())
	}
}

func TestLargeCardinality(t *testing.T) {
	in := mustBuild(t, `{"count": 5000, "fields": [{"name": "k", "type": "string", "prefix": "u", "cardinality": 100000, "null_rate": 0.1}]}`)
	bs, _ := read(t, open(t, in, 0, 1, nil), -1)
	distinct := map[string]bool{}
	for _, r := range rowsOf(bs) {
		var row struct{ K *string }
		if err := json.Unmarshal([]byte(r), &row); err != nil {
			t.Fatal(err)
		}
		if row.K == nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(*row.K, "u"))
		if !strings.HasPrefix(*row.K, "u") || err != nil || n < 0 || n >= 100000 {
			t.Fatalf("k = %q", *row.K)
		}
		distinct[*row.K] = true
	}
	if len(distinct) < 4000 {
		t.Errorf("%d distinct keys", len(distinct))
	}
}

// Progress counts the rows delivered of count × the subtask's partitions,
// from offset 0 (a Seek's offsets included), per batch.
func TestProgress(t *testing.T) {
	in := mustBuild(t, `{"count": 2500, "partitions": 3, "batch_size": 1000, "fields": [{"name": "id", "type": "int64", "sequence": true}]}`)
	s := open(t, in, 0, 2, []connectors.Position{{Partition: 2, Offset: 500}}) // partitions 0 and 2
	want := connectors.Progress{Position: 500, End: 5000, Unit: "rows"}
	if got := s.Progress(); got != want {
		t.Fatalf("after Connect: %+v, want %+v", got, want)
	}
	bs, err := read(t, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	want.Position += int64(len(bs[0].rows))
	if got := s.Progress(); got != want {
		t.Fatalf("after %s: %+v, want %+v", bs[0], got, want)
	}
	if _, err := read(t, s, -1); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatal(err)
	}
	want.Position = 5000
	if got := s.Progress(); got != want {
		t.Fatalf("at the end: %+v, want %+v", got, want)
	}
	unbounded := open(t, mustBuild(t, `{"fields": [{"name": "id", "type": "int64"}]}`), 0, 1, nil)
	if got := unbounded.Progress(); got.End != 0 {
		t.Fatalf("unbounded: %+v, want no end", got)
	}
}

// rowsWithin reads s for d and returns the rows it delivered and the
// largest batch.
func rowsWithin(t *testing.T, s *Source, d time.Duration) (rows, largest int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		b, err := s.Read(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return rows, largest
		}
		if err != nil {
			t.Fatal(err)
		}
		n := int(b.Record.NumRows())
		rows += n
		largest = max(largest, n)
		b.Record.Release()
		b.Ack(nil)
	}
}

func TestRatePerSecIsRowsPerSecond(t *testing.T) {
	const window = 3 * time.Second
	cases := []struct {
		name     string
		cfg      string
		min, max int // rows in the window
		batch    int // the largest batch allowed
	}{
		// 2 rows/s with the default batch_size: one row at a time, about
		// 6 in 3 s (plus the bucket's one row at the start).
		{"2/s", `{"rate_per_sec": 2, "fields": [{"name": "x", "type": "int64"}]}`, 3, 9, 1},
		// 10,000 rows/s: about 30,000 in 3 s, in batches of what 100 ms
		// allow.
		{"10000/s", `{"rate_per_sec": 10000, "fields": [{"name": "x", "type": "int64"}]}`, 22_500, 37_500, 1000},
		// The rate is the subtask's, over all its partitions.
		{"10000/s over 4 partitions", `{"rate_per_sec": 10000, "partitions": 4, "batch_size": 200, "fields": [{"name": "x", "type": "int64"}]}`, 22_500, 37_500, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rows, largest := rowsWithin(t, open(t, mustBuild(t, c.cfg), 0, 1, nil), window)
			if rows < c.min || rows > c.max {
				t.Errorf("%d rows in %v, want %d..%d", rows, window, c.min, c.max)
			}
			if largest > c.batch {
				t.Errorf("a batch of %d rows, want at most %d", largest, c.batch)
			}
		})
	}
}

// A rate that shrinks batches changes where they are cut, not the rows:
// each partition's rows, in order, are those of an unlimited run, also
// after a Seek, and batches stay aligned to multiples of their size.
func TestRateKeepsRows(t *testing.T) {
	unlimited := `{"seed": 5, "count": 12, "partitions": 2, "batch_size": 1024, ` + allFields + `}`
	limited := `{"seed": 5, "count": 12, "partitions": 2, "rate_per_sec": 50, ` + allFields + `}` // 5 rows per 100 ms
	perPart := func(bs []batch) map[int][]string {
		m := map[int][]string{}
		for _, b := range bs {
			m[b.part] = append(m[b.part], b.rows...)
		}
		return m
	}
	want, err := read(t, open(t, mustBuild(t, unlimited), 0, 1, nil), -1)
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatal(err)
	}
	got, err := read(t, open(t, mustBuild(t, limited), 0, 1, nil), -1)
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatal(err)
	}
	if s, w := summary(got), "p0@0+5 p1@0+5 p0@5+5 p1@5+5 p0@10+2 p1@10+2"; s != w {
		t.Errorf("batches %s, want %s", s, w)
	}
	if !reflect.DeepEqual(perPart(got), perPart(want)) {
		t.Error("a rate changed the rows")
	}
	resumed, _ := read(t, open(t, mustBuild(t, limited), 0, 1, []connectors.Position{{Partition: 0, Offset: 3}, {Partition: 1, Offset: 7}}), -1)
	if s, w := summary(resumed), "p0@3+2 p1@7+3 p0@5+5 p1@10+2 p0@10+2"; s != w {
		t.Errorf("batches after a seek %s, want %s", s, w)
	}
	w := perPart(want)
	if r := perPart(resumed); !reflect.DeepEqual(r[0], w[0][3:]) || !reflect.DeepEqual(r[1], w[1][7:]) {
		t.Error("rows after a seek differ")
	}
}
