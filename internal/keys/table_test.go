package keys

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// identity is a representation of a key value that is equal exactly when
// the table must treat two rows as the same key: nulls are one key, floats
// are compared by bits (so NaN is a key and -0 differs from +0).
func identity(t testing.TB, a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch x := a.(type) {
	case *array.Float64:
		return fmt.Sprintf("f%x", math.Float64bits(x.Value(i)))
	case *array.Float32:
		return fmt.Sprintf("f%x", math.Float32bits(x.Value(i)))
	case *array.Binary:
		return fmt.Sprintf("b%q", x.Value(i))
	case *array.LargeBinary:
		return fmt.Sprintf("b%q", x.Value(i))
	}
	return "v" + a.ValueStr(i)
}

func TestTableDenseIDsAndRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 22))
	for _, dt := range keyTypes {
		t.Run(dt.String(), func(t *testing.T) {
			tb, err := NewTable(dt)
			if err != nil {
				t.Fatal(err)
			}
			if !arrow.TypeEqual(tb.Type(), dt) {
				t.Fatalf("Type = %s", tb.Type())
			}
			seen := map[string]int32{} // identity -> expected id
			var allIDs []int32
			var batches []arrow.Array
			for batch := 0; batch < 4; batch++ {
				a := keyArray(t, rng, dt, 50, batch != 1)
				if batch == 3 {
					s := array.NewSlice(a, 10, 40)
					a.Release()
					a = s
				}
				batches = append(batches, a)
				ids := make([]int32, a.Len())
				if err := tb.IDs(a, ids); err != nil {
					t.Fatal(err)
				}
				for i, id := range ids {
					k := identity(t, a, i)
					want, ok := seen[k]
					if !ok {
						want = int32(len(seen)) // dense, in first-seen order
						seen[k] = want
					}
					if id != want {
						t.Fatalf("batch %d row %d (%s): id %d, want %d", batch, i, k, id, want)
					}
				}
				if tb.Len() != len(seen) {
					t.Fatalf("Len = %d, want %d", tb.Len(), len(seen))
				}
				allIDs = append(allIDs, ids...)
			}
			// Build reproduces every row of every batch, nulls included.
			out := tb.Build(allIDs)
			defer out.Release()
			if !arrow.TypeEqual(out.DataType(), dt) {
				t.Fatalf("Build type %s, want %s", out.DataType(), dt)
			}
			if out.Len() != len(allIDs) {
				t.Fatalf("Build len %d, want %d", out.Len(), len(allIDs))
			}
			j := 0
			for _, a := range batches {
				for i := 0; i < a.Len(); i++ {
					if g, w := identity(t, out, j), identity(t, a, i); g != w {
						t.Fatalf("Build row %d: %s, want %s", j, g, w)
					}
					j++
				}
				a.Release()
			}
			// Build of every id in order lists the distinct keys.
			ids := make([]int32, tb.Len())
			for i := range ids {
				ids[i] = int32(i)
			}
			keysCol := tb.Build(ids)
			defer keysCol.Release()
			distinct := map[string]bool{}
			for i := 0; i < keysCol.Len(); i++ {
				k := identity(t, keysCol, i)
				if distinct[k] {
					t.Fatalf("key %s listed twice", k)
				}
				distinct[k] = true
				if seen[k] != int32(i) {
					t.Fatalf("id %d builds %s, which has id %d", i, k, seen[k])
				}
			}
		})
	}
}

func TestTableNullIsItsOwnKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dt    arrow.DataType
		build func(array.Builder) // appends: zero value, null, zero value, null
	}{
		{arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("") }},
		{arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).Append(nil) }},
		{arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(0) }},
		{arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(false) }},
		{arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(0) }},
	}
	for _, tc := range cases {
		b := array.NewBuilder(memory.DefaultAllocator, tc.dt)
		b.AppendNull()
		tc.build(b)
		b.AppendNull()
		tc.build(b)
		a := b.NewArray()
		b.Release()
		tb, err := NewTable(tc.dt)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int32, 4)
		if err := tb.IDs(a, ids); err != nil {
			t.Fatal(err)
		}
		if ids[0] != 0 || ids[1] != 1 || ids[2] != 0 || ids[3] != 1 {
			t.Fatalf("%s: ids %v, want [0 1 0 1]", tc.dt, ids)
		}
		out := tb.Build([]int32{1, 0})
		if out.IsNull(0) || !out.IsNull(1) {
			t.Fatalf("%s: Build = %s", tc.dt, out)
		}
		out.Release()
		a.Release()
	}
}

