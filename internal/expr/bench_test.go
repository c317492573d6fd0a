package expr

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// makeBenchRecord builds n rows of (amount, country, ts) with schema, whose
// fields must have the types of benchSchema's, except that amount may be
// any integer type the builder handles here (Int64 or Int32).
func makeBenchRecord(mem memory.Allocator, schema *arrow.Schema, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	countries := []string{"DE", "FR", "US", "DE", "NL", "GB", "DE"}
	for i := range n {
		amount := int64((i * 7919) % 25)
		switch f := b.Field(0).(type) {
		case *array.Int64Builder:
			f.Append(amount)
		case *array.Int32Builder:
			f.Append(int32(amount))
		}
		b.Field(1).(*array.StringBuilder).Append(countries[i%len(countries)])
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000 + int64(i)))
	}
	return b.NewRecordBatch()
}

var maskSink []bool

// BenchmarkFilter measures a typical filter on a 4096-row batch, against a
// hand-written loop over the Arrow columns doing the same check.
func BenchmarkFilter(b *testing.B) {
	const rows = 4096
	rec := makeBenchRecord(memory.NewGoAllocator(), benchSchema, rows)
	defer rec.Release()
	e, err := Compile("amount > 10 and country == 'DE'", benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	var want int
	{
		m, err := e.EvalMask(rec)
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range m {
			if x {
				want++
			}
		}
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
	}

	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := e.EvalMask(rec)
			if err != nil || len(m) != rows {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("handloop", func(b *testing.B) {
		b.ReportAllocs()
		amount := rec.Column(0).(*array.Int64)
		country := rec.Column(1).(*array.String)
		var got int
		for b.Loop() {
			m := make([]bool, rows)
			maskSink = m // like EvalMask's, the mask outlives the call
			got = 0
			for i := range m {
				m[i] = amount.IsValid(i) && country.IsValid(i) &&
					amount.Value(i) > 10 && country.Value(i) == "DE"
				if m[i] {
					got++
				}
			}
		}
		if got != want {
			b.Fatalf("handloop selected %d rows, engine %d", got, want)
		}
		report(b)
	})
}

// BenchmarkMap measures a computed column, amount * 100, built into an
// Arrow array.
func BenchmarkMap(b *testing.B) {
	const rows = 4096
	rec := makeBenchRecord(memory.NewGoAllocator(), benchSchema, rows)
	defer rec.Release()
	e, err := Compile("amount * 100", benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := e.Eval(rec)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
}
