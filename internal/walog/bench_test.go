package walog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Benchmarks of the local WAL, each beside its baseline on the same disk in
// the same run (see docs/benchmarks/wal.md for the command, which runs
// each mode's group right after its baseline).
//
// BenchmarkAppend measures Append (and Ack, so the cursor advances, is
// persisted and segments are deleted as in a pipeline) per sync mode,
// entry size and number of concurrent appenders. In always and
// group_commit it also reports appends/sync: appends per sync the log ran
// (the fdatasync before a segment rotation is not counted). Its
// baselines, all on a file in the same kind of temporary directory:
//
//   - BenchmarkRawFsync: write(2) of one record's bytes then fdatasync(2),
//     per entry: what always (and group commit with one appender) cannot
//     beat.
//   - BenchmarkRawSeqWrite: write(2) of 64 KB blocks with one fdatasync(2)
//     per 16 blocks (1 MiB) and one at the end: the disk's bandwidth for
//     the largest batches group commit can form with 16 appenders of 64 KB.
//   - BenchmarkRawSeqOverwrite: the same writes and syncs over a file
//     already written (64 MiB, in turn): what a log that recycles its
//     segment files (the default; LocalOptions.NoRecycle) writes to. On
//     ext4, fdatasync after writing over allocated blocks needs no
//     metadata commit, unlike after appending; the WAL's ratio against
//     RawSeqWrite shows what recycling buys, against this one what the
//     log costs beyond the disk.
//   - BenchmarkRawWrite: write(2) of one record's bytes per entry, never
//     synced: what periodic and none cannot beat.
//
// Periodic and none return before any sync; their timings exclude the
// final sync that Close does.

var benchSizes = []struct {
	name string
	n    int
}{{"1KB", 1 << 10}, {"64KB", 64 << 10}}

func benchPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []SyncMode{SyncAlways, SyncGroupCommit, SyncPeriodic, SyncNone} {
		for _, size := range benchSizes {
			for _, appenders := range []int{1, 16} {
				name := fmt.Sprintf("mode=%s/size=%s/appenders=%d", mode, size.name, appenders)
				b.Run(name, func(b *testing.B) { benchAppend(b, mode, size.n, appenders) })
			}
		}
	}
}

func benchAppend(b *testing.B, mode SyncMode, size, appenders int) {
	l, err := OpenDir(b.TempDir(), LocalOptions{Options: Options{Sync: mode}})
	if err != nil {
		b.Fatal(err)
	}
	payload := benchPayload(size)
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range appenders {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				seq, err := l.Append(ctx, payload)
				if err != nil {
					b.Error(err)
					return
				}
				l.Ack(seq)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	if syncs := l.syncs.Load(); syncs > 0 && (mode == SyncAlways || mode == SyncGroupCommit) {
		b.ReportMetric(float64(b.N)/float64(syncs), "appends/sync")
	}
	if last, c := l.Last(), l.Cursor(); last != uint64(b.N) || c != last {
		b.Fatalf("%d appends: last %d, cursor %d", b.N, last, c)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRawFsync is the baseline of `always`: one write and one
// fdatasync per entry, of the same bytes a record takes.
func BenchmarkRawFsync(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+size.name, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			rec := AppendRecord(nil, 1, benchPayload(size.n))
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := f.Write(rec); err != nil {
					b.Fatal(err)
				}
				if err := datasync(f); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			checkRawSize(b, f, int64(b.N*len(rec)))
		})
	}
}

// BenchmarkRawSeqWrite is the baseline of group commit with 16 appenders of
// 64 KB: sequential 64 KB writes, one fdatasync per 16 of them (the batch
// 16 appenders form at best) and one at the end.
func BenchmarkRawSeqWrite(b *testing.B) {
	const block, perSync = 64 << 10, 16
	b.Run("size=64KB/sync=16", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := benchPayload(block)
		b.SetBytes(block)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if (i+1)%perSync == 0 || i == b.N-1 {
				if err := datasync(f); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		checkRawSize(b, f, int64(b.N*block))
	})
}

// BenchmarkRawSeqOverwrite is RawSeqWrite over a 64 MiB file written
// (and synced) before the timer starts, wrapping around at its end.
func BenchmarkRawSeqOverwrite(b *testing.B) {
	const block, perSync, span = 64 << 10, 16, 64 << 20
	b.Run("size=64KB/sync=16", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := benchPayload(block)
		for off := int64(0); off < span; off += block {
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(block)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := f.WriteAt(buf, int64(i)*block%span); err != nil {
				b.Fatal(err)
			}
			if (i+1)%perSync == 0 || i == b.N-1 {
				if err := datasync(f); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
}

func checkRawSize(b *testing.B, f *os.File, want int64) {
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if fi.Size() != want {
		b.Fatalf("wrote %d bytes, want %d", fi.Size(), want)
	}
}

// BenchmarkRawWrite is the baseline of periodic and none: one write per
// entry of the same bytes a record takes, never synced.
func BenchmarkRawWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+size.name, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			rec := AppendRecord(nil, 1, benchPayload(size.n))
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := f.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			checkRawSize(b, f, int64(b.N*len(rec)))
		})
	}
}
