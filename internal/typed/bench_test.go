package typed_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// The benchmarks compare the codec with what a careful user writes by
// hand: a reused RecordBuilder, reserved for the batch (string bytes
// too), appending row by row (encode), and type-asserted columns read with Value (decode; "hand"
// keeps the strings Value returns, which alias the batch, "hand-clone"
// copies them). All sides of each benchmark run on the same rows, and
// their results are checked to be equal outside the timer.

const benchRows = 1024

type benchRow struct {
	ID     int64     `arkflow:"id"`
	User   string    `arkflow:"user"`
	Amount float64   `arkflow:"amount"`
	OK     bool      `arkflow:"ok"`
	At     time.Time `arkflow:"at"`
	Ref    *int64    `arkflow:"ref"` // nil in every fourth row
}

func benchData() []benchRow {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]benchRow, benchRows)
	refs := make([]int64, benchRows)
	for i := range rows {
		rows[i] = benchRow{
			ID: int64(i) * 7919, User: fmt.Sprintf("user-%d", i%300), Amount: float64(i) / 4,
			OK: i%3 == 0, At: start.Add(time.Duration(i) * time.Millisecond),
		}
		if i%4 != 0 {
			refs[i] = int64(i)
			rows[i].Ref = &refs[i]
		}
	}
	return rows
}

// handEncoder is the hand-written encoder: a RecordBuilder kept across
// batches.
type handEncoder struct {
	b      *array.RecordBuilder
	ids    *array.Int64Builder
	users  *array.StringBuilder
	amount *array.Float64Builder
	ok     *array.BooleanBuilder
	at     *array.TimestampBuilder
	ref    *array.Int64Builder
}

func newHandEncoder(mem memory.Allocator, schema *arrow.Schema) *handEncoder {
	b := array.NewRecordBuilder(mem, schema)
	return &handEncoder{
		b: b, ids: b.Field(0).(*array.Int64Builder), users: b.Field(1).(*array.StringBuilder),
		amount: b.Field(2).(*array.Float64Builder), ok: b.Field(3).(*array.BooleanBuilder),
		at: b.Field(4).(*array.TimestampBuilder), ref: b.Field(5).(*array.Int64Builder),
	}
}

func (h *handEncoder) encode(rows []benchRow) arrow.RecordBatch {
	h.b.Reserve(len(rows))
	n := 0
	for i := range rows {
		n += len(rows[i].User)
	}
	h.users.ReserveData(n)
	for i := range rows {
		r := &rows[i]
		h.ids.Append(r.ID)
		h.users.Append(r.User)
		h.amount.Append(r.Amount)
		h.ok.Append(r.OK)
		h.at.Append(arrow.Timestamp(r.At.UnixMilli()))
		if r.Ref != nil {
			h.ref.Append(*r.Ref)
		} else {
			h.ref.AppendNull()
		}
	}
	return h.b.NewRecordBatch()
}

// handDecode is the hand-written decoder. Its strings alias the batch (as
// array.String.Value returns them), which the codec's do not: it copies
// each string column once. With clone it copies each string, as code
// that may release the batch before using the rows must.
func handDecode(rec arrow.RecordBatch, dst []benchRow, clone bool) []benchRow {
	ids := rec.Column(0).(*array.Int64)
	users := rec.Column(1).(*array.String)
	amount := rec.Column(2).(*array.Float64)
	ok := rec.Column(3).(*array.Boolean)
	at := rec.Column(4).(*array.Timestamp)
	ref := rec.Column(5).(*array.Int64)
	n := int(rec.NumRows())
	dst = slices.Grow(dst, n)
	for i := 0; i < n; i++ {
		r := benchRow{ID: ids.Value(i), User: users.Value(i), Amount: amount.Value(i), OK: ok.Value(i), At: at.Value(i).ToTime(arrow.Millisecond)}
		if clone {
			r.User = strings.Clone(r.User)
		}
		if ref.IsValid(i) {
			v := ref.Value(i)
			r.Ref = &v
		}
		dst = append(dst, r)
	}
	return dst
}

func reportRows(b *testing.B) {
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkEncode(b *testing.B) {
	rows := benchData()
	c, err := typed.For[benchRow]()
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.DefaultAllocator
	hand := newHandEncoder(mem, c.Schema())
	defer hand.b.Release()

	// Both sides build the same batch.
	want := hand.encode(rows)
	got, err := c.Encode(mem, rows)
	if err != nil {
		b.Fatal(err)
	}
	if !array.RecordEqual(got, want) {
		b.Fatalf("typed and hand batches differ:\n%v\n%v", got, want)
	}
	got.Release()
	want.Release()

	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec, err := c.Encode(mem, rows)
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		reportRows(b)
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hand.encode(rows).Release()
		}
		reportRows(b)
	})
}

func BenchmarkDecode(b *testing.B) {
	rows := benchData()
	c, err := typed.For[benchRow]()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := c.Encode(memory.DefaultAllocator, rows)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Release()

	// Both sides decode the rows that were encoded.
	got, err := c.Decode(rec, nil)
	if err != nil {
		b.Fatal(err)
	}
	if !equalRows(got, rows) || !equalRows(handDecode(rec, nil, false), rows) || !equalRows(handDecode(rec, nil, true), rows) {
		b.Fatal("decoded rows differ from the encoded ones")
	}

	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]benchRow, 0, benchRows)
		for b.Loop() {
			if dst, err = c.Decode(rec, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b)
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]benchRow, 0, benchRows)
		for b.Loop() {
			dst = handDecode(rec, dst[:0], false)
		}
		reportRows(b)
	})
	b.Run("hand-clone", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]benchRow, 0, benchRows)
		for b.Loop() {
			dst = handDecode(rec, dst[:0], true)
		}
		reportRows(b)
	})
}
