package typed_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// poisonAllocator overwrites memory when it is freed, so a decoded value
// that still aliases a released batch shows up as garbage.
type poisonAllocator struct {
	*memory.CheckedAllocator
}

func newPoison() poisonAllocator {
	return poisonAllocator{memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (p poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xAA
	}
	p.CheckedAllocator.Free(b)
}

func (p poisonAllocator) Reallocate(size int, b []byte) []byte {
	out := p.Allocate(size)
	copy(out, b)
	p.Free(b)
	return out
}

// roundTrip encodes rows, checks the batch's schema and validity, releases
// it into a poisoning allocator and decodes it back. The batch is also
// decoded in slices, which start at an offset.
func roundTrip[T any](t *testing.T, rows []T) []T {
	t.Helper()
	c, err := typed.For[T]()
	if err != nil {
		t.Fatal(err)
	}
	mem := newPoison()
	defer mem.AssertSize(t, 0)
	rec, err := c.Encode(mem, rows)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Schema().Equal(c.Schema()) {
		t.Fatalf("schema %s, want %s", rec.Schema(), c.Schema())
	}
	if err := array.ValidateRecordFull(rec); err != nil {
		t.Fatalf("invalid batch: %v", err)
	}
	if int(rec.NumRows()) != len(rows) {
		t.Fatalf("%d rows, want %d", rec.NumRows(), len(rows))
	}
	var sliced []T
	if n := len(rows); n >= 2 {
		for _, cut := range [][2]int{{1, n}, {0, n - 1}, {n / 2, n}} {
			s := rec.NewSlice(int64(cut[0]), int64(cut[1]))
			got, err := c.Decode(s, nil)
			s.Release()
			if err != nil {
				t.Fatalf("slice %v: %v", cut, err)
			}
			sliced = append(sliced, got...)
		}
	}
	got, err := c.Decode(rec, nil)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rows); n >= 2 {
		want := append(append(append([]T(nil), got[1:]...), got[:n-1]...), got[n/2:]...)
		if !equalRows(sliced, want) {
			t.Fatalf("decoding slices: got %+v\nwant %+v", sliced, want)
		}
	}
	return got
}

// equalRows compares rows as values: NaNs equal themselves, and a nil
// []byte equals an empty one (both encode as an empty value).
func equalRows[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalValue(reflect.ValueOf(a[i]), reflect.ValueOf(b[i])) {
			return false
		}
	}
	return true
}

func equalValue(a, b reflect.Value) bool {
	if a.Type() == reflect.TypeFor[time.Time]() {
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y)
	case reflect.Slice:
		return bytes.Equal(a.Bytes(), b.Bytes())
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !a.Type().Field(i).IsExported() || a.Field(i).Kind() == reflect.Func {
				continue
			}
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

func check[T any](t *testing.T, rows []T) {
	t.Helper()
	if got := roundTrip(t, rows); !equalRows(got, rows) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, rows)
	}
}

func schemaOf[T any](t *testing.T) string {
	t.Helper()
	c, err := typed.For[T]()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, f := range c.Schema().Fields() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s", f.Name, f.Type)
		if f.Nullable {
			b.WriteString(" null")
		}
	}
	return b.String()
}

func ptr[V any](v V) *V { return &v }

type (
	UserID string
	Score  float64
	Flag   bool
	Raw    []byte
	Count  int32
	Big    uint64
)

type Ints struct {
	I   int
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	U   uint
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
}

type Floats struct {
	F32 float32
	F64 float64
}

type Scalars struct {
	B   bool
	S   string
	Bin []byte
}

type Times struct {
	T  time.Time
	TS time.Time `arkflow:",unit=s"`
	TM time.Time `arkflow:",unit=ms"`
	TU time.Time `arkflow:",unit=us"`
	TN time.Time `arkflow:",unit=ns"`
	D  time.Duration
	DS time.Duration `arkflow:",unit=s"`
	DU time.Duration `arkflow:",unit=us"`
	DN time.Duration `arkflow:",unit=ns"`
}

type Named struct {
	User  UserID
	Score Score
	Flag  Flag
	Raw   Raw
	N     Count
	Big   Big
	PUser *UserID
}

type Pointers struct {
	I   *int
	I8  *int8
	I16 *int16
	I32 *int32
	I64 *int64
	U   *uint
	U8  *uint8
	U16 *uint16
	U32 *uint32
	U64 *uint64
	F32 *float32
	F64 *float64
	B   *bool
	S   *string
	Bin *[]byte
	T   *time.Time
	TN  *time.Time `arkflow:",unit=ns"`
	D   *time.Duration
}

type SQLNulls struct {
	S   sql.NullString
	I64 sql.NullInt64
	I32 sql.NullInt32
	I16 sql.NullInt16
	B8  sql.NullByte
	F64 sql.NullFloat64
	B   sql.NullBool
	T   sql.NullTime
	G   sql.Null[uint32]
	GD  sql.Null[time.Duration] `arkflow:",unit=us"`
}

func TestSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  func(*testing.T) string
		want string
	}{
		{"ints", schemaOf[Ints], "I int64; I8 int8; I16 int16; I32 int32; I64 int64; U uint64; U8 uint8; U16 uint16; U32 uint32; U64 uint64"},
		{"floats", schemaOf[Floats], "F32 float32; F64 float64"},
		{"scalars", schemaOf[Scalars], "B bool; S utf8; Bin binary"},
		{"times", schemaOf[Times], "T timestamp[ms, tz=UTC]; TS timestamp[s, tz=UTC]; TM timestamp[ms, tz=UTC]; TU timestamp[us, tz=UTC]; TN timestamp[ns, tz=UTC]; " +
			"D duration[ms]; DS duration[s]; DU duration[us]; DN duration[ns]"},
		{"named", schemaOf[Named], "User utf8; Score float64; Flag bool; Raw binary; N int32; Big uint64; PUser utf8 null"},
		{"pointers", schemaOf[Pointers], "I int64 null; I8 int8 null; I16 int16 null; I32 int32 null; I64 int64 null; U uint64 null; U8 uint8 null; " +
			"U16 uint16 null; U32 uint32 null; U64 uint64 null; F32 float32 null; F64 float64 null; B bool null; S utf8 null; Bin binary null; " +
			"T timestamp[ms, tz=UTC] null; TN timestamp[ns, tz=UTC] null; D duration[ms] null"},
		{"sql", schemaOf[SQLNulls], "S utf8 null; I64 int64 null; I32 int32 null; I16 int16 null; B8 uint8 null; F64 float64 null; B bool null; " +
			"T timestamp[ms, tz=UTC] null; G uint32 null; GD duration[us] null"},
		{"tags and flattening", schemaOf[Flat], "id int64; Name utf8; Hidden utf8; UserID utf8; Time timestamp[ms, tz=UTC]; at timestamp[us, tz=UTC]; - utf8; Inner utf8; Extra bool; Note utf8 null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(t); got != tc.want {
				t.Errorf("schema\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Flat exercises tags, skipped fields and embedded flattening.
type Base struct {
	ID     int64 `arkflow:"id"`
	Name   string
	Hidden string // a column: Flat.Hidden is tagged "-", which hides nothing (as in encoding/json)
}

type inner struct {
	Inner string
	quiet int
}

type Deep struct {
	inner
	Extra bool
	Name  int // hidden by Base.Name, which is shallower (Flat.Base.Name against Flat.Wrap.Deep.Name)
}

type Wrap struct{ Deep }

type Flat struct {
	Base
	UserID
	time.Time
	At      time.Time `arkflow:"at,unit=us"`
	Dash    string    `arkflow:"-,"`
	Skipped string    `arkflow:"-"`
	private int
	Wrap
	Note   *string
	Hidden func() `arkflow:"-"`
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	min, max := math.MinInt, math.MaxInt
	ts := time.Date(2026, 11, 30, 12, 34, 56, 123456789, time.UTC)
	before := time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ints boundaries", func(t *testing.T) {
			check(t, []Ints{
				{},
				{I: min, I8: math.MinInt8, I16: math.MinInt16, I32: math.MinInt32, I64: math.MinInt64},
				{I: max, I8: math.MaxInt8, I16: math.MaxInt16, I32: math.MaxInt32, I64: math.MaxInt64,
					U: math.MaxUint, U8: math.MaxUint8, U16: math.MaxUint16, U32: math.MaxUint32, U64: math.MaxUint64},
				{I: -1, I8: -1, I16: -1, I32: -1, I64: -1, U: 1, U8: 1, U16: 1, U32: 1, U64: 1},
			})
		}},
		{"floats", func(t *testing.T) {
			check(t, []Floats{
				{}, {F32: float32(math.Copysign(0, -1)), F64: math.Copysign(0, -1)},
				{F32: float32(math.NaN()), F64: math.NaN()},
				{F32: float32(math.Inf(1)), F64: math.Inf(-1)},
				{F32: math.MaxFloat32, F64: math.MaxFloat64},
				{F32: math.SmallestNonzeroFloat32, F64: math.SmallestNonzeroFloat64},
			})
		}},
		{"bool string bytes", func(t *testing.T) {
			check(t, []Scalars{
				{}, {B: true, S: "héllo, 世界", Bin: []byte{0, 1, 2, 255}},
				{S: "", Bin: []byte{}}, {B: true, S: strings.Repeat("x", 1000), Bin: nil},
				{S: "\x00 nul", Bin: []byte("x")},
			})
		}},
		{"invalid utf-8 is kept as it is", func(t *testing.T) {
			c, _ := typed.For[Scalars]()
			rec, err := c.Encode(nil, []Scalars{{S: "\xff\xfe"}})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			if got, err := c.Decode(rec, nil); err != nil || got[0].S != "\xff\xfe" {
				t.Fatalf("got %+v, %v", got, err)
			}
		}},
		{"times in each unit", func(t *testing.T) {
			trunc := func(d time.Duration) time.Time { return ts.Truncate(d) }
			got := roundTrip(t, []Times{{T: ts, TS: ts, TM: ts, TU: ts, TN: ts, D: 1500 * time.Microsecond, DS: 2500 * time.Millisecond, DU: 1500 * time.Nanosecond, DN: 7}})
			want := Times{T: trunc(time.Millisecond), TS: trunc(time.Second), TM: trunc(time.Millisecond), TU: trunc(time.Microsecond), TN: ts,
				D: time.Millisecond, DS: 2 * time.Second, DU: time.Microsecond, DN: 7}
			if !equalRows(got, []Times{want}) {
				t.Fatalf("got %+v\nwant %+v", got[0], want)
			}
			if got[0].T.Location() != time.UTC {
				t.Errorf("decoded time in %v, want UTC", got[0].T.Location())
			}
		}},
		{"times before 1970 round down, durations toward zero", func(t *testing.T) {
			got := roundTrip(t, []Times{{T: before, TS: before, TU: before, TN: before, D: -1500 * time.Microsecond, DS: -1500 * time.Millisecond}})
			want := Times{T: before.Truncate(time.Millisecond), TS: before.Truncate(time.Second), TU: before.Truncate(time.Microsecond), TN: before,
				D: -time.Millisecond, DS: -time.Second}
			if !equalRows(got, []Times{want}) {
				t.Fatalf("got %+v\nwant %+v", got[0], want)
			}
		}},
		{"zero time in every unit but ns", func(t *testing.T) {
			type Z struct {
				T  time.Time
				TS time.Time `arkflow:",unit=s"`
				TU time.Time `arkflow:",unit=us"`
			}
			got := roundTrip(t, []Z{{}})
			if !got[0].T.IsZero() || !got[0].TS.IsZero() || !got[0].TU.IsZero() || got[0] != (Z{}) {
				t.Fatalf("got %+v, want zero times", got[0])
			}
		}},
		{"ns limits", func(t *testing.T) {
			type N struct {
				T time.Time     `arkflow:",unit=ns"`
				D time.Duration `arkflow:",unit=ns"`
			}
			check(t, []N{{T: time.Unix(0, math.MinInt64).UTC(), D: math.MinInt64}, {T: time.Unix(0, math.MaxInt64).UTC(), D: math.MaxInt64}})
		}},
		{"named types", func(t *testing.T) {
			check(t, []Named{{User: "ann", Score: 1.5, Flag: true, Raw: Raw("r"), N: -3, Big: math.MaxUint64, PUser: ptr(UserID("bob"))}, {}})
		}},
		{"pointers, set and nil", func(t *testing.T) {
			check(t, []Pointers{
				{I: ptr(math.MinInt), I8: ptr(int8(math.MinInt8)), I16: ptr(int16(-2)), I32: ptr(int32(math.MaxInt32)), I64: ptr(int64(math.MaxInt64)),
					U: ptr(uint(math.MaxUint)), U8: ptr(uint8(0)), U16: ptr(uint16(7)), U32: ptr(uint32(8)), U64: ptr(uint64(math.MaxUint64)),
					F32: ptr(float32(0.5)), F64: ptr(math.NaN()), B: ptr(false), S: ptr(""), Bin: ptr([]byte{}),
					T: ptr(ts.Truncate(time.Millisecond)), TN: ptr(ts), D: ptr(time.Hour)},
				{},
				{B: ptr(true), S: ptr("s"), Bin: ptr([]byte("b")), T: ptr(time.Time{})},
			})
		}},
		{"database/sql nulls", func(t *testing.T) {
			check(t, []SQLNulls{
				{S: sql.NullString{String: "x", Valid: true}, I64: sql.NullInt64{Int64: math.MinInt64, Valid: true}, I32: sql.NullInt32{Int32: 3, Valid: true},
					I16: sql.NullInt16{Int16: -4, Valid: true}, B8: sql.NullByte{Byte: 255, Valid: true}, F64: sql.NullFloat64{Float64: 2.5, Valid: true},
					B: sql.NullBool{Bool: true, Valid: true}, T: sql.NullTime{Time: ts.Truncate(time.Millisecond), Valid: true},
					G: sql.Null[uint32]{V: math.MaxUint32, Valid: true}, GD: sql.Null[time.Duration]{V: time.Microsecond, Valid: true}},
				{},
				{S: sql.NullString{Valid: true}, B: sql.NullBool{Valid: true}},
			})
		}},
		{"null values with Valid false are not kept", func(t *testing.T) {
			got := roundTrip(t, []SQLNulls{{S: sql.NullString{String: "dropped"}, I64: sql.NullInt64{Int64: 9}}})
			if got[0] != (SQLNulls{}) {
				t.Fatalf("got %+v, want zero", got[0])
			}
		}},
		{"tags, skipped and embedded fields", func(t *testing.T) {
			f := Flat{Base: Base{ID: 7, Name: "n"}, UserID: "u", Time: ts.Truncate(time.Millisecond), At: ts.Truncate(time.Microsecond), Dash: "d",
				Wrap: Wrap{Deep{inner: inner{Inner: "in"}, Extra: true}}, Note: ptr("note")}
			got := roundTrip(t, []Flat{f, {}})
			if !equalRows(got, []Flat{f, {}}) {
				t.Fatalf("got %+v\nwant %+v", got[0], f)
			}
		}},
		{"no rows", func(t *testing.T) {
			if got := roundTrip(t, []Pointers{}); len(got) != 0 {
				t.Fatalf("got %d rows", len(got))
			}
			if got := roundTrip[Scalars](t, nil); len(got) != 0 {
				t.Fatalf("got %d rows", len(got))
			}
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// Skipped, unexported and hidden fields of decoded rows are zero even when
// dst's spare capacity held other rows.
func TestDecodeZeroesSkippedFields(t *testing.T) {
	t.Parallel()
	c, err := typed.For[Flat]()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Encode(nil, []Flat{{Dash: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	dst := make([]Flat, 1, 2)
	dst[:2][1] = Flat{Skipped: "stale", private: 1, Base: Base{Hidden: "stale"}, Wrap: Wrap{Deep{inner: inner{quiet: 1}, Name: 3}}}
	got, err := c.Decode(rec, dst[:0])
	if err != nil {
		t.Fatal(err)
	}
	if got, err = c.Decode(rec, got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || &got[0] != &dst[0] {
		t.Fatalf("decode did not append in place: len %d", len(got))
	}
	if got[1].Skipped != "" || got[1].private != 0 || got[1].Hidden != nil || got[1].Base.Hidden != "" || got[1].quiet != 0 || got[1].Deep.Name != 0 {
		t.Fatalf("stale fields kept: %+v", got[1])
	}
}

func TestDecodeAppends(t *testing.T) {
	t.Parallel()
	type R struct{ N int64 }
	c, _ := typed.For[R]()
	rec, err := c.Encode(nil, []R{{1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	dst := []R{{-1}}
	got, err := c.Decode(rec, dst)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = c.Decode(rec, got); err != nil {
		t.Fatal(err)
	}
	if want := []R{{-1}, {1}, {2}, {1}, {2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// On an error dst comes back as it was.
	bad := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 3)
	defer bad.Release()
	if got2, err := c.Decode(bad, got); err == nil || len(got2) != len(got) {
		t.Fatalf("decode of a batch without N: %v, len %d", err, len(got2))
	}
	if _, err := c.Decode(nil, nil); err == nil {
		t.Fatal("decode of nil batch: no error")
	}
}

type Geo struct{ Lat, Lon float64 }

func refuse[T any](t *testing.T) error {
	t.Helper()
	c, err := typed.For[T]()
	if err == nil {
		t.Fatalf("For[%T] = %v, want an error", *new(T), c.Schema())
	}
	return err
}

func TestRefused(t *testing.T) {
	t.Parallel()
	type Click struct {
		User string
		Geo  Geo
	}
	type PGeo struct{ Geo *Geo }
	type Geos struct{ Geos []Geo }
	type Ints struct{ Tags []int }
	type Map struct{ M map[string]int }
	type Chan struct{ C chan int }
	type Func struct{ F func() }
	type Iface struct{ V any }
	type Array struct{ A [4]byte }
	type Complex struct{ C complex128 }
	type Uintptr struct{ P uintptr }
	type Unsafe struct{ P unsafe.Pointer }
	type PP struct{ P **int }
	type PNull struct{ N *sql.NullString }
	type EmbeddedPtr struct{ *Base }
	type TaggedEmbedded struct {
		Base `arkflow:"base"`
	}
	type DupTags struct {
		A int `arkflow:"x"`
		B int `arkflow:"x"`
	}
	type B1 struct{ ID int }
	type B2 struct{ ID string }
	type DupEmbedded struct {
		B1
		B2
	}
	type Opt struct {
		T time.Time `arkflow:"t,zone=UTC"`
	}
	type Unit struct {
		T time.Time `arkflow:"t,unit=h"`
	}
	type UnitInt struct {
		N int64 `arkflow:",unit=ms"`
	}
	type None struct {
		a int
		B int `arkflow:"-"`
	}
	type EmbeddedOpts struct {
		Base `arkflow:",unit=ms"`
	}
	for _, tc := range []struct {
		name string
		err  func(*testing.T) error
		want string
	}{
		{"nested struct", refuse[Click], `typed: Click.Geo (typed_test.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"`},
		{"pointer to struct", refuse[PGeo], `typed: PGeo.Geo (*typed_test.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"`},
		{"slice of structs", refuse[Geos], `typed: Geos.Geos ([]typed_test.Geo): slices are not supported (only []byte); tag it arkflow:"-" to skip it`},
		{"slice of ints", refuse[Ints], `typed: Ints.Tags ([]int): slices are not supported (only []byte); tag it arkflow:"-" to skip it`},
		{"map", refuse[Map], `typed: Map.M (map[string]int): maps are not supported; tag it arkflow:"-" to skip it`},
		{"chan", refuse[Chan], `typed: Chan.C (chan int): channels are not supported; tag it arkflow:"-" to skip it`},
		{"func", refuse[Func], `typed: Func.F (func()): funcs are not supported; tag it arkflow:"-" to skip it`},
		{"interface", refuse[Iface], `typed: Iface.V (interface {}): interfaces are not supported; tag it arkflow:"-" to skip it`},
		{"array", refuse[Array], `typed: Array.A ([4]uint8): arrays are not supported (only []byte); tag it arkflow:"-" to skip it`},
		{"complex", refuse[Complex], `typed: Complex.C (complex128): complex128 is not supported; tag it arkflow:"-" to skip it`},
		{"uintptr", refuse[Uintptr], `typed: Uintptr.P (uintptr): uintptr is not supported; tag it arkflow:"-" to skip it`},
		{"unsafe.Pointer", refuse[Unsafe], `typed: Unsafe.P (unsafe.Pointer): unsafe.Pointer is not supported; tag it arkflow:"-" to skip it`},
		{"pointer to pointer", refuse[PP], `typed: PP.P (**int): pointers to pointers are not supported; tag it arkflow:"-" to skip it`},
		{"pointer to sql null", refuse[PNull], `typed: PNull.N (*sql.NullString): a pointer to a database/sql Null type is doubly nullable; use the Null type by value`},
		{"embedded pointer", refuse[EmbeddedPtr], `typed: EmbeddedPtr.Base (*typed_test.Base): embedded pointers to structs are not supported; embed typed_test.Base by value or tag it arkflow:"-"`},
		{"tagged embedded struct is a nested struct", refuse[TaggedEmbedded], `typed: TaggedEmbedded.Base (typed_test.Base): nested structs are not supported; flatten it or tag it arkflow:"-"`},
		{"options on an embedded struct", refuse[EmbeddedOpts], `typed: EmbeddedOpts.Base (typed_test.Base): tag options on an embedded struct have no effect; put them on its fields`},
		{"duplicate tags", refuse[DupTags], `typed: DupTags.A and DupTags.B both map to column "x"; rename one with an arkflow:"name" tag or skip one with arkflow:"-"`},
		{"duplicate embedded", refuse[DupEmbedded], `typed: DupEmbedded.B1.ID and DupEmbedded.B2.ID both map to column "ID"; rename one with an arkflow:"name" tag or skip one with arkflow:"-"`},
		{"unknown option", refuse[Opt], `typed: Opt.T (time.Time): unknown tag option "zone=UTC" (the options: unit=s|ms|us|ns)`},
		{"bad unit", refuse[Unit], `typed: Unit.T (time.Time): unit="h" is not one of s, ms, us, ns`},
		{"unit on an int", refuse[UnitInt], `typed: UnitInt.N (int64): unit= applies only to time.Time and time.Duration fields`},
		{"no columns", refuse[None], `typed: typed_test.None has no columns: it has no exported fields, or all are tagged arkflow:"-"`},
		{"not a struct", refuse[int], `typed: rows must be structs, not int`},
		{"pointer to struct rows", refuse[*Geo], `typed: rows must be structs, not *typed_test.Geo`},
		{"anonymous struct names its path from struct", refuse[struct{ G Geo }], `typed: struct.G (typed_test.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err(t).Error(); got != tc.want {
				t.Errorf("error\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	// The refusal is cached like a codec, and stays the same.
	if err1, err2 := refuse[Click](t), refuse[Click](t); err1.Error() != err2.Error() {
		t.Fatal(err1, err2)
	}
}

// batch builds a record batch from columns given as JSON, one per name.
func batch(t *testing.T, cols ...any) arrow.RecordBatch {
	t.Helper()
	var fields []arrow.Field
	var arrs []arrow.Array
	for i := 0; i < len(cols); i += 3 {
		name, dt := cols[i].(string), cols[i+1].(arrow.DataType)
		var a arrow.Array
		switch v := cols[i+2].(type) {
		case arrow.Array:
			a = v
		case string:
			var err error
			if a, _, err = array.FromJSON(memory.DefaultAllocator, dt, strings.NewReader(v)); err != nil {
				t.Fatalf("column %s: %v", name, err)
			}
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: true})
		arrs = append(arrs, a)
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(arrs[0].Len()))
	for _, a := range arrs {
		a.Release()
	}
	t.Cleanup(rec.Release)
	return rec
}

func decode[T any](t *testing.T, rec arrow.RecordBatch) ([]T, error) {
	t.Helper()
	c, err := typed.For[T]()
	if err != nil {
		t.Fatal(err)
	}
	return c.Decode(rec, nil)
}

func decodeOK[T any](t *testing.T, rec arrow.RecordBatch, want ...T) {
	t.Helper()
	got, err := decode[T](t, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !equalRows(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func decodeErr[T any](t *testing.T, rec arrow.RecordBatch, want string) {
	t.Helper()
	_, err := decode[T](t, rec)
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
}

func dictOf(t *testing.T, values string, indices string) (arrow.DataType, arrow.Array) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	a, err := array.DictArrayFromJSON(memory.DefaultAllocator, dt, indices, values)
	if err != nil {
		t.Fatal(err)
	}
	return dt, a
}

func TestDecodeLenient(t *testing.T) {
	t.Parallel()
	P := arrow.PrimitiveTypes
	ts := func(u arrow.TimeUnit) arrow.DataType { return &arrow.TimestampType{Unit: u, TimeZone: "UTC"} }
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"narrower signed ints into wider", func(t *testing.T) {
			type R struct {
				A int64
				B int64
				C int32
				D int
				E int16
			}
			rec := batch(t, "A", P.Int8, "[-128]", "B", P.Int32, "[-2147483648]", "C", P.Int16, "[-32768]", "D", P.Int64, "[-9223372036854775808]", "E", P.Int8, "[127]")
			decodeOK(t, rec, R{A: -128, B: math.MinInt32, C: math.MinInt16, D: math.MinInt64, E: 127})
		}},
		{"unsigned into wider unsigned and signed", func(t *testing.T) {
			type R struct {
				A uint64
				B int64
				C int16
				D uint
				E uint32
			}
			rec := batch(t, "A", P.Uint32, "[4294967295]", "B", P.Uint32, "[4294967295]", "C", P.Uint8, "[255]", "D", P.Uint64, "[18446744073709551615]", "E", P.Uint16, "[65535]")
			decodeOK(t, rec, R{A: math.MaxUint32, B: math.MaxUint32, C: 255, D: math.MaxUint64, E: math.MaxUint16})
		}},
		{"int32 column into *int64 and sql.NullInt64", func(t *testing.T) {
			type R struct {
				A *int64
				B sql.NullInt64
			}
			rec := batch(t, "A", P.Int32, "[1, null]", "B", P.Int32, "[null, 2]")
			decodeOK(t, rec, R{A: ptr(int64(1))}, R{B: sql.NullInt64{Int64: 2, Valid: true}})
		}},
		{"float32 into float64", func(t *testing.T) {
			type R struct{ F float64 }
			decodeOK(t, batch(t, "F", P.Float32, "[1.5, -0.25]"), R{1.5}, R{-0.25})
		}},
		{"timestamps of every unit into time.Time", func(t *testing.T) {
			type R struct{ S, MS, US, NS, Naive time.Time }
			rec := batch(t, "S", ts(arrow.Second), "[1767323045]", "MS", ts(arrow.Millisecond), "[1767323045001]",
				"US", ts(arrow.Microsecond), "[1767323045000002]", "NS", ts(arrow.Nanosecond), "[1767323045000000003]",
				"Naive", &arrow.TimestampType{Unit: arrow.Millisecond}, "[-1]")
			decodeOK(t, rec, R{S: at, MS: at.Add(time.Millisecond), US: at.Add(2 * time.Microsecond), NS: at.Add(3), Naive: time.UnixMilli(-1).UTC()})
		}},
		{"timestamp and duration into int64 as is", func(t *testing.T) {
			type R struct {
				T int64
				D int64
			}
			decodeOK(t, batch(t, "T", ts(arrow.Microsecond), "[1767323045000002]", "D", &arrow.DurationType{Unit: arrow.Second}, "[5]"), R{T: 1767323045000002, D: 5})
		}},
		{"durations of every unit", func(t *testing.T) {
			type R struct {
				S  time.Duration
				NS *time.Duration
			}
			decodeOK(t, batch(t, "S", &arrow.DurationType{Unit: arrow.Second}, "[-3, 9223372036]", "NS", &arrow.DurationType{Unit: arrow.Nanosecond}, "[7, null]"),
				R{S: -3 * time.Second, NS: ptr(time.Duration(7))}, R{S: 9223372036 * time.Second})
		}},
		{"large, view and dictionary strings", func(t *testing.T) {
			type R struct {
				L string
				V string
				D string
				P *string
				N sql.NullString
			}
			dt, dict := dictOf(t, `["ann", "bob", null]`, "[1, 0, 1]")
			pdt, pdict := dictOf(t, `["x", null]`, "[0, null, 1]")
			rec := batch(t, "L", arrow.BinaryTypes.LargeString, `["a", "", "ccc"]`, "V", arrow.BinaryTypes.StringView, `["a string longer than twelve bytes", "v", ""]`,
				"D", dt, dict, "P", pdt, pdict, "N", arrow.BinaryTypes.LargeString, `[null, "n", null]`)
			decodeOK(t, rec,
				R{L: "a", V: "a string longer than twelve bytes", D: "bob", P: ptr("x")},
				R{L: "", V: "v", D: "ann", N: sql.NullString{String: "n", Valid: true}},
				R{L: "ccc", V: "", D: "bob"})
		}},
		{"binary of every layout and strings into []byte", func(t *testing.T) {
			type R struct {
				B, L, V, S, LS []byte
				P              *[]byte
			}
			rec := batch(t, "B", arrow.BinaryTypes.Binary, `["AAE="]`, "L", arrow.BinaryTypes.LargeBinary, `["Ag=="]`, "V", arrow.BinaryTypes.BinaryView, `["Aw=="]`,
				"S", arrow.BinaryTypes.String, `["s"]`, "LS", arrow.BinaryTypes.LargeString, `[""]`, "P", arrow.BinaryTypes.Binary, `[null]`)
			decodeOK(t, rec, R{B: []byte{0, 1}, L: []byte{2}, V: []byte{3}, S: []byte("s"), LS: []byte{}})
		}},
		{"names match ignoring case when no column matches exactly", func(t *testing.T) {
			type R struct {
				User   string
				user   int64 // unexported: not a column
				Clicks int64
			}
			decodeOK(t, batch(t, "user", arrow.BinaryTypes.String, `["ann"]`, "CLICKS", P.Int64, "[3]", "Clicks", P.Int32, "[4]"), R{User: "ann", Clicks: 4})
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// A window's output, as the window operator builds it, decodes into a
// struct that names the columns it wants and ignores the rest.
func TestDecodeWindowResult(t *testing.T) {
	t.Parallel()
	type Clicks struct {
		User   string
		Start  time.Time `arkflow:"window_start"`
		End    time.Time `arkflow:"window_end"`
		Clicks int64
		Total  float64
	}
	tsMS := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	rec := batch(t,
		"user", arrow.BinaryTypes.String, `["ann", "bob"]`,
		"window_start", tsMS, "[1767225600000, 1767225600000]",
		"window_end", tsMS, "[1767225660000, 1767225660000]",
		"clicks", arrow.PrimitiveTypes.Int64, "[3, 1]",
		"total", arrow.PrimitiveTypes.Float64, "[12.5, 0.5]",
		"__arkflow_window_update", arrow.FixedWidthTypes.Boolean, "[false, true]",
		"__meta_offset", arrow.PrimitiveTypes.Int64, "[1, 2]")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	decodeOK(t, rec, Clicks{"ann", start, end, 3, 12.5}, Clicks{"bob", start, end, 1, 0.5})
}

func TestDecodeMismatch(t *testing.T) {
	t.Parallel()
	P := arrow.PrimitiveTypes
	tsMS := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	type I32 struct{ N int32 }
	type U32 struct{ N uint32 }
	type I64 struct{ N int64 }
	type PI64 struct{ N *int64 }
	type F32 struct{ N float32 }
	type S struct{ N string }
	type T struct{ N time.Time }
	type D struct{ N time.Duration }
	type B struct{ N bool }
	type Int struct{ N int }
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"wider int", func(t *testing.T) {
			decodeErr[I32](t, batch(t, "N", P.Int64, "[1]"), `typed: I32.N (int32): column "N" is int64, which cannot be stored in int32`)
		}},
		{"signed into unsigned", func(t *testing.T) {
			decodeErr[U32](t, batch(t, "N", P.Int8, "[1]"), `typed: U32.N (uint32): column "N" is int8, which cannot be stored in uint32`)
		}},
		{"uint64 into int64", func(t *testing.T) {
			decodeErr[PI64](t, batch(t, "N", P.Uint64, "[1]"), `typed: PI64.N (*int64): column "N" is uint64, which cannot be stored in *int64`)
		}},
		{"float64 into float32", func(t *testing.T) {
			decodeErr[F32](t, batch(t, "N", P.Float64, "[1]"), `typed: F32.N (float32): column "N" is float64, which cannot be stored in float32`)
		}},
		{"int into float", func(t *testing.T) {
			decodeErr[F32](t, batch(t, "N", P.Int8, "[1]"), `typed: F32.N (float32): column "N" is int8, which cannot be stored in float32`)
		}},
		{"string into int", func(t *testing.T) {
			decodeErr[I64](t, batch(t, "N", arrow.BinaryTypes.String, `["1"]`), `typed: I64.N (int64): column "N" is utf8, which cannot be stored in int64`)
		}},
		{"binary into string", func(t *testing.T) {
			decodeErr[S](t, batch(t, "N", arrow.BinaryTypes.Binary, `["AA=="]`), `typed: S.N (string): column "N" is binary, which cannot be stored in string`)
		}},
		{"int64 into time", func(t *testing.T) {
			decodeErr[T](t, batch(t, "N", P.Int64, "[1]"), `typed: T.N (time.Time): column "N" is int64, which cannot be stored in time.Time`)
		}},
		{"timestamp into duration", func(t *testing.T) {
			decodeErr[D](t, batch(t, "N", tsMS, "[1]"), `typed: D.N (time.Duration): column "N" is timestamp[ms, tz=UTC], which cannot be stored in time.Duration`)
		}},
		{"timestamp into int", func(t *testing.T) {
			decodeErr[I32](t, batch(t, "N", tsMS, "[1]"), `typed: I32.N (int32): column "N" is timestamp[ms, tz=UTC], which cannot be stored in int32`)
		}},
		{"int into bool", func(t *testing.T) {
			decodeErr[B](t, batch(t, "N", P.Uint8, "[1]"), `typed: B.N (bool): column "N" is uint8, which cannot be stored in bool`)
		}},
		{"missing column", func(t *testing.T) {
			decodeErr[Int](t, batch(t, "user", arrow.BinaryTypes.String, `["a"]`, "__meta_offset", P.Int64, "[1]"),
				`typed: Int.N (int): the batch has no column "N" (its columns: user, __meta_offset)`)
		}},
		{"ambiguous columns", func(t *testing.T) {
			decodeErr[Int](t, batch(t, "n", P.Int64, "[1]", "n", P.Int64, "[1]"),
				`typed: Int.N (int): columns "n", "n" all match "N"; rename them or tag the field with the exact name`)
		}},
		{"null into a plain field", func(t *testing.T) {
			decodeErr[I64](t, batch(t, "N", P.Int32, "[1, 2, null]"), `typed: I64.N (int64): row 2 is null; make the field a pointer or a database/sql Null type to accept nulls`)
		}},
		{"null string into a plain field", func(t *testing.T) {
			decodeErr[S](t, batch(t, "N", arrow.BinaryTypes.String, `[null]`), `typed: S.N (string): row 0 is null; make the field a pointer or a database/sql Null type to accept nulls`)
		}},
		{"null dictionary value into a plain field", func(t *testing.T) {
			dt, d := dictOf(t, `["a", null]`, "[0, 1]")
			decodeErr[S](t, batch(t, "N", dt, d), `typed: S.N (string): row 1 is null; make the field a pointer or a database/sql Null type to accept nulls`)
		}},
		{"null time and bool", func(t *testing.T) {
			decodeErr[T](t, batch(t, "N", tsMS, "[1, null]"), `typed: T.N (time.Time): row 1 is null; make the field a pointer or a database/sql Null type to accept nulls`)
			decodeErr[B](t, batch(t, "N", arrow.FixedWidthTypes.Boolean, "[null]"), `typed: B.N (bool): row 0 is null; make the field a pointer or a database/sql Null type to accept nulls`)
		}},
		{"duration overflow", func(t *testing.T) {
			decodeErr[D](t, batch(t, "N", &arrow.DurationType{Unit: arrow.Second}, "[0, 9223372037]"), `typed: D.N (time.Duration): row 1: 9223372037s does not fit in a time.Duration (±292 years)`)
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// Check finds, from the schema alone, what Decode would refuse in any
// batch of it, with Decode's error, a misspelt column named with the
// column it probably is.
func TestCheck(t *testing.T) {
	t.Parallel()
	type Row struct {
		User   string  `arkflow:"user"`
		Amount float64 `arkflow:"amount"`
		Coupon *string `arkflow:"coupon"`
	}
	c, err := typed.For[Row]()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }
	str := func(name string) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
	}
	f64 := arrow.Field{Name: "amount", Type: arrow.PrimitiveTypes.Float64}
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
		want   string
	}{
		{"fits", schema(str("user"), f64, str("coupon"), arrow.Field{Name: "__meta_offset", Type: arrow.PrimitiveTypes.Int64}), ""},
		{"another case", schema(str("USER"), f64, str("Coupon")), ""},
		{"misspelt column", schema(str("usr"), f64, str("coupon")),
			`typed: Row.User (string): the batch has no column "user" (its columns: usr, amount, coupon); did you mean "usr"?`},
		{"missing nullable column", schema(str("user"), f64),
			`typed: Row.Coupon (*string): the batch has no column "coupon" (its columns: user, amount)`},
		{"column too wide", schema(str("user"), arrow.Field{Name: "amount", Type: arrow.BinaryTypes.String}, str("coupon")),
			`typed: Row.Amount (float64): column "amount" is utf8, which cannot be stored in float64`},
		{"nil", nil, "typed: Check of a nil schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Check(tc.schema)
			if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
				t.Fatalf("Check\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestEncodeTimeOutOfRange(t *testing.T) {
	t.Parallel()
	type R struct {
		T time.Time `arkflow:"t,unit=ns"`
	}
	c, _ := typed.For[R]()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Second)
	_, err := c.Encode(mem, []R{{time.Unix(0, 0)}, {year1}})
	want := `typed: R.T (time.Time): row 1: 0001-01-01T00:00:01Z is outside what timestamp[ns, tz=UTC] can hold; tag the field with a coarser unit (arkflow:",unit=ms")`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	// The zero time.Time is "no time" more often than a year-1 instant.
	_, err = c.Encode(mem, []R{{time.Unix(0, 0)}, {}})
	want = `typed: R.T (time.Time): row 1 is the zero time.Time, which timestamp[ns, tz=UTC] cannot hold: set it, or make the field a *time.Time and leave it nil for no time`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	if _, err := c.Encode(mem, []R{{time.Unix(0, math.MaxInt64).Add(1)}}); err == nil {
		t.Fatal("one ns past the limit: no error")
	}
	if _, err := c.Encode(mem, []R{{time.Unix(0, math.MinInt64).Add(-1)}}); err == nil {
		t.Fatal("one ns before the limit: no error")
	}
}

// Rows is every supported type, for the property test.
type Rows struct {
	Base
	I   int
	I8  int8
	U16 uint16
	U64 uint64
	F32 float32
	F64 float64
	B   bool
	S   UserID
	Bin []byte
	T   time.Time `arkflow:",unit=us"`
	D   time.Duration
	PI  *int32
	PS  *string
	PB  *[]byte
	PT  *time.Time `arkflow:",unit=ns"`
	NS  sql.NullString
	NF  sql.NullFloat64
	NT  sql.NullTime `arkflow:",unit=s"`
	NB  sql.NullBool
}

func randomRow(r *rand.Rand) Rows {
	str := func() string {
		b := make([]rune, r.IntN(20))
		for i := range b {
			b[i] = rune(r.IntN(0x800))
		}
		return string(b)
	}
	bin := func() []byte {
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	maybe := func() bool { return r.IntN(3) > 0 }
	tm := func(unit time.Duration) time.Time {
		return time.Unix(0, r.Int64N(1<<62)-1<<61).UTC().Truncate(unit)
	}
	row := Rows{
		Base: Base{ID: r.Int64(), Name: str()},
		I:    int(r.Uint64()), I8: int8(r.Uint32()), U16: uint16(r.Uint32()), U64: r.Uint64(),
		F32: float32(r.NormFloat64()), F64: math.Float64frombits(r.Uint64()),
		B: r.IntN(2) == 0, S: UserID(str()), Bin: bin(),
		T: tm(time.Microsecond), D: time.Duration(r.Int64()).Truncate(time.Millisecond),
	}
	if maybe() {
		row.PI = ptr(int32(r.Uint32()))
	}
	if maybe() {
		row.PS = ptr(str())
	}
	if maybe() {
		row.PB = ptr(bin())
	}
	if maybe() {
		row.PT = ptr(tm(1))
	}
	if maybe() {
		row.NS = sql.NullString{String: str(), Valid: true}
	}
	if maybe() {
		row.NF = sql.NullFloat64{Float64: r.Float64(), Valid: true}
	}
	if maybe() {
		row.NT = sql.NullTime{Time: tm(time.Second), Valid: true}
	}
	if maybe() {
		row.NB = sql.NullBool{Bool: r.IntN(2) == 0, Valid: true}
	}
	return row
}

// Random rows round-trip, whole and in slices.
func TestRandomRoundTrip(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 17))
	for iter := 0; iter < 200; iter++ {
		rows := make([]Rows, r.IntN(70))
		for i := range rows {
			rows[i] = randomRow(r)
		}
		if got := roundTrip(t, rows); !equalRows(got, rows) {
			for i := range rows {
				if !equalRows(got[i:i+1], rows[i:i+1]) {
					t.Fatalf("seed %d, iteration %d, row %d:\n got %+v\nwant %+v", seed, iter, i, got[i], rows[i])
				}
			}
		}
	}
}

// One codec serves goroutines at once, including batches of different
// schemas that rebind it.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	type R struct {
		N int64
		S string
	}
	rec32 := batch(t, "N", arrow.PrimitiveTypes.Int32, "[1]", "S", arrow.BinaryTypes.String, `["a"]`)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := typed.For[R]()
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < 200; i++ {
				rec, err := c.Encode(nil, []R{{int64(i), "x"}})
				if err != nil {
					t.Error(err)
					return
				}
				got, err := c.Decode(rec, nil)
				rec.Release()
				if err != nil || got[0] != (R{int64(i), "x"}) {
					t.Errorf("got %v, %v", got, err)
					return
				}
				if got, err := c.Decode(rec32, nil); err != nil || got[0] != (R{1, "a"}) {
					t.Errorf("got %v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A column claiming nulls without a validity bitmap (arrow-go builds one;
// other producers might not) decodes as all null instead of overrunning
// the array a pointer field's values go into.
func TestDecodeNullsWithoutBitmap(t *testing.T) {
	t.Parallel()
	type P struct{ N *int64 }
	vals := memory.NewBufferBytes(make([]byte, 16))
	// Two rows, one null, but no validity bitmap: read as all null.
	noBitmap := array.MakeFromData(array.NewData(arrow.PrimitiveTypes.Int64, 2, []*memory.Buffer{nil, vals}, nil, 1, 0))
	decodeOK(t, batch(t, "N", arrow.PrimitiveTypes.Int64, noBitmap), P{}, P{})
}
