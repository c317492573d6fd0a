package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	gomem "github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
)

var valueSchema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

// values returns a batch of valueSchema holding vals.
func values(vals ...int64) arrow.RecordBatch {
	b := array.NewInt64Builder(gomem.DefaultAllocator)
	b.AppendValues(vals, nil)
	a := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(valueSchema, []arrow.Array{a}, int64(len(vals)))
	a.Release()
	return rec
}

// seq returns n consecutive values from first.
func seq(first int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// input builds the memory input for a bound source (or a declarative
// config when src is nil).
func input(t *testing.T, config string, src *memory.Source) connectors.Input {
	t.Helper()
	f, ok := connectors.LookupInput("memory")
	if !ok {
		t.Fatal("memory input not registered")
	}
	bc := connectors.BuildContext{Config: json.RawMessage(config)}
	if src != nil {
		bc.Bound = src
	}
	in, err := f(bc)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return in
}

func open(t *testing.T, in connectors.Input, subtask, parallelism int, seek []connectors.Position) connectors.Source {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{OperatorID: "op-1", Subtask: subtask, Parallelism: parallelism})
	if err != nil {
		t.Fatal(err)
	}
	if seek != nil {
		if err := s.(connectors.Positioner).Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// row is one delivered row with its metadata.
type row struct {
	v         int64
	source    string
	partition int32
	offset    int64
}

// read reads one batch with a deadline and checks its metadata columns.
func read(t *testing.T, s connectors.Source) (connectors.Batch, []row, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := s.Read(ctx)
	if err != nil {
		return b, nil, err
	}
	return b, rows(t, b), nil
}

func rows(t *testing.T, b connectors.Batch) []row {
	t.Helper()
	rec := b.Record
	want := connectors.WithMeta(valueSchema)
	if !rec.Schema().Equal(want) {
		t.Fatalf("batch schema %s, want %s", rec.Schema(), want)
	}
	v := rec.Column(0).(*array.Int64)
	src := rec.Column(1).(*array.String)
	part := rec.Column(2).(*array.Int32)
	off := rec.Column(3).(*array.Int64)
	out := make([]row, rec.NumRows())
	for i := range out {
		out[i] = row{v.Value(i), src.Value(i), part.Value(i), off.Value(i)}
		if int(out[i].partition) != b.Partition {
			t.Fatalf("row %d: __meta_partition %d but Batch.Partition %d", i, out[i].partition, b.Partition)
		}
	}
	return out
}

// readAll reads until ErrEndOfInput, acknowledging every batch.
func readAll(t *testing.T, s connectors.Source) (batches []connectors.Batch, all []row) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("no end of input")
		}
		b, rs, err := read(t, s)
		if errors.Is(err, connectors.ErrEndOfInput) {
			return batches, all
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		b.Ack(nil)
		b.Record.Release()
		b.Record = nil
		batches = append(batches, b)
		all = append(all, rs...)
	}
}

