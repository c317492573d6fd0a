package typed_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	arrowbatch "github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// Exact is a row type whose values survive Encode and Decode unchanged:
// every kind a typed batch hands along, an embedded struct and named
// types among them.
type Exact struct {
	Ints
	Floats
	On    bool
	Name  string
	User  UserID
	Score Score
	N     Count
}

func exactRows(r *rand.Rand, n int) []Exact {
	rows := make([]Exact, n)
	for i := range rows {
		x := &rows[i]
		x.I, x.I8, x.I16, x.I32, x.I64 = r.Int(), int8(r.Int()), int16(r.Int()), int32(r.Int()), r.Int64()-r.Int64()
		x.U, x.U8, x.U16, x.U32, x.U64 = uint(r.Uint64()), uint8(r.Uint32()), uint16(r.Uint32()), r.Uint32(), r.Uint64()
		x.F32, x.F64 = float32(r.NormFloat64()), r.NormFloat64()
		switch r.IntN(8) {
		case 0:
			x.F64 = math.NaN()
		case 1:
			x.F64 = math.Copysign(0, -1)
		case 2:
			x.F32 = float32(math.Inf(-1))
		}
		x.On = r.IntN(2) == 0
		x.Name = strconv.Itoa(r.IntN(1000))
		if r.IntN(5) == 0 {
			x.Name = "" // empty strings are values, not nulls
		}
		x.User, x.Score, x.N = UserID("u"+strconv.Itoa(i)), Score(r.Float64()), Count(r.Int32())
	}
	return rows
}