func TestTableTypeMismatch(t *testing.T) {
	t.Parallel()
	tb, err := NewTable(arrow.PrimitiveTypes.Int64)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt32Builder(memory.DefaultAllocator)
	b.Append(1)
	a := b.NewArray()
	b.Release()
	defer a.Release()
	if err := tb.IDs(a, make([]int32, 1)); err == nil {
		t.Fatal("IDs of an int32 column in an int64 table succeeded")
	}
	if tb.Len() != 0 {
		t.Fatalf("Len = %d after a failed IDs", tb.Len())
	}
	// Timestamps of another unit are another type.
	ts, _ := NewTable(&arrow.TimestampType{Unit: arrow.Millisecond})
	tsb := array.NewTimestampBuilder(memory.DefaultAllocator, &arrow.TimestampType{Unit: arrow.Second})
	tsb.Append(1)
	tsa := tsb.NewArray()
	tsb.Release()
	defer tsa.Release()
	if err := ts.IDs(tsa, make([]int32, 1)); err == nil {
		t.Fatal("IDs of timestamp[s] in a timestamp[ms] table succeeded")
	}
}

func TestTableStringsSurviveBuffer(t *testing.T) {
	t.Parallel()
	// The table must copy strings: overwrite the batch's bytes after IDs.
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"alpha", "beta"}, nil)
	a := b.NewArray().(*array.String)
	b.Release()
	defer a.Release()
	tb, _ := NewTable(arrow.BinaryTypes.String)
	if err := tb.IDs(a, make([]int32, 2)); err != nil {
		t.Fatal(err)
	}
	data := a.ValueBytes()
	for i := range data {
		data[i] = 'X'
	}
	out := tb.Build([]int32{0, 1}).(*array.String)
	defer out.Release()
	if out.Value(0) != "alpha" || out.Value(1) != "beta" {
		t.Fatalf("Build = %q %q after the batch buffer changed", out.Value(0), out.Value(1))
	}
}

// AppendValueBytes gives, for every row of every key type, the bytes the
// table gives the row's key ID (Bytes), nulls included (none).
func TestAppendValueBytesMatchesTable(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(23, 24))
	for _, dt := range keyTypes {
		t.Run(dt.String(), func(t *testing.T) {
			tb, err := NewTable(dt)
			if err != nil {
				t.Fatal(err)
			}
			a := keyArray(t, rng, dt, 200, true)
			defer a.Release()
			ids := make([]int32, a.Len())
			if err := tb.IDs(a, ids); err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				want := tb.Bytes(id)
				got := AppendValueBytes([]byte("x"), a, i)
				if string(got) != "x"+string(want) {
					t.Fatalf("row %d (%s): %q, the table's bytes %q", i, identity(t, a, i), got[1:], want)
				}
			}
		})
	}
}

