package eventtime_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
)

func timestampArray(unit arrow.TimeUnit, vals []int64, valid []bool) arrow.Array {
	b := array.NewTimestampBuilder(memory.DefaultAllocator, &arrow.TimestampType{Unit: unit, TimeZone: "UTC"})
	defer b.Release()
	for i, v := range vals {
		if valid != nil && !valid[i] {
			b.AppendNull()
			continue
		}
		b.Append(arrow.Timestamp(v))
	}
	return b.NewArray()
}

func int64Array(vals []int64, valid []bool) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, valid)
	return b.NewArray()
}

// millis runs eventtime.Millis on a column.
func millis(t *testing.T, col arrow.Array) ([]int64, []bool, bool, error) {
	t.Helper()
	dst, valid := make([]int64, col.Len()), make([]bool, col.Len())
	nulls, err := eventtime.Millis(col, "ts", dst, valid)
	return dst, valid, nulls, err
}

// Int64 is milliseconds; Timestamp s, ms, µs and ns give the same
// milliseconds for the same instant. Sub-millisecond digits are floored
// (towards the past, also for negative instants).
func TestMillisSameInstantInEveryUnit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ms   int64 // the instant in ms (whole seconds for the s column)
	}{
		{"epoch", 0},
		{"2024-01-02T03:04:05Z", 1_704_164_645_000},
		{"one second before the epoch", -1000},
		{"1900-01-01", -2_208_988_800_000},
	}
	for _, c := range cases {
		cols := map[string]arrow.Array{
			"int64": int64Array([]int64{c.ms}, nil),
			"s":     timestampArray(arrow.Second, []int64{c.ms / 1000}, nil),
			"ms":    timestampArray(arrow.Millisecond, []int64{c.ms}, nil),
			"us":    timestampArray(arrow.Microsecond, []int64{c.ms * 1000}, nil),
			"ns":    timestampArray(arrow.Nanosecond, []int64{c.ms * 1_000_000}, nil),
		}
		for unit, col := range cols {
			got, valid, nulls, err := millis(t, col)
			col.Release()
			if err != nil || nulls || !valid[0] || got[0] != c.ms {
				t.Errorf("%s in %s: got %d (valid %v, nulls %v, err %v), want %d", c.name, unit, got[0], valid[0], nulls, err, c.ms)
			}
		}
	}
}

// Digits below the millisecond are floored with Euclidean
// division, consistently with window boundaries.
func TestMillisFloorsSubMillisecondDigits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		unit arrow.TimeUnit
		in   []int64
		want []int64
	}{
		{arrow.Microsecond, []int64{1, 999, 1000, 1999, -1, -999, -1000, -1001}, []int64{0, 0, 1, 1, -1, -1, -1, -2}},
		{arrow.Nanosecond, []int64{1, 999_999, 1_000_000, -1, -999_999, -1_000_000, -1_000_001, math.MinInt64, math.MaxInt64},
			[]int64{0, 0, 1, -1, -1, -1, -2, eventtime.FloorDiv(math.MinInt64, 1_000_000), math.MaxInt64 / 1_000_000}},
		{arrow.Second, []int64{-1, 1, math.MaxInt64 / 1000, math.MinInt64 / 1000}, []int64{-1000, 1000, math.MaxInt64 / 1000 * 1000, math.MinInt64 / 1000 * 1000}},
	}
	for _, c := range cases {
		col := timestampArray(c.unit, c.in, nil)
		got, _, _, err := millis(t, col)
		col.Release()
		if err != nil {
			t.Fatalf("%s: %v", c.unit, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Millis(%v) = %v, want %v", c.unit, c.in, got, c.want)
		}
	}
	if got := eventtime.FloorDiv(math.MinInt64, 1_000_000); got != -9223372036855 {
		t.Errorf("FloorDiv(MinInt64, 1e6) = %d, want -9223372036855", got)
	}
}