func TestPartitionAssignmentAndMetadata(t *testing.T) {
	// Partition p holds values p*1000 + offset, in batches of 1, 2 and 3 rows.
	const parts = 5
	var data [][]arrow.RecordBatch
	for p := 0; p < parts; p++ {
		var bs []arrow.RecordBatch
		off := 0
		for _, n := range []int{1, 2, 3}[:1+p%3] {
			bs = append(bs, values(seq(int64(p*1000+off), n)...))
			off += n
		}
		data = append(data, bs)
	}
	src, err := memory.NewSourceFrom(data...)
	if err != nil {
		t.Fatal(err)
	}
	for _, bs := range data {
		for _, b := range bs {
			b.Release() // the source retained them
		}
	}
	in := input(t, `{}`, src)
	if in.Partitions() != parts {
		t.Fatalf("Partitions = %d", in.Partitions())
	}
	if !in.Schema().Equal(connectors.WithMeta(valueSchema)) {
		t.Fatalf("Schema = %s", in.Schema())
	}
	for P := 1; P <= parts+1; P++ {
		seen := map[int32]int{} // partition -> subtask
		for s := 0; s < P; s++ {
			r := open(t, in, s, P, nil)
			_, all := readAll(t, r)
			next := map[int32]int64{}
			for _, rw := range all {
				if int(rw.partition)%P != s {
					t.Fatalf("P=%d: subtask %d read partition %d", P, s, rw.partition)
				}
				if owner, ok := seen[rw.partition]; ok && owner != s {
					t.Fatalf("partition %d read by subtasks %d and %d", rw.partition, owner, s)
				}
				seen[rw.partition] = s
				if rw.source != "op-1" {
					t.Fatalf("__meta_source = %q", rw.source)
				}
				if rw.offset != next[rw.partition] {
					t.Fatalf("partition %d: offset %d, want %d", rw.partition, rw.offset, next[rw.partition])
				}
				next[rw.partition]++
				if want := int64(rw.partition)*1000 + rw.offset; rw.v != want {
					t.Fatalf("partition %d offset %d: value %d, want %d", rw.partition, rw.offset, rw.v, want)
				}
			}
			for p := s; p < parts; p += P {
				want := int64(0)
				for _, b := range data[p] {
					want += b.NumRows()
				}
				if next[int32(p)] != want {
					t.Fatalf("P=%d subtask %d partition %d: %d rows, want %d", P, s, p, next[int32(p)], want)
				}
			}
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != parts {
			t.Fatalf("P=%d: partitions read %v", P, seen)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	// 7 partitions with different batch counts; subtask 1 of 3 reads 1 and 4.
	counts := []int{2, 3, 1, 0, 4, 1, 2}
	src := memory.NewSource(valueSchema, len(counts))
	for p, n := range counts {
		for i := 0; i < n; i++ {
			b := values(int64(p*100 + i))
			if err := src.Append(p, b); err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
	}
	src.Close()
	in := input(t, `{}`, src)
	for P := 1; P <= 4; P++ {
		for s := 0; s < P; s++ {
			// Expected: cycle over the subtask's partitions in order, skipping
			// exhausted ones.
			var mine []int
			for p := range counts {
				if p%P == s {
					mine = append(mine, p)
				}
			}
			left := make([]int, len(mine))
			for i, p := range mine {
				left[i] = counts[p]
			}
			var want []int
			for k := 0; slices.ContainsFunc(left, func(n int) bool { return n > 0 }); k = (k + 1) % len(mine) {
				if left[k] > 0 {
					want = append(want, mine[k])
					left[k]--
				}
			}
			batches, _ := readAll(t, open(t, in, s, P, nil))
			var got []int
			for _, b := range batches {
				got = append(got, b.Partition)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("P=%d subtask %d: partitions %v, want %v", P, s, got, want)
			}
		}
	}
}

func TestSeek(t *testing.T) {
	// Partition 0: batches of 3, 4, 5 rows (offsets 0-2, 3-6, 7-11), an empty
	// batch, then 2 rows (12-13). Partition 1: one batch of 4 rows.
	sizes := []int{3, 4, 5, 0, 2}
	src := memory.NewSource(valueSchema, 2)
	off := 0
	for _, n := range sizes {
		b := values(seq(int64(off), n)...)
		if err := src.Append(0, b); err != nil {
			t.Fatal(err)
		}
		b.Release()
		off += n
	}
	b := values(seq(100, 4)...)
	if err := src.Append(1, b); err != nil {
		t.Fatal(err)
	}
	b.Release()
	src.Close()
	in := input(t, `{}`, src)
	total := int64(off)
	for seek := int64(0); seek <= total+1; seek++ {
		t.Run(fmt.Sprint(seek), func(t *testing.T) {
			// Partition 1 has no position: it keeps the configured start.
			r := open(t, in, 0, 1, []connectors.Position{{Partition: 0, Offset: seek}})
			if got := r.(connectors.Positioner).Positions(); !reflect.DeepEqual(got, []connectors.Position{{Partition: 0, Offset: seek}, {Partition: 1, Offset: 0}}) {
				t.Fatalf("Positions after Connect = %+v", got)
			}
			_, all := readAll(t, r)
			var got0, got1 []int64
			for _, rw := range all {
				if rw.v != rw.offset && rw.partition == 0 {
					t.Fatalf("partition 0: value %d at offset %d", rw.v, rw.offset)
				}
				if rw.partition == 0 {
					got0 = append(got0, rw.offset)
				} else {
					got1 = append(got1, rw.v)
				}
			}
			var want0 []int64
			for o := seek; o < total; o++ {
				want0 = append(want0, o)
			}
			if !slices.Equal(got0, want0) {
				t.Fatalf("partition 0 offsets %v, want %v", got0, want0)
			}
			if !slices.Equal(got1, seq(100, 4)) {
				t.Fatalf("partition 1 values %v", got1)
			}
			wantPos := max(seek, total)
			if got := r.(connectors.Positioner).Positions(); !reflect.DeepEqual(got, []connectors.Position{{Partition: 0, Offset: wantPos}, {Partition: 1, Offset: 4}}) {
				t.Fatalf("Positions after acknowledging everything = %+v, want offset %d", got, wantPos)
			}
		})
	}
}

func TestPositionsFollowAcks(t *testing.T) {
	src := memory.NewSource(valueSchema, 1)
	for _, n := range []int{2, 3, 4} {
		b := values(seq(0, n)...)
		_ = src.Append(0, b)
		b.Release()
	}
	src.Close()
	r := open(t, input(t, `{}`, src), 0, 1, nil)
	pos := func() int64 { return r.(connectors.Positioner).Positions()[0].Offset }
	var bs []connectors.Batch
	for i := 0; i < 3; i++ {
		b, _, err := read(t, r)
		if err != nil {
			t.Fatal(err)
		}
		b.Record.Release()
		bs = append(bs, b)
	}
	if pos() != 0 {
		t.Fatalf("position %d before any ack", pos())
	}
	bs[2].Ack(nil)
	bs[1].Ack(nil)
	if pos() != 0 {
		t.Fatalf("position %d while the first batch is unacknowledged", pos())
	}
	bs[0].Ack(errors.New("sink failed"))
	if pos() != 0 {
		t.Fatalf("position %d after the first batch failed", pos())
	}
	// A restarted reader resumes there and gets everything again.
	r2 := open(t, input(t, `{}`, src), 0, 1, r.(connectors.Positioner).Positions())
	_, all := readAll(t, r2)
	if len(all) != 9 {
		t.Fatalf("replayed %d rows, want 9", len(all))
	}
	if got := r2.(connectors.Positioner).Positions()[0].Offset; got != 9 {
		t.Fatalf("position %d, want 9", got)
	}
}

func TestReadBlocksUntilAppend(t *testing.T) {
	src := memory.NewSource(valueSchema, 2)
	in := input(t, `{}`, src)
	r := open(t, in, 0, 1, nil)

	// With nothing to read, Read waits: a done context ends it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read on an empty open source with a cancelled ctx = %v, want context.Canceled", err)
	}

	type result struct {
		b   connectors.Batch
		err error
	}
	results := make(chan result)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for {
			b, err := r.Read(ctx)
			results <- result{b, err}
			if err != nil {
				return
			}
		}
	}()
	// Append one batch at a time, each after the previous was read, so the
	// reader is usually waiting when it arrives.
	for i := 0; i < 50; i++ {
		p := i % 2
		b := values(int64(i))
		if err := src.Append(p, b); err != nil {
			t.Fatal(err)
		}
		b.Release()
		select {
		case res := <-results:
			if res.err != nil {
				t.Fatalf("Read: %v", res.err)
			}
			rs := rows(t, res.b)
			res.b.Record.Release()
			res.b.Ack(nil)
			if len(rs) != 1 || rs[0].v != int64(i) || rs[0].partition != int32(p) || rs[0].offset != int64(i/2) {
				t.Fatalf("batch %d: %+v", i, rs)
			}
		case <-ctx.Done():
			t.Fatalf("reader did not wake for batch %d", i)
		}
	}
	// Close wakes the waiting reader with end of input.
	src.Close()
	select {
	case res := <-results:
		if !errors.Is(res.err, connectors.ErrEndOfInput) {
			t.Fatalf("after Close: %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("reader did not wake for Close")
	}
	if got := r.(connectors.Positioner).Positions(); !reflect.DeepEqual(got, []connectors.Position{{Partition: 0, Offset: 25}, {Partition: 1, Offset: 25}}) {
		t.Fatalf("Positions = %+v", got)
	}
}

func TestReadReturnsOnCancelWhileWaiting(t *testing.T) {
	src := memory.NewSource(valueSchema, 1)
	r := open(t, input(t, `{}`, src), 0, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Read did not return after cancel")
	}
	// The source is still usable afterwards.
	b := values(7)
	_ = src.Append(0, b)
	b.Release()
	got, rs, err := read(t, r)
	if err != nil || len(rs) != 1 || rs[0].v != 7 {
		t.Fatalf("Read after cancel = %+v, %v", rs, err)
	}
	got.Record.Release()
}

func TestReaderWithoutPartitions(t *testing.T) {
	// Subtask 3 of 4 over 2 partitions reads nothing and ends once closed.
	src := memory.NewSource(valueSchema, 2)
	in := input(t, `{}`, src)
	r := open(t, in, 3, 4, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read before Close = %v", err)
	}
	src.Close()
	if _, _, err := read(t, r); !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("Read after Close = %v", err)
	}
	if got := r.(connectors.Positioner).Positions(); len(got) != 0 {
		t.Fatalf("Positions = %v", got)
	}
}

func TestAppendErrors(t *testing.T) {
	src := memory.NewSource(valueSchema, 2)
	other := arrow.NewSchema([]arrow.Field{{Name: "w", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ob := array.NewInt64Builder(gomem.DefaultAllocator)
	ob.Append(1)
	oa := ob.NewArray()
	ob.Release()
	orec := array.NewRecordBatch(other, []arrow.Array{oa}, 1)
	oa.Release()
	defer orec.Release()
	good := values(1)
	defer good.Release()
	cases := []struct {
		part int
		rec  arrow.RecordBatch
		want string
	}{
		{-1, good, "out of range"},
		{2, good, "out of range"},
		{0, orec, "differs"},
	}
	for _, tc := range cases {
		if err := src.Append(tc.part, tc.rec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Append(%d) = %v, want %q", tc.part, err, tc.want)
		}
	}
	src.Close()
	src.Close() // idempotent
	if err := src.Append(0, good); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Append after Close = %v", err)
	}
	if s := memory.NewSource(valueSchema, 0); input(t, `{}`, s).Partitions() != 1 {
		t.Error("NewSource(…, 0) does not have one partition")
	}
}

func TestNewSourceFromErrors(t *testing.T) {
	if _, err := memory.NewSourceFrom(); err == nil {
		t.Error("NewSourceFrom() succeeded")
	}
	if _, err := memory.NewSourceFrom(nil, nil); err == nil {
		t.Error("NewSourceFrom with empty partitions succeeded")
	}
	a := values(1)
	defer a.Release()
	ts := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil)
	bb := array.NewInt32Builder(gomem.DefaultAllocator)
	bb.Append(1)
	arr := bb.NewArray()
	bb.Release()
	b := array.NewRecordBatch(ts, []arrow.Array{arr}, 1)
	arr.Release()
	defer b.Release()
	if _, err := memory.NewSourceFrom([]arrow.RecordBatch{a}, []arrow.RecordBatch{b}); err == nil {
		t.Error("NewSourceFrom with two schemas succeeded")
	}
	// Empty partitions are kept: partition 1 of 3 has the batch.
	src, err := memory.NewSourceFrom(nil, []arrow.RecordBatch{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.Append(0, a) == nil {
		t.Error("NewSourceFrom's source is not closed")
	}
	in := input(t, `{}`, src)
	if in.Partitions() != 3 {
		t.Fatalf("Partitions = %d", in.Partitions())
	}
	batches, _ := readAll(t, open(t, in, 0, 1, nil))
	if len(batches) != 1 || batches[0].Partition != 1 {
		t.Fatalf("batches %+v", batches)
	}
}

func TestSourceMarshalJSON(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	src := memory.NewSource(s, 3)
	if src.InputType() != "memory" || src.Schema() != s {
		t.Fatal("InputType/Schema")
	}
	b, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"string"},{"name":"at","type":"timestamp","unit":"us"}],"partitions":3}`
	if string(b) != want {
		t.Fatalf("MarshalJSON = %s\nwant %s", b, want)
	}
	// The written config builds an equivalent declarative source.
	in := input(t, string(b), nil)
	if !in.Schema().Equal(connectors.WithMeta(s)) || in.Partitions() != 3 {
		t.Fatalf("rebuilt: %s, %d partitions", in.Schema(), in.Partitions())
	}
	bad := memory.NewSource(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Uint8}}, nil), 1)
	if _, err := json.Marshal(bad); err == nil {
		t.Fatal("MarshalJSON of an undeclarable schema succeeded")
	}
}

func TestDeclarativeRows(t *testing.T) {
	var rowsJSON []string
	for i := 0; i < 11; i++ {
		rowsJSON = append(rowsJSON, fmt.Sprintf(`{"v": %d}`, i))
	}
	for _, tc := range []struct {
		parts, size int
	}{{0, 0}, {1, 1}, {1, 4}, {3, 2}, {4, 100}, {11, 1}, {13, 3}} {
		t.Run(fmt.Sprintf("p%d_b%d", tc.parts, tc.size), func(t *testing.T) {
			cfg := fmt.Sprintf(`{"schema": [{"name": "v", "type": "int64", "nullable": false}], "rows": [%s]`, strings.Join(rowsJSON, ","))
			if tc.parts != 0 {
				cfg += fmt.Sprintf(`, "partitions": %d`, tc.parts)
			}
			if tc.size != 0 {
				cfg += fmt.Sprintf(`, "batch_size": %d`, tc.size)
			}
			cfg += "}"
			in := input(t, cfg, nil)
			parts := max(tc.parts, 1)
			size := tc.size
			if size == 0 {
				size = 1024
			}
			if in.Partitions() != parts {
				t.Fatalf("Partitions = %d, want %d", in.Partitions(), parts)
			}
			r, err := in.NewSource(connectors.TaskInfo{OperatorID: "op-1", Subtask: 0, Parallelism: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Connect(context.Background()); err != nil {
				t.Fatal(err)
			}
			perPart := map[int][]int64{}
			sizes := map[int][]int64{}
			for {
				b, err := r.Read(context.Background())
				if errors.Is(err, connectors.ErrEndOfInput) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				v := b.Record.Column(0).(*array.Int64)
				off := b.Record.Column(b.Record.Schema().FieldIndices(connectors.MetaOffset)[0]).(*array.Int64)
				for i := 0; i < v.Len(); i++ {
					if off.Value(i) != int64(len(perPart[b.Partition])) {
						t.Fatalf("partition %d: offset %d, want %d", b.Partition, off.Value(i), len(perPart[b.Partition]))
					}
					perPart[b.Partition] = append(perPart[b.Partition], v.Value(i))
				}
				sizes[b.Partition] = append(sizes[b.Partition], b.Record.NumRows())
				b.Record.Release()
				b.Ack(nil)
			}
			for p := 0; p < parts; p++ {
				var want []int64
				for i := p; i < 11; i += parts {
					want = append(want, int64(i))
				}
				if !slices.Equal(perPart[p], want) {
					t.Fatalf("partition %d rows %v, want %v", p, perPart[p], want)
				}
				var wantSizes []int64
				for n := len(want); n > 0; n -= size {
					wantSizes = append(wantSizes, int64(min(n, size)))
				}
				if !slices.Equal(sizes[p], wantSizes) {
					t.Fatalf("partition %d batch sizes %v, want %v", p, sizes[p], wantSizes)
				}
			}
		})
	}
}

func TestDeclarativeEmpty(t *testing.T) {
	for _, cfg := range []string{``, `{}`, `null`, `{"partitions": 3}`} {
		in := input(t, cfg, nil)
		if in.Schema().NumFields() != 3 {
			t.Fatalf("%q: schema %s, want only metadata", cfg, in.Schema())
		}
		r, _ := in.NewSource(connectors.TaskInfo{Parallelism: 1})
		_ = r.Connect(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := r.Read(ctx); !errors.Is(err, connectors.ErrEndOfInput) {
			t.Fatalf("%q: Read = %v, want end of input", cfg, err)
		}
		cancel()
	}
}

func TestDeclarativeErrors(t *testing.T) {
	f, _ := connectors.LookupInput("memory")
	schema := `"schema": [{"name": "v", "type": "int64", "nullable": false}, {"name": "s", "type": "string"}]`
	cases := []struct {
		name  string
		cfg   string
		paths []string
		want  []string
	}{
		{"bad rows", `{` + schema + `, "partitions": 2, "batch_size": 2, "rows": [{"v": 1}, {"v": 2}, {"v": 3, "s": "x"}, {"v": "four"}, {"s": "no v"}, {"v": 6}, 7]}`,
			[]string{"rows[3]", "rows[4]", "rows[6]"}, []string{`field "v"`, `field "v"`, ""}},
		{"rows without schema", `{"rows": [{"v": 1}]}`, []string{"schema"}, []string{"required when rows are given"}},
		{"negative partitions", `{"partitions": -1, "batch_size": -5}`, []string{"partitions", "batch_size"}, []string{"must be >= 1 (got -1)", "must be >= 1 (got -5)"}},
		{"schema problems", `{"schema": [{"name": "a", "type": "int64"}, {"name": "b", "type": "int"}, {"name": "__meta_x", "type": "string"}], "partitions": -2}`,
			[]string{"partitions", "schema[1].type", "schema[2].name"}, []string{">= 1", "must be one of", "reserved"}},
		{"strict decoding", `{"partitons": 2, "batch_size": "10", "rows": {}}`, []string{"batch_size", "partitons", "rows"}, []string{"must be an integer", "unknown field", "must be a list"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := f(connectors.BuildContext{Config: json.RawMessage(tc.cfg)})
			if err == nil {
				t.Fatalf("built %v", in)
			}
			fes := connectors.FlattenFieldErrors(err)
			var ps []string
			for _, fe := range fes {
				ps = append(ps, fe.Path)
			}
			if !reflect.DeepEqual(ps, tc.paths) {
				t.Fatalf("paths %q, want %q (%v)", ps, tc.paths, err)
			}
			for i, w := range tc.want {
				if !strings.Contains(fes[i].Reason, w) {
					t.Errorf("%s: %q does not contain %q", fes[i].Path, fes[i].Reason, w)
				}
			}
		})
	}
	// A bound source ignores the declarative fields, but the config is
	// still checked strictly.
	src := memory.NewSource(valueSchema, 1)
	if _, err := f(connectors.BuildContext{Config: json.RawMessage(`{"nope": 1}`), Bound: src}); err == nil {
		t.Error("bound source accepted an unknown config field")
	}
	in, err := f(connectors.BuildContext{Config: json.RawMessage(`{"partitions": 9}`), Bound: src})
	if err != nil || in.Partitions() != 1 {
		t.Errorf("bound source: %v, %v", in, err)
	}
}

func TestConcurrentReaders(t *testing.T) {
	// Subtasks read one shared source while a writer appends.
	const parts, per = 4, 30
	src := memory.NewSource(valueSchema, parts)
	in := input(t, `{}`, src)
	const P = 3
	readers := make([]connectors.Source, P)
	for s := range readers {
		readers[s] = open(t, in, s, P, nil)
	}
	var wg sync.WaitGroup
	counts := make([]int, P)
	errs := make([]error, P)
	for s := range readers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				b, err := readers[s].Read(ctx)
				if errors.Is(err, connectors.ErrEndOfInput) {
					return
				}
				if err != nil {
					errs[s] = err
					return
				}
				counts[s] += int(b.Record.NumRows())
				b.Record.Release()
				b.Ack(nil)
			}
		})
	}
	for i := 0; i < per; i++ {
		for p := 0; p < parts; p++ {
			b := values(int64(i))
			if err := src.Append(p, b); err != nil {
				t.Error(err)
			}
			b.Release()
		}
	}
	src.Close()
	wg.Wait()
	for s := 0; s < P; s++ {
		if errs[s] != nil {
			t.Fatalf("subtask %d: %v", s, errs[s])
		}
		want := 0
		for p := s; p < parts; p += P {
			want += per
		}
		if counts[s] != want {
			t.Errorf("subtask %d read %d rows, want %d", s, counts[s], want)
		}
	}
}

// A restore to positions past the rows an open Source holds is refused,
// naming why, instead of skipping the rows appended to it later (a
// service restarted with a checkpoint once lost its first pushed events
// without a word).
func TestRestoredOpenSourceRefusesPositionsItNeverDelivered(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	open := func(src *memory.Source, seek int64) error {
		f, _ := connectors.LookupInput("memory")
		in, err := f(connectors.BuildContext{JobID: "j", OperatorID: "in", Config: []byte("{}"), Bound: src})
		if err != nil {
			t.Fatal(err)
		}
		s, err := in.NewSource(connectors.TaskInfo{JobID: "j", OperatorID: "in", Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.(connectors.Positioner).Seek([]connectors.Position{{Partition: 0, Offset: seek}}); err != nil {
			t.Fatal(err)
		}
		return s.Connect(context.Background())
	}
	// Another process's Source, whose rows arrive after the job started.
	fresh := memory.NewSource(schema, 1)
	if err := fresh.Append(0, int64Batch(schema, 1, 2)); err != nil {
		t.Fatal(err)
	}
	err := open(fresh, 5)
	if err == nil || !strings.Contains(err.Error(), "holds only 2 rows") || !strings.Contains(err.Error(), "push.New") {
		t.Fatalf("restore of a fresh open source: %v, want a refusal naming why", err)
	}
	// Given the input again (a replay, or the same Source in-process), it
	// seeks.
	if err := fresh.Append(0, int64Batch(schema, 3, 4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	if err := open(fresh, 5); err != nil {
		t.Fatalf("restore within the rows the source holds: %v", err)
	}
	// A closed Source holds fixed rows: it seeks.
	fixed, err := memory.NewSourceFrom([]arrow.RecordBatch{int64Batch(schema, 1, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if err := open(fixed, 2); err != nil {
		t.Fatalf("restore of a closed source: %v", err)
	}
}

func int64Batch(schema *arrow.Schema, vs ...int64) arrow.RecordBatch {
	b := array.NewInt64Builder(gomem.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vs, nil)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(vs)))
}
