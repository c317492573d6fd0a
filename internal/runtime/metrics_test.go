package runtime

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/metrics"
)

// benchRecord is a batch like BenchmarkPipeline's: n rows of a string,
// a float64 and an int64 column.
func benchRecord(n int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
		{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append("user-00000")
		b.Field(1).(*array.Float64Builder).Append(float64(i))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// recordBytes counts the buffers a batch references, and a slice from
// row k on its share of them.
func TestRecordBytes(t *testing.T) {
	t.Parallel()
	rec := benchRecord(1000)
	defer rec.Release()
	full := recordBytes(rec)
	// 10 bytes of string data, a 4-byte offset, 8 and 8 bytes per row,
	// at least (buffers are padded to 64 bytes).
	if min := int64(1000 * (10 + 4 + 8 + 8)); full < min || full > min+4096 {
		t.Fatalf("recordBytes = %d, want about %d", full, min)
	}
	tail := rec.NewSlice(500, 1000)
	defer tail.Release()
	if got := recordBytes(tail); got < full/2-64 || got > full/2+64 {
		t.Fatalf("the second half counts %d bytes, want about half of %d", got, full)
	}
}

// BenchmarkPerBatchMetrics is what the runtime adds per batch for issue
// 21's families: recordBytes (twice: a task's output is the next one's
// input) and a sink write's two clock reads and histogram observation.
func BenchmarkPerBatchMetrics(b *testing.B) {
	rec := benchRecord(4096)
	defer rec.Release()
	h := metrics.NewDurationHistogram(metrics.LatencyBuckets)
	var m taskMetrics
	b.ReportAllocs()
	for b.Loop() {
		m.bytesOut.Add(recordBytes(rec))
		m.bytesIn.Add(recordBytes(rec))
		start := time.Now()
		h.ObserveDuration(time.Since(start))
	}
}