// Nulls are reported in valid and by the nulls result; their
// values are not converted (a null slot holding an out-of-range value is no
// error).
func TestMillisNulls(t *testing.T) {
	t.Parallel()
	col := timestampArray(arrow.Second, []int64{5, 0, 7}, []bool{true, false, true})
	defer col.Release()
	got, valid, nulls, err := millis(t, col)
	if err != nil || !nulls || !slices.Equal(valid, []bool{true, false, true}) || got[0] != 5000 || got[2] != 7000 {
		t.Fatalf("got %v %v nulls=%v err=%v", got, valid, nulls, err)
	}
	// A null slot whose (garbage) value would overflow.
	b := array.NewTimestampBuilder(memory.DefaultAllocator, &arrow.TimestampType{Unit: arrow.Second})
	defer b.Release()
	b.AppendValues([]arrow.Timestamp{1, math.MaxInt64}, []bool{true, false})
	arr := b.NewArray()
	defer arr.Release()
	if _, valid, nulls, err := millis(t, arr); err != nil || !nulls || valid[1] {
		t.Fatalf("null slot with an out-of-range value: valid %v nulls %v err %v", valid, nulls, err)
	}
	// No nulls: every row valid.
	c2 := int64Array([]int64{1, 2}, nil)
	defer c2.Release()
	if _, valid, nulls, err := millis(t, c2); err != nil || nulls || !valid[0] || !valid[1] {
		t.Fatalf("no nulls: valid %v nulls %v err %v", valid, nulls, err)
	}
}

// A Timestamp(s) whose milliseconds overflow int64 is a
// *eventtime.TimeError naming the field, never a wrap-around or a panic.
func TestMillisOverflowNamesTheField(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{math.MaxInt64/1000 + 1, math.MinInt64/1000 - 1, math.MaxInt64, math.MinInt64} {
		col := timestampArray(arrow.Second, []int64{0, v}, nil)
		dst, valid := make([]int64, 2), make([]bool, 2)
		_, err := eventtime.Millis(col, "event_at", dst, valid)
		col.Release()
		var te *eventtime.TimeError
		if !errors.As(err, &te) {
			t.Fatalf("value %d s: got %v, want a *eventtime.TimeError", v, err)
		}
		if te.Field != "event_at" || te.Row != 1 || te.Value != v || te.Unit != "s" {
			t.Errorf("value %d s: TimeError %+v", v, te)
		}
		if !strings.Contains(err.Error(), `"event_at"`) {
			t.Errorf("the message does not name the field: %v", err)
		}
	}
}

// A column that cannot hold event time is an error naming the
// field; Supported tells which types can.
func TestMillisUnsupportedType(t *testing.T) {
	t.Parallel()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.Append("1")
	col := b.NewArray()
	b.Release()
	defer col.Release()
	_, err := eventtime.Millis(col, "when", make([]int64, 1), make([]bool, 1))
	if err == nil || !strings.Contains(err.Error(), `"when"`) {
		t.Fatalf("got %v, want an error naming the field", err)
	}
	for _, c := range []struct {
		t  arrow.DataType
		ok bool
	}{
		{arrow.PrimitiveTypes.Int64, true},
		{&arrow.TimestampType{Unit: arrow.Second}, true},
		{&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, true},
		{arrow.PrimitiveTypes.Int32, false},
		{arrow.PrimitiveTypes.Float64, false},
		{arrow.BinaryTypes.String, false},
		{arrow.FixedWidthTypes.Date32, false},
	} {
		if got := eventtime.Supported(c.t); got != c.ok {
			t.Errorf("Supported(%s) = %v, want %v", c.t, got, c.ok)
		}
	}
}

