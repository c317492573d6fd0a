package arkflow_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// BenchmarkDurableIngest measures what a write-ahead log costs a pipeline:
// the same 1,048,576 generated events in 4,096-row batches go from a
// source to a memory sink with no WAL (the baseline) and with a WAL in each
// sync mode, in the same run. Every batch is encoded as Arrow IPC, appended
// and (per mode) fsynced before it enters the pipeline; the WAL directory
// is new in every iteration, so nothing is skipped as already read.
func BenchmarkDurableIngest(b *testing.B) {
	events := float64(benchBatch * benchBatches)
	for _, mode := range []string{"off", string(job.SyncNone), string(job.SyncPeriodic), string(job.SyncGroupCommit), string(job.SyncAlways)} {
		b.Run("wal="+mode, func(b *testing.B) {
			b.ReportAllocs()
			sink := mem.NewSink()
			var walBytes int64
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), strconv.Itoa(i))
				bl := arkflow.NewJob("bench")
				if mode != "off" {
					bl = bl.Durability(job.Durability{Path: dir, Sync: job.SyncMode(mode), Retain: true})
				}
				j, err := bl.Source("in", benchGenerate()).Sink("out", sink).Build()
				if err != nil {
					b.Fatal(err)
				}
				if err := j.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				if sink.NumRows() != int64(events) {
					b.Fatalf("sink got %d rows, want %d", sink.NumRows(), int64(events))
				}
				sink.Reset()
				if mode != "off" {
					walBytes += dirSize(b, dir)
				}
			}
			b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if walBytes > 0 {
				b.ReportMetric(float64(walBytes)/1e6/b.Elapsed().Seconds(), "walMB/s")
			}
		})
	}
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
