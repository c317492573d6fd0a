package keys

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchRows is the batch size of the Hashes benchmarks: a typical record
// batch handed to a keyed edge.
const benchRows = 4096

func benchColumn(b *testing.B, dt arrow.DataType) arrow.Array {
	bld := array.NewBuilder(memory.DefaultAllocator, dt)
	defer bld.Release()
	for i := 0; i < benchRows; i++ {
		switch bb := bld.(type) {
		case *array.StringBuilder:
			bb.Append(fmt.Sprintf("user-%06d", i%1000))
		case *array.LargeStringBuilder:
			bb.Append(fmt.Sprintf("user-%06d", i%1000))
		case *array.Int64Builder:
			bb.Append(int64(i%1000) * 7919)
		case *array.BooleanBuilder:
			bb.Append(i%3 == 0)
		default:
			b.Fatalf("no bench values for %s", dt)
		}
	}
	return bld.NewArray()
}

// BenchmarkHashes measures the per-row key hash of the hot keyed-edge
// path (Router.Route and Groups call Hashes once per batch).
func BenchmarkHashes(b *testing.B) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Boolean} {
		b.Run(dt.String(), func(b *testing.B) {
			col := benchColumn(b, dt)
			defer col.Release()
			dst := make([]uint64, benchRows)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := Hashes(col, dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkGroupOfBytes measures the one-key form state restore and
// process operators use.
func BenchmarkGroupOfBytes(b *testing.B) {
	key := []byte("user-000042")
	b.ReportAllocs()
	var sink int
	for b.Loop() {
		sink += GroupOfBytes(key, 128)
	}
	_ = sink
}

// BenchmarkTableIDs measures Table.IDs, a keyed window's per-row key
// lookup, on batches of keys drawn at random from 1 k, 100 k and 1 M
// distinct strings (the embedding benchmarks' "user-%06d") and 1 k
// integers, the table already holding every key.
func BenchmarkTableIDs(b *testing.B) {
	for _, c := range []struct {
		name string
		dt   arrow.DataType
		keys int
	}{{"string/1k", arrow.BinaryTypes.String, 1_000}, {"string/100k", arrow.BinaryTypes.String, 100_000}, {"string/1M", arrow.BinaryTypes.String, 1_000_000}, {"int64/1k", arrow.PrimitiveTypes.Int64, 1_000}} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var cols []arrow.Array
			for range 64 {
				bld := array.NewBuilder(memory.DefaultAllocator, c.dt)
				for range 1024 {
					k := r.IntN(c.keys)
					switch bb := bld.(type) {
					case *array.StringBuilder:
						bb.Append(fmt.Sprintf("user-%06d", k))
					case *array.Int64Builder:
						bb.Append(int64(k) * 7919)
					}
				}
				cols = append(cols, bld.NewArray())
				bld.Release()
			}
			tb, err := NewTable(c.dt)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]int32, 1024)
			for k := 0; k < c.keys; k += 1024 { // every key, in order
				bld := array.NewBuilder(memory.DefaultAllocator, c.dt)
				for i := k; i < min(k+1024, c.keys); i++ {
					switch bb := bld.(type) {
					case *array.StringBuilder:
						bb.Append(fmt.Sprintf("user-%06d", i))
					case *array.Int64Builder:
						bb.Append(int64(i) * 7919)
					}
				}
				col := bld.NewArray()
				tb.IDs(col, dst)
				col.Release()
				bld.Release()
			}
			if tb.Len() != c.keys {
				b.Fatalf("%d keys in the table, want %d", tb.Len(), c.keys)
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if err := tb.IDs(cols[i%len(cols)], dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/row")
		})
	}
}