// Window boundaries floor negative times: -1 ms with size 1000 is
// in [-1000, 0), -1000 too, -1001 in [-2000, -1000).
func TestNegativeTumblingStarts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ t, size, want int64 }{
		{-1, 1000, -1000},
		{-1000, 1000, -1000},
		{-1001, 1000, -2000},
		{0, 1000, 0},
		{999, 1000, 0},
		{1000, 1000, 1000},
		{-1, 1, -1},
		{-7, 3, -9},
	} {
		if got := eventtime.TumblingStart(c.t, c.size); got != c.want {
			t.Errorf("TumblingStart(%d, %d) = %d, want %d", c.t, c.size, got, c.want)
		}
	}
	for _, c := range []struct{ a, b, want int64 }{
		{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 1000, -1}, {1, 1000, 0}, {-1000, 1000, -1}, {-1001, 1000, -2},
	} {
		if got := eventtime.FloorDiv(c.a, c.b); got != c.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// SlidingStarts enumerates every start whose window contains t,
// also when size is not a multiple of slide.
func TestSlidingStartsExamples(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t, size, slide int64
		want           []int64
	}{
		{4, 5, 2, []int64{0, 2, 4}},
		{0, 5, 2, []int64{-4, -2, 0}},
		{5, 5, 2, []int64{2, 4}},
		{-1, 5, 2, []int64{-4, -2}},
		{-5, 5, 2, []int64{-8, -6}},
		{6, 5, 2, []int64{2, 4, 6}},
		{10000, 10000, 2000, []int64{2000, 4000, 6000, 8000, 10000}},
		{9999, 10000, 2000, []int64{0, 2000, 4000, 6000, 8000}},
		{7, 3, 3, []int64{6}},
		{-1, 3, 3, []int64{-3}},
		{0, 1, 1, []int64{0}},
	} {
		got := eventtime.SlidingStarts(nil, c.t, c.size, c.slide)
		if !slices.Equal(got, c.want) {
			t.Errorf("SlidingStarts(t=%d, size=%d, slide=%d) = %v, want %v", c.t, c.size, c.slide, got, c.want)
		}
	}
	// It appends to dst.
	got := eventtime.SlidingStarts([]int64{99}, 4, 5, 2)
	if !slices.Equal(got, []int64{99, 0, 2, 4}) {
		t.Errorf("SlidingStarts appends: got %v", got)
	}
}

// bruteStarts enumerates window starts containing t by scanning multiples
// of slide around t.
func bruteStarts(t, size, slide int64) []int64 {
	var out []int64
	// Start a little before the smallest possible start, at a multiple.
	lo := t - size - slide
	lo -= ((lo % slide) + slide) % slide
	for s := lo; s <= t; s += slide {
		if s <= t && t < s+size {
			out = append(out, s)
		}
	}
	return out
}

// SlidingStarts, property test against a brute-force enumeration, for random t
// (negative too), sizes and slides (slide <= size).
func TestSlidingStartsProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 20000; i++ {
		size := 1 + r.Int64N(50)
		slide := 1 + r.Int64N(size)
		tm := r.Int64N(2000) - 1000
		if i%10 == 0 {
			tm = r.Int64N(1<<40) - 1<<39
		}
		got := eventtime.SlidingStarts(nil, tm, size, slide)
		want := bruteStarts(tm, size, slide)
		if !slices.Equal(got, want) {
			t.Fatalf("SlidingStarts(t=%d, size=%d, slide=%d) = %v, brute force %v", tm, size, slide, got, want)
		}
		// Every start is a multiple of slide, the windows contain t, and
		// the count is floor or ceil of size/slide.
		lo, hi := size/slide, (size+slide-1)/slide
		if n := int64(len(got)); n < lo || n > hi {
			t.Fatalf("t=%d size=%d slide=%d: %d windows, want %d..%d", tm, size, slide, n, lo, hi)
		}
		// Tumbling is the sliding case slide == size.
		if eventtime.TumblingStart(tm, size) != eventtime.SlidingStarts(nil, tm, size, size)[0] {
			t.Fatalf("TumblingStart(%d, %d) disagrees with SlidingStarts", tm, size)
		}
	}
}

// InRange: windows this close to the ends of int64 cannot be computed.
func TestInRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t, span int64
		ok      bool
	}{
		{0, 1000, true},
		{math.MaxInt64, 1, false},
		{math.MinInt64, 1, false},
		{math.MaxInt64 - 2000, 1000, false},
		{math.MaxInt64 - 2001, 1000, true},
		{math.MinInt64 + 2000, 1000, false},
		{math.MinInt64 + 2001, 1000, true},
	} {
		if got := eventtime.InRange(c.t, c.span); got != c.ok {
			t.Errorf("InRange(%d, %d) = %v, want %v", c.t, c.span, got, c.ok)
		}
	}
}