// The index through many keys and its growth: 60 k distinct strings and
// numbers drawn with repeats (and numbers that differ only in their high
// bits, which a weak hash would pile on one slot) get the IDs a map gives
// in first-seen order; Find answers for every key seen and none unseen.
func TestTableManyKeys(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(31, 32))
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64} {
		tb, err := NewTable(dt)
		if err != nil {
			t.Fatal(err)
		}
		model := map[int64]int32{}
		key := func(k int64) int64 { return k << 40 }
		for round := 0; round < 40; round++ {
			vals := make([]int64, 4096)
			for i := range vals {
				vals[i] = key(rng.Int64N(60_000))
			}
			var a arrow.Array
			if dt == arrow.BinaryTypes.String {
				b := array.NewStringBuilder(memory.DefaultAllocator)
				for _, v := range vals {
					b.Append(fmt.Sprint(v))
				}
				a = b.NewArray()
			} else {
				b := array.NewInt64Builder(memory.DefaultAllocator)
				b.AppendValues(vals, nil)
				a = b.NewArray()
			}
			ids := make([]int32, len(vals))
			if err := tb.IDs(a, ids); err != nil {
				t.Fatal(err)
			}
			a.Release()
			for i, v := range vals {
				want, ok := model[v]
				if !ok {
					want = int32(len(model))
					model[v] = want
				}
				if ids[i] != want {
					t.Fatalf("%s round %d: key %d got ID %d, want %d", dt, round, v, ids[i], want)
				}
			}
		}
		if tb.Len() != len(model) {
			t.Fatalf("%s: Len %d, want %d", dt, tb.Len(), len(model))
		}
		for k := int64(0); k < 61_000; k++ {
			v := key(k)
			b := be64(uint64(v))
			if dt == arrow.BinaryTypes.String {
				b = []byte(fmt.Sprint(v))
			}
			id, ok := tb.Find(b)
			want, seen := model[v]
			if ok != seen || (ok && id != want) {
				t.Fatalf("%s: Find(%d) = %d, %v; want %d, %v", dt, v, id, ok, want, seen)
			}
		}
	}
}

// String keys of every length around the short keys' bounds (0 to 40
// bytes), over an alphabet of three bytes (NUL among them, which pads
// nothing), many sharing their first or last bytes or differing only in
// the middle, get the IDs a map gives in first-seen order, through growth;
// Find answers for every key seen and none unseen, and Build gives every
// key back.
func TestTableStringLengths(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(41, 42))
	alphabet := []byte{'a', 'b', 0}
	var all []string
	var gen func(prefix []byte, n int)
	gen = func(prefix []byte, n int) { // every string of length <= 5
		all = append(all, string(prefix))
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(bytes.Clone(prefix), c), n-1)
		}
	}
	gen(nil, 5)
	for n := 6; n <= 40; n++ {
		for range 300 {
			b := bytes.Repeat([]byte{'a'}, n)
			for range 1 + rng.IntN(2) {
				b[rng.IntN(n)] = alphabet[rng.IntN(3)]
			}
			all = append(all, string(b))
		}
	}
	tb, err := NewTable(arrow.BinaryTypes.String)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]int32{}
	var order []string
	unseen := map[string]bool{}
	for round := 0; round < 20; round++ {
		bl := array.NewStringBuilder(memory.DefaultAllocator)
		var vals []string
		for range 1024 {
			s := all[rng.IntN(len(all))]
			if round == 0 && len(unseen) < 200 && rng.IntN(4) == 0 {
				unseen[s] = true
			}
			if unseen[s] {
				continue
			}
			vals = append(vals, s)
			bl.Append(s)
		}
		a := bl.NewArray()
		ids := make([]int32, len(vals))
		if err := tb.IDs(a, ids); err != nil {
			t.Fatal(err)
		}
		a.Release()
		for i, s := range vals {
			want, ok := model[s]
			if !ok {
				want = int32(len(model))
				model[s] = want
				order = append(order, s)
			}
			if ids[i] != want {
				t.Fatalf("round %d: key %q (%d bytes) got ID %d, want %d", round, s, len(s), ids[i], want)
			}
		}
	}
	for _, s := range all {
		id, ok := tb.Find([]byte(s))
		want, seen := model[s]
		if ok != seen || (ok && id != want) {
			t.Fatalf("Find(%q) = %d, %v; want %d, %v", s, id, ok, want, seen)
		}
	}
	if len(unseen) == 0 || len(model) < 2000 {
		t.Fatalf("%d keys seen, %d never: the test lost its reach", len(model), len(unseen))
	}
	ids := make([]int32, len(order))
	for i := range ids {
		ids[i] = int32(i)
	}
	col := tb.Build(ids).(*array.String)
	defer col.Release()
	for i, s := range order {
		if col.Value(i) != s {
			t.Fatalf("Build: ID %d is %q, want %q", i, col.Value(i), s)
		}
	}
}