// equalRecords fails unless got and want have the same schema and
// columns (array.Equal: NaN equals NaN only bit for bit, as the encoder
// writes it).
func equalRecords(t *testing.T, what string, got, want arrow.RecordBatch) {
	t.Helper()
	if !got.Schema().Equal(want.Schema()) {
		t.Fatalf("%s: schema %s, want %s", what, got.Schema(), want.Schema())
	}
	if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
		t.Fatalf("%s: %d rows × %d columns, want %d × %d", what, got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	for i := range int(want.NumCols()) {
		if got.ColumnName(i) != want.ColumnName(i) {
			t.Fatalf("%s: column %d named %q, want %q", what, i, got.ColumnName(i), want.ColumnName(i))
		}
		if !array.ApproxEqual(got.Column(i), want.Column(i), array.WithNaNsEqual(true)) {
			t.Fatalf("%s: column %q is %v, want %v", what, got.ColumnName(i), got.Column(i), want.Column(i))
		}
	}
}

func codecOf[T any](t *testing.T) *typed.Codec[T] {
	t.Helper()
	c, err := typed.For[T]()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A typed batch reads, column by column, as Encode's batch of the same
// rows: in any order of reads, sliced, taken, with metadata columns, and
// stripped of them; and Decode gives the rows back.
func TestBatchReadsAsItsEncoding(t *testing.T) {
	t.Parallel()
	c := codecOf[Exact](t)
	if !c.Exact() {
		t.Fatal("Exact's codec is not exact")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		rows := exactRows(r, 1+r.IntN(300))
		want, err := c.Encode(nil, rows)
		if err != nil {
			t.Fatal(err)
		}
		b := typed.NewBatch(c, slices.Clone(rows))
		for _, i := range r.Perm(int(want.NumCols())) { // one column at a time, any order
			if !array.ApproxEqual(b.Column(i), want.Column(i), array.WithNaNsEqual(true)) {
				t.Fatalf("round %d: column %q differs from Encode's", round, want.ColumnName(i))
			}
		}
		equalRecords(t, "batch", b, want)
		lo := r.IntN(len(rows))
		hi := lo + r.IntN(len(rows)-lo+1)
		sl, wsl := b.NewSlice(int64(lo), int64(hi)), want.NewSlice(int64(lo), int64(hi))
		equalRecords(t, "slice", sl, wsl)
		idx := make([]int32, r.IntN(2*len(rows)))
		for k := range idx {
			idx[k] = int32(r.IntN(len(rows)))
		}
		tk, err := arrowbatch.Take(b, idx)
		if err != nil {
			t.Fatal(err)
		}
		wtk, err := arrowbatch.Take(want, idx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tk.(*typed.Batch[Exact]); !ok {
			t.Fatalf("Take of a typed batch gave a %T", tk)
		}
		equalRecords(t, "take", tk, wtk)

		// Metadata columns, made when read, then stripped.
		schema := connectors.WithMeta(c.Schema())
		start := r.Int64N(1 << 40)
		m := connectors.AddMeta(schema, b, "src", 3, start)
		wm := connectors.AddMeta(schema, want, "src", 3, start)
		if _, ok := m.(*typed.Batch[Exact]); !ok {
			t.Fatalf("AddMeta of a typed batch gave a %T", m)
		}
		mtk, err := arrowbatch.Take(m, idx) // the metadata rows taken with theirs
		if err != nil {
			t.Fatal(err)
		}
		wmtk, err := arrowbatch.Take(wm, idx)
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, "take with metadata", mtk, wmtk)
		msl, wmsl := m.NewSlice(int64(lo), int64(hi)), wm.NewSlice(int64(lo), int64(hi))
		equalRecords(t, "slice with metadata", msl, wmsl)
		type runner interface {
			MetaRun() (string, int32, int64, bool)
		}
		if src, part, first, ok := msl.(runner).MetaRun(); !ok || src != "src" || part != 3 || first != start+int64(lo) {
			t.Fatalf("a slice from row %d says its rows are %q/%d from %d (%v), want src/3 from %d", lo, src, part, first, ok, start+int64(lo))
		}
		if _, _, _, ok := mtk.(runner).MetaRun(); ok {
			t.Fatal("rows taken out of order say they are one run")
		}
		equalRecords(t, "with metadata", m, wm)
		st := connectors.StripMeta(m)
		if _, ok := st.(*typed.Batch[Exact]); !ok {
			t.Fatalf("StripMeta of a typed batch gave a %T", st)
		}
		equalRecords(t, "stripped", st, want)
		for _, rec := range []arrow.RecordBatch{msl, mtk} {
			got, err := c.Decode(rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantRows, err := c.Decode(map[arrow.RecordBatch]arrow.RecordBatch{msl: wmsl, mtk: wmtk}[rec], nil)
			if err != nil {
				t.Fatal(err)
			}
			if !equalRows(got, wantRows) {
				t.Fatalf("round %d: Decode of a typed batch gave other rows than Decode of its encoding", round)
			}
		}
		for _, rec := range []arrow.RecordBatch{want, b, sl, wsl, tk, wtk, m, wm, mtk, wmtk, msl, wmsl, st} {
			rec.Release()
		}
	}
}

// Reading rows in place encodes nothing; reading a column encodes it, once,
// whichever goroutine reads it first.
func TestBatchEncodesOnlyWhatIsRead(t *testing.T) {
	t.Parallel()
	c := codecOf[Exact](t)
	rows := exactRows(rand.New(rand.NewPCG(3, 4)), 100)
	b := typed.NewBatch(c, slices.Clone(rows))
	defer b.Release()
	inMemory := int64(len(rows)) * int64(reflect.TypeFor[Exact]().Size())
	got, ok := c.Rows(b)
	if !ok || !equalRows(got, rows) {
		t.Fatalf("Rows: %v, rows equal %v", ok, equalRows(got, rows))
	}
	if dec, err := c.Decode(b, nil); err != nil || !equalRows(dec, rows) {
		t.Fatalf("Decode: %v", err)
	}
	if n := b.ArrowBytes(); n != inMemory {
		t.Fatalf("after Rows and Decode the batch holds %d bytes, want the rows' %d: something encoded a column", n, inMemory)
	}
	col := c.Schema().FieldIndices("Name")[0]
	var wg sync.WaitGroup
	seen := make([]arrow.Array, 8)
	for g := range seen {
		wg.Go(func() {
			seen[g] = b.Column(col)
			_ = b.ArrowBytes()
		})
	}
	wg.Wait()
	for _, a := range seen[1:] {
		if a != seen[0] {
			t.Fatal("two readers of one column got two encodings of it")
		}
	}
	if n, want := b.ArrowBytes(), inMemory+int64(seen[0].Data().SizeInBytes()); n != want {
		t.Fatalf("after reading one column the batch holds %d bytes, want %d", n, want)
	}
}

// Own hands over the rows only of a batch nothing else holds.
func TestBatchOwn(t *testing.T) {
	t.Parallel()
	c := codecOf[Exact](t)
	rows := exactRows(rand.New(rand.NewPCG(5, 6)), 10)
	b := typed.NewBatch(c, rows)
	if _, ok := c.Own(b); !ok {
		t.Fatal("Own refused a batch with one reference")
	}
	b.Retain()
	if _, ok := c.Own(b); ok {
		t.Fatal("Own took the rows of a batch with two references")
	}
	b.Release()
	m := connectors.AddMeta(connectors.WithMeta(c.Schema()), b, "s", 0, 0) // shares b's rows
	if _, ok := c.Own(m); ok {
		t.Fatal("Own took the rows of a batch that shares them with another")
	}
	b.Release()
	if got, ok := c.Own(m); !ok || &got[0] != &rows[0] {
		t.Fatal("Own refused the last batch holding the rows")
	}
	sl := m.NewSlice(2, 5)
	if _, ok := c.Own(m); ok {
		t.Fatal("Own took rows a slice of them still holds")
	}
	sl.Release()
	m.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("releasing a released batch did not panic")
		}
	}()
	m.Release()
}

// Only codecs whose values come back unchanged make typed batches.
func TestExact(t *testing.T) {
	t.Parallel()
	type withPtr struct{ P *int }
	type withTime struct{ T time.Time }
	type withDur struct{ D time.Duration }
	type withBytes struct{ B []byte }
	type withSkipped struct {
		A int
		B int `arkflow:"-"`
	}
	type withPrivate struct {
		A int
		b int
	}
	_ = withPrivate{}.b
	for _, tc := range []struct {
		exact bool
		c     interface{ Exact() bool }
	}{
		{true, codecOf[Exact](t)}, {true, codecOf[Ints](t)}, {true, codecOf[Floats](t)},
		{true, codecOf[withTime](t)}, {true, codecOf[withDur](t)}, {true, codecOf[Times](t)},
		{false, codecOf[withPtr](t)},
		{false, codecOf[withBytes](t)}, {false, codecOf[withSkipped](t)}, {false, codecOf[withPrivate](t)},
		{false, codecOf[SQLNulls](t)}, {false, codecOf[Named](t)},
	} {
		if tc.c.Exact() != tc.exact {
			t.Errorf("%T: Exact() = %v, want %v", tc.c, !tc.exact, tc.exact)
		}
	}
}

// Times and durations travel as Go values once Normalize rounded them to
// their columns' units: the rows then equal what Decode gives back from
// Encode's batch of the rows as they were, and the batch's columns are
// Encode's.
func TestNormalizedTimesReadAsTheirEncoding(t *testing.T) {
	t.Parallel()
	c := codecOf[Times](t)
	r := rand.New(rand.NewPCG(7, 8))
	zones := []*time.Location{time.UTC, time.FixedZone("X", -7*3600+1800), time.Local}
	rows := make([]Times, 500)
	for i := range rows {
		at := func() time.Time {
			switch r.IntN(6) {
			case 0:
				return time.Now() // with a monotonic reading
			case 1:
				return time.Unix(r.Int64N(1<<33)-1<<32, r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
			}
			return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		}
		dur := func() time.Duration { return time.Duration(r.Int64() - r.Int64()) }
		rows[i] = Times{T: at(), TS: at(), TM: at(), TU: at(), TN: at(), D: dur(), DS: dur(), DU: dur(), DN: dur()}
	}
	rows[3].T = time.Time{} // the zero time, which a millisecond column holds
	want, err := c.Encode(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	decoded, err := c.Decode(want, nil)
	if err != nil {
		t.Fatal(err)
	}
	norm := slices.Clone(rows)
	if err := c.Normalize(norm); err != nil {
		t.Fatal(err)
	}
	for i := range norm {
		if norm[i] != decoded[i] {
			t.Fatalf("row %d: normalized %+v, decoded %+v", i, norm[i], decoded[i])
		}
	}
	b := typed.NewBatch(c, norm)
	defer b.Release()
	equalRecords(t, "normalized batch", b, want)
	zero := []Times{{TN: time.Time{}}} // a nanosecond column cannot hold year 1
	if err, eerr := c.Normalize(zero), encodeErr(c, zero); err == nil || eerr == nil || err.Error() != eerr.Error() {
		t.Fatalf("Normalize: %v; Encode: %v (want the same error)", err, eerr)
	}
}

func encodeErr[T any](c *typed.Codec[T], rows []T) error {
	rec, err := c.Encode(nil, rows)
	if rec != nil {
		rec.Release()
	}
	return err
}

// recycled is the row type of TestRowsGoBackOnlyWhenNoOneHoldsThem, its
// own so that no other test's batches share its codec's kept rows.
type recycled struct {
	ID  int64
	Tag string
}

// A batch's rows go back to its codec (MakeRows) only once every batch
// holding them is released and none handed them over (Own): random
// batches, slices, metadata and projections made, retained, released and
// taken, while every slice MakeRows returns is filled with new values and
// made a batch; every batch still held must read its rows unchanged, and
// the rows taken must stay as they were.
func TestRowsGoBackOnlyWhenNoOneHoldsThem(t *testing.T) {
	t.Parallel()
	c := codecOf[recycled](t)
	r := rand.New(rand.NewPCG(11, 12))
	type held struct {
		rec  arrow.RecordBatch
		want []recycled // the rows it must read
	}
	var live []held
	var taken [][2][]recycled // rows handed over, and a copy of them
	next, reused := int64(0), 0
	seen := map[*recycled]bool{} // first rows of every slice MakeRows returned
	fresh := func() held {
		n := 1 + r.IntN(40)
		rows := c.MakeRows(n)
		if seen[&rows[0]] {
			reused++
		}
		seen[&rows[0]] = true
		for i := range rows {
			next++
			rows[i] = recycled{ID: next, Tag: strconv.FormatInt(next, 36)}
		}
		return held{typed.NewBatch(c, rows), slices.Clone(rows)}
	}
	for step := 0; step < 4000; step++ {
		if len(live) == 0 {
			live = append(live, fresh())
			continue
		}
		k := r.IntN(len(live))
		h := live[k]
		switch r.IntN(7) {
		case 0, 1:
			live = append(live, fresh())
		case 2: // a slice sharing the rows
			i := r.IntN(len(h.want) + 1)
			j := i + r.IntN(len(h.want)-i+1)
			live = append(live, held{h.rec.NewSlice(int64(i), int64(j)), h.want[i:j]})
		case 3: // metadata, or a projection of T's columns, sharing the rows
			if b, ok := h.rec.(*typed.Batch[recycled]); ok && r.IntN(2) == 0 {
				if m, ok := b.Project([]int{0, 1}); ok {
					live = append(live, held{m, h.want})
				}
			} else if _, ok := h.rec.(*typed.Batch[recycled]); ok && h.rec.NumCols() == 2 {
				live = append(live, held{connectors.AddMeta(connectors.WithMeta(c.Schema()), h.rec, "s", 0, 0), h.want})
			}
		case 4:
			h.rec.Retain()
			live = append(live, h)
		case 5:
			if rows, ok := c.Own(h.rec); ok {
				taken = append(taken, [2][]recycled{rows, slices.Clone(rows)})
			}
			fallthrough
		default:
			h.rec.Release()
			live = slices.Delete(live, k, k+1)
		}
		for _, h := range live {
			rows, ok := c.Rows(h.rec)
			if !ok || !slices.Equal(rows, h.want) {
				t.Fatalf("step %d: a batch still held reads %v, want %v", step, rows, h.want)
			}
		}
		for _, tk := range taken {
			if !slices.Equal(tk[0], tk[1]) {
				t.Fatalf("step %d: rows handed over by Own were written: %v, want %v", step, tk[0], tk[1])
			}
		}
	}
	if reused == 0 {
		t.Fatal("MakeRows never handed out rows a released batch gave back")
	}
	t.Logf("%d of %d slices reused", reused, len(seen))
}
