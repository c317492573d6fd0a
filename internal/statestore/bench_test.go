package statestore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Benchmarks of the Badger backend, each beside a baseline of raw Badger
// calls doing the same work on the same bytes (the encoded keys and stored
// values of key.go) with the same Badger options, so the difference is the
// backend's own cost: key encoding, validation, the value header, copies,
// the close guard.
//
//	go test ./internal/statestore/ -run '^$' -bench . -benchtime 1x   # smoke
//	go test ./internal/statestore/ -run '^$' -bench 'BenchmarkBadger(Get|Apply|Scan)'
//	go test ./internal/statestore/ -run '^$' -bench BenchmarkBadger1M   # 1 M keys, < 1 min

const (
	benchJob   = "bench"
	benchOp    = "agg"
	benchValue = 32
)

func benchKey(i int) Key {
	var u [8]byte
	binary.BigEndian.PutUint64(u[:], uint64(i))
	return Key{Job: benchJob, Operator: benchOp, KeyGroup: i % 128, User: u[:]}
}

func benchVal(i int) []byte {
	v := make([]byte, benchValue)
	binary.BigEndian.PutUint64(v, uint64(i))
	return v
}

// benchRaw opens a raw Badger with the backend's options.
func benchRaw(b *testing.B, dir string) *badger.DB {
	db, err := badger.Open(badgerOptions(Options{Dir: dir}))
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// benchLoad writes keys [0, n) to the engine and to the raw Badger.
func benchLoad(b *testing.B, eng Backend, raw *badger.DB, n int) {
	const batch = 10_000
	muts := make([]Mutation, 0, batch)
	for i := 0; i < n; i += batch {
		muts = muts[:0]
		for j := i; j < min(i+batch, n); j++ {
			muts = append(muts, Mutation{Key: benchKey(j), Value: benchVal(j)})
		}
		if err := eng.Apply(muts); err != nil {
			b.Fatal(err)
		}
	}
	if raw == nil {
		return
	}
	wb := raw.NewWriteBatch()
	defer wb.Cancel()
	for i := range n {
		k, _ := keyEncode(nil, benchKey(i))
		if err := wb.Set(k, storedValueEncode(nil, benchVal(i), 0)); err != nil {
			b.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
}

func reportOps(b *testing.B, ops int) {
	b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
}

// benchFixture is an engine and a raw Badger holding the same n keys.
func benchFixture(b *testing.B, n int) (Backend, *badger.DB) {
	eng, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	raw := benchRaw(b, b.TempDir())
	b.Cleanup(func() { eng.Close(); raw.Close() })
	benchLoad(b, eng, raw, n)
	return eng, raw
}

const benchKeys = 100_000

func BenchmarkBadgerGet(b *testing.B) {
	eng, raw := benchFixture(b, benchKeys)
	now := kvNow()
	b.Run("engine", func(b *testing.B) {
		for i := range b.N {
			_, _, ok, err := eng.Get(benchKey(i*7919%benchKeys), now)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		reportOps(b, b.N)
	})
	// The same keys restored as a read-only layer (layer.go): every Get
	// misses Badger and is answered by the layer.
	layered, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer layered.Close()
	scope := Scope{Job: benchKey(0).Job, Operator: benchKey(0).Operator, Groups: AllKeyGroups}
	var snap bytes.Buffer
	if _, err := eng.Snapshot(&snap, scope, now); err != nil {
		b.Fatal(err)
	}
	data := snap.Bytes()
	if _, err := layered.(LayerRestorer).RestoreLayers([]RestoreSource{{Scope: scope, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}}, now, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("layer", func(b *testing.B) {
		for i := range b.N {
			_, _, ok, err := layered.Get(benchKey(i*7919%benchKeys), now)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		reportOps(b, b.N)
	})
	encs := make([][]byte, benchKeys)
	for i := range encs {
		encs[i], _ = keyEncode(nil, benchKey(i))
	}
	b.Run("raw", func(b *testing.B) {
		for i := range b.N {
			txn := raw.NewTransaction(false)
			item, err := txn.Get(encs[i*7919%benchKeys])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := item.ValueCopy(nil); err != nil {
				b.Fatal(err)
			}
			txn.Discard()
		}
		reportOps(b, b.N)
	})
}

func BenchmarkBadgerApply(b *testing.B) {
	eng, raw := benchFixture(b, benchKeys)
	for _, size := range []int{1, 1000} {
		b.Run(fmt.Sprintf("batch=%d/engine", size), func(b *testing.B) {
			muts := make([]Mutation, size)
			for i := range b.N {
				for j := range muts {
					n := (i*size + j) % (2 * benchKeys) // half overwrites, half inserts
					muts[j] = Mutation{Key: benchKey(n), Value: benchVal(n)}
				}
				if err := eng.Apply(muts); err != nil {
					b.Fatal(err)
				}
			}
			reportOps(b, b.N*size)
		})
		b.Run(fmt.Sprintf("batch=%d/raw", size), func(b *testing.B) {
			keys := make([][]byte, size)
			vals := make([][]byte, size)
			for i := range b.N {
				// The same work as the engine: the keys and values are
				// built per batch, then written in one transaction.
				for j := range keys {
					n := (i*size + j) % (2 * benchKeys)
					keys[j], _ = keyEncode(nil, benchKey(n))
					vals[j] = storedValueEncode(nil, benchVal(n), 0)
				}
				txn := raw.NewTransaction(true)
				for j := range keys {
					if err := txn.Set(keys[j], vals[j]); err != nil {
						b.Fatal(err)
					}
				}
				if err := txn.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			reportOps(b, b.N*size)
		})
	}
}

func BenchmarkBadgerScan(b *testing.B) {
	eng, raw := benchFixture(b, benchKeys)
	now := kvNow()
	b.Run("engine", func(b *testing.B) {
		total := 0
		for range b.N {
			n := 0
			err := eng.Scan(Scope{Job: benchJob, Operator: benchOp, Groups: AllKeyGroups}, now, func(e Entry) error {
				n += len(e.Value)
				return nil
			})
			if err != nil || n != benchKeys*benchValue {
				b.Fatal(n, err)
			}
			total += benchKeys
		}
		reportOps(b, total)
	})
	prefix, _ := keyOperatorPrefix(benchJob, benchOp)
	b.Run("raw", func(b *testing.B) {
		total := 0
		for range b.N {
			n := 0
			txn := raw.NewTransaction(false)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid(); it.Next() {
				if err := it.Item().Value(func(v []byte) error { n += len(v) - storedValueHeader; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			it.Close()
			txn.Discard()
			if n != benchKeys*benchValue {
				b.Fatal(n)
			}
			total += benchKeys
		}
		reportOps(b, total)
	})
}

// BenchmarkBadger1M: snapshot, restore and open of a store of 1 M keys
// with 32-byte values, each beside raw Badger doing the same.
func BenchmarkBadger1M(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	eng, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { eng.Close() }()
	t0 := time.Now()
	benchLoad(b, eng, nil, n)
	b.Logf("loaded %d keys in %v", n, time.Since(t0))
	scope := Scope{Job: benchJob, Groups: AllKeyGroups}
	now := kvNow()
	var snap bytes.Buffer
	info, err := eng.Snapshot(&snap, scope, now)
	if err != nil || info.Entries != n {
		b.Fatal(info, err)
	}

	b.Run("Snapshot/engine", func(b *testing.B) {
		b.SetBytes(info.Bytes)
		for range b.N {
			if _, err := eng.Snapshot(io.Discard, scope, now); err != nil {
				b.Fatal(err)
			}
		}
		reportOps(b, b.N*n)
	})
	b.Run("Snapshot/raw", func(b *testing.B) {
		// Iterate the same Badger and write each key and value, framed the
		// same size, to io.Discard through a bufio.Writer.
		db := eng.(*badgerBackend).db
		prefix, _ := keyJobPrefix(benchJob)
		b.SetBytes(info.Bytes)
		for range b.N {
			w := bufio.NewWriterSize(io.Discard, 256<<10)
			var frame [9]byte
			txn := db.NewTransaction(false)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				w.Write(frame[:9])
				w.Write(item.Key())
				if err := item.Value(func(v []byte) error { _, err := w.Write(v); return err }); err != nil {
					b.Fatal(err)
				}
				w.Write(frame[:7]) // engine record: 25 bytes of framing + key + 32-byte value
			}
			it.Close()
			txn.Discard()
			w.Flush()
		}
		reportOps(b, b.N*n)
	})

	b.Run("Restore/engine", func(b *testing.B) {
		b.SetBytes(info.Bytes)
		for range b.N {
			b.StopTimer()
			d, err := os.MkdirTemp("", "arkflow-restore")
			if err != nil {
				b.Fatal(err)
			}
			dst, err := Open(Options{Dir: d})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ri, err := dst.Restore(bytes.NewReader(snap.Bytes()), scope, now)
			if err != nil || ri.Entries != n {
				b.Fatal(ri, err)
			}
			b.StopTimer()
			dst.Close()
			os.RemoveAll(d)
			b.StartTimer()
		}
		reportOps(b, b.N*n)
	})
	b.Run("Restore/raw", func(b *testing.B) {
		// A WriteBatch of the same entries, already decoded in memory.
		keys := make([][]byte, 0, n)
		vals := make([][]byte, 0, n)
		err := eng.Scan(scope, now, func(e Entry) error {
			k, _ := keyEncode(nil, e.Key)
			keys = append(keys, k)
			vals = append(vals, storedValueEncode(nil, e.Value, e.ExpiresAt))
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(info.Bytes)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			d, err := os.MkdirTemp("", "arkflow-restore")
			if err != nil {
				b.Fatal(err)
			}
			db := benchRaw(b, d)
			b.StartTimer()
			wb := db.NewWriteBatch()
			for i := range keys {
				if err := wb.Set(keys[i], vals[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := wb.Flush(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			db.Close()
			os.RemoveAll(d)
			b.StartTimer()
		}
		reportOps(b, b.N*n)
	})

	// Open of the directory: the engine (FORMAT, SEAL verification,
	// badger.Open) and raw badger.Open. The engine runs first, as a raw
	// open invalidates the seal.
	if err := eng.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("Open/engine", func(b *testing.B) {
		var total, verify time.Duration
		for range b.N {
			e, err := Open(Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			s, _ := BadgerStatsOf(e)
			if !s.Sealed {
				b.Fatal("not sealed")
			}
			total += OpenDuration(e)
			verify += s.Verify
			b.StopTimer()
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/open")
		b.ReportMetric(float64(verify.Microseconds())/1000/float64(b.N), "ms-verify/open")
	})
	b.Run("Open/raw", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			t := time.Now()
			db := benchRaw(b, dir)
			total += time.Since(t)
			b.StopTimer()
			db.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/open")
	})
}
