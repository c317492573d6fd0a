package statestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/arkflow-rs/arkflow-go/internal/memstat"
	"github.com/arkflow-rs/arkflow-go/job"
)

func objectSum(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

func bytesSource(scope Scope, data []byte, sum string) RestoreSource {
	return RestoreSource{Scope: scope, Checksum: sum, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

func bulkCases() []kvCase {
	var out []kvCase
	for _, c := range kvCases() {
		if c.name != "memory" {
			out = append(out, c)
		}
	}
	return out
}

// RestoreEmpty of per-task snapshots (and of one snapshot split over new
// tasks, as after a rescale) gives the entries, values and expiries the
// snapshots hold, skips the ones expired at now, and leaves a store that
// reads, writes and reopens like any other.
func TestRestoreEmptyEqualsSource(t *testing.T) {
	t.Parallel()
	now := kvNow()
	src, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	snapPopulate(t, src, now)
	type part struct {
		snap  Scope
		scope Scope
	}
	layouts := map[string][]part{
		"per task": {
			{Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 63}}, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 63}}},
			{Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 64, End: 127}}, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 64, End: 127}}},
			{Scope{Job: "j", Operator: "bb", Groups: AllKeyGroups}, Scope{Job: "j", Operator: "bb", Groups: AllKeyGroups}},
		},
		"split": {
			{Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 41, End: 127}}},
			{Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 40}}},
			{Scope{Job: "j", Groups: AllKeyGroups}, Scope{Job: "j", Operator: "bb", Groups: AllKeyGroups}},
		},
	}
	for name, parts := range layouts {
		for _, at := range []int64{now, now + 90*60_000} { // later: the k1 entries have expired
			var srcs []RestoreSource
			var bytesTotal int64
			for _, p := range parts {
				data, _ := snapTake(t, src, p.snap, now)
				srcs = append(srcs, bytesSource(p.scope, data, objectSum(data)))
				bytesTotal += int64(len(data))
			}
			want := kvScan(t, src, Scope{Job: "j", Groups: AllKeyGroups}, at)
			for _, c := range bulkCases() {
				t.Run(fmt.Sprintf("%s/%s/at+%dm", name, c.name, (at-now)/60_000), func(t *testing.T) {
					dir := t.TempDir()
					open := c.open
					if c.name == "badger" {
						open = func(t testing.TB) Backend {
							b, err := Open(Options{Dir: dir})
							if err != nil {
								t.Fatal(err)
							}
							return b
						}
					}
					b := open(t)
					defer func() { b.Close() }()
					var seen []int
					infos, err := b.(BulkRestorer).RestoreEmpty(srcs, at, func(i int, info RestoreInfo) { seen = append(seen, i) })
					if err != nil {
						t.Fatal(err)
					}
					var entries, skipped, nbytes int64
					for _, in := range infos {
						entries += in.Entries
						skipped += in.Skipped
						nbytes += in.Bytes
					}
					if entries != int64(len(want)) || nbytes != bytesTotal || len(seen) != len(srcs) {
						t.Fatalf("infos %+v (progress %v), want %d entries of %d bytes", infos, seen, len(want), bytesTotal)
					}
					got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, at)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("restored\n%v\nwant\n%v", got, want)
					}
					if got := kvScan(t, b, Scope{Job: "other", Groups: AllKeyGroups}, at); len(got) != 0 {
						t.Fatal("another job's entries restored")
					}
					k := Key{Job: "j", Operator: "a", Namespace: "ns", KeyGroup: 5, User: []byte("k0")}
					if v, exp, ok := kvGet(t, b, k, at); !ok || v != "a-5-0" || exp != 0 {
						t.Fatalf("get after restore: %q %d %v", v, exp, ok)
					}
					// Writes after the restore win over restored entries.
					kvApply(t, b, kvPut(k, "new", 0), Mutation{Key: Key{Job: "j", Operator: "bb", Namespace: "ns", KeyGroup: 7, User: []byte("k0")}, Delete: true})
					if v, _, _ := kvGet(t, b, k, at); v != "new" {
						t.Fatalf("after a write: %q", v)
					}
					if _, _, ok := kvGet(t, b, Key{Job: "j", Operator: "bb", Namespace: "ns", KeyGroup: 7, User: []byte("k0")}, at); ok {
						t.Fatal("a deleted restored entry is still there")
					}
					if c.name == "badger" {
						if err := b.Close(); err != nil {
							t.Fatal(err)
						}
						b = open(t)
						if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, at); len(got) != len(want)-1 {
							t.Fatalf("after reopening: %d entries, want %d", len(got), len(want)-1)
						}
						if v, _, _ := kvGet(t, b, k, at); v != "new" {
							t.Fatalf("after reopening: %q", v)
						}
					}
				})
			}
		}
	}
	src.Close()
}

// A store with any live entry is refused, untouched.
func TestRestoreEmptyNotEmpty(t *testing.T) {
	t.Parallel()
	now := kvNow()
	mem := NewMemory()
	snapPopulate(t, mem, now)
	data, _ := snapTake(t, mem, Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, now)
	for _, c := range bulkCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			defer b.Close()
			kvApply(t, b, kvPut(Key{Job: "other", Operator: "x", User: []byte("u")}, "v", 0))
			_, err := b.(BulkRestorer).RestoreEmpty([]RestoreSource{bytesSource(Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, data, "")}, now, nil)
			if !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("err %v, want ErrNotEmpty", err)
			}
			if got := kvScan(t, b, Scope{Job: "other", Groups: AllKeyGroups}, now); len(got) != 1 {
				t.Fatalf("the store was touched: %v", got)
			}
			if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 0 {
				t.Fatalf("restored into a non-empty store: %d entries", len(got))
			}
		})
	}
}

type failingReader struct {
	r    io.Reader
	left int
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.left)]
	n, err := f.r.Read(p)
	f.left -= n
	return n, err
}

// A corrupt snapshot, a checksum that does not match, or a failing
// reader fails the whole restore, names the source, and leaves the store
// empty; corruption (and only corruption) wraps ErrCorruptSnapshot. The
// store restores afterwards.
func TestRestoreEmptyFailures(t *testing.T) {
	t.Parallel()
	now := kvNow()
	mem := NewMemory()
	snapPopulate(t, mem, now)
	scopeA := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	scopeB := Scope{Job: "j", Operator: "bb", Groups: AllKeyGroups}
	good, _ := snapTake(t, mem, scopeA, now)
	other, _ := snapTake(t, mem, scopeB, now)
	cases := map[string]RestoreSource{}
	for name, bad := range snapCorruptions(other) {
		cases[name] = bytesSource(scopeB, bad, "")
	}
	cases["checksum"] = bytesSource(scopeB, other, objectSum(good))
	cases["crc64 checksum"] = bytesSource(scopeB, other, objectCRC64(good))
	var readErr = errors.New("connection reset")
	cases["reader"] = RestoreSource{Scope: scopeB, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(&failingReader{r: bytes.NewReader(other), left: len(other) / 2, err: readErr}), nil
	}}
	cases["open"] = RestoreSource{Scope: scopeB, Open: func() (io.ReadCloser, error) { return nil, readErr }}
	for _, c := range bulkCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			defer b.Close()
			br := b.(BulkRestorer)
			for name, bad := range cases {
				_, err := br.RestoreEmpty([]RestoreSource{bytesSource(scopeA, good, objectCRC64(good)), bad}, now, nil)
				var re *RestoreError
				if !errors.As(err, &re) || re.Index != 1 {
					t.Fatalf("%s: err %v, want a RestoreError of source 1", name, err)
				}
				if corrupt := errors.Is(err, ErrCorruptSnapshot); corrupt != (name != "reader" && name != "open") {
					t.Fatalf("%s: corrupt %v: %v", name, corrupt, err)
				}
				if name == "reader" || name == "open" {
					if !errors.Is(err, readErr) {
						t.Fatalf("%s: the reader's error is not wrapped: %v", name, err)
					}
				}
				if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 0 {
					t.Fatalf("%s: %d entries left after a failed restore", name, len(got))
				}
				t.Logf("%s: %.160v", name, err)
			}
			if _, err := br.RestoreEmpty([]RestoreSource{bytesSource(scopeA, good, ""), bytesSource(scopeA, good, "")}, now, nil); err == nil {
				t.Fatal("overlapping scopes were accepted")
			}
			infos, err := br.RestoreEmpty([]RestoreSource{bytesSource(scopeA, good, objectSum(good)), bytesSource(scopeB, other, objectSum(other))}, now, nil)
			if err != nil || infos[0].Entries+infos[1].Entries != 2*128*3 {
				t.Fatalf("%+v %v", infos, err)
			}
			if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 2*128*3 {
				t.Fatalf("%d entries", len(got))
			}
		})
	}
}

// BenchmarkRestore100MB restores one 100 MB snapshot (102,400 keys of
// 1000-byte values) from memory into an empty Badger directory, through
// RestoreEmpty (bulk) and through Restore (the write path); baseline:
// reading the same bytes (io.Copy to io.Discard).
func BenchmarkRestore100MB(b *testing.B) {
	now := kvNow()
	mem := NewMemory()
	val := make([]byte, 1000)
	muts := make([]Mutation, 0, 102400)
	for i := range 102400 {
		copy(val, fmt.Sprintf("%08d", i))
		muts = append(muts, Mutation{Key: Key{Job: "j", Operator: "a", Namespace: "value:blob", KeyGroup: i % 128, User: fmt.Appendf(nil, "u%08d", i)}, Value: bytes.Clone(val)})
	}
	kvApply(b, mem, muts...)
	scope := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	data, _ := snapTake(b, mem, scope, now)
	sum := objectSum(data)
	// into times one restore into a new store per iteration.
	into := func(restore func(d Backend) error) func(b *testing.B) {
		return func(b *testing.B) {
			var peak int64
			defer func() { b.ReportMetric(float64(peak)/(1<<20), "peak-anon-MiB") }()
			b.SetBytes(int64(len(data)))
			for range b.N {
				b.StopTimer()
				d, err := Open(Options{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				anon := memstat.Start()
				b.StartTimer()
				if err := restore(d); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				peak = max(peak, anon.Stop())
				d.Close()
				b.StartTimer()
			}
		}
	}
	src := []RestoreSource{bytesSource(scope, data, sum)}
	b.Run("bulk", into(func(d Backend) error {
		_, err := d.(BulkRestorer).RestoreEmpty(src, now, nil)
		return err
	}))
	b.Run("layers", into(func(d Backend) error {
		_, err := d.(LayerRestorer).RestoreLayers(src, now, nil)
		return err
	}))
	// The baseline of layers: the bytes written to a file as they are.
	b.Run("write-file", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			b.StopTimer()
			path := filepath.Join(b.TempDir(), "f")
			b.StartTimer()
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", into(func(d Backend) error {
		_, err := d.Restore(bytes.NewReader(data), scope, now)
		return err
	}))
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			io.Copy(io.Discard, bytes.NewReader(data))
		}
	})
}

// appendKV encodes what badger.KVToBuffer does.
func TestAppendKV(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key, value []byte
		exp        int64
		id         uint32
		version    uint64
	}{
		{[]byte("k"), []byte("v"), 0, 1, 1},
		{bytes.Repeat([]byte("k"), 300), bytes.Repeat([]byte("v"), 70000), 1_700_000_000_123, 300, 1 << 40},
		{[]byte{0}, []byte{}, 5, 1 << 20, 200}, // keys are never empty
	} {
		want := z.NewBuffer(1<<10, "test")
		got := z.NewBuffer(1<<10, "test")
		badger.KVToBuffer(&pb.KV{Key: c.key, Value: storedValueEncode(nil, c.value, c.exp), Version: c.version, ExpiresAt: expirySeconds(c.exp), StreamId: c.id}, want)
		appendKV(got, c.id, c.version, c.key, c.value, c.exp)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("appendKV(%d-byte key, %d-byte value, exp %d, id %d) differs from KVToBuffer", len(c.key), len(c.value), c.exp, c.id)
		}
		want.Release()
		got.Release()
	}
}

// BenchmarkRestoreLarge restores ARKFLOW_BENCH_RESTORE_MB (default 0:
// skipped) of 1000-byte values, streamed through a pipe (nothing held in
// memory but what the restore holds; the snapshot is generated as it is
// read), into an empty Badger directory, through RestoreEmpty (bulk) and
// Restore (the write path). peak-anon-MiB is the process's peak
// anonymous memory during the restore.
func BenchmarkRestoreLarge(b *testing.B) {
	mb, _ := strconv.Atoi(os.Getenv("ARKFLOW_BENCH_RESTORE_MB"))
	if mb <= 0 {
		b.Skip("set ARKFLOW_BENCH_RESTORE_MB")
	}
	now := kvNow()
	n := mb << 10
	gen := func(scope Scope, now int64, fn func(key, value []byte, exp int64) error) error {
		val := make([]byte, 1000)
		var key []byte
		for g := range 128 {
			for j := 0; j*128+g < n; j++ {
				i := j*128 + g
				copy(val, fmt.Sprintf("%08d", i))
				var err error
				if key, err = keyEncode(key[:0], Key{Job: "j", Operator: "a", Namespace: "value:blob", KeyGroup: g, User: fmt.Appendf(nil, "u%08d", i)}); err != nil {
					return err
				}
				if err := fn(key, val, 0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	scope := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	for _, bulk := range []bool{true, false} {
		name := "restore"
		if bulk {
			name = "bulk"
		}
		b.Run(name, func(b *testing.B) {
			var peak, total int64
			for range b.N {
				b.StopTimer()
				d, err := Open(Options{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				open := func() (io.ReadCloser, error) {
					pr, pw := io.Pipe()
					go func() {
						_, err := snapshotWrite(pw, scope, now, gen)
						pw.CloseWithError(err)
					}()
					return pr, nil
				}
				anon := memstat.Start()
				b.StartTimer()
				var entries int64
				if bulk {
					infos, err := d.(BulkRestorer).RestoreEmpty([]RestoreSource{{Scope: scope, Open: open}}, now, nil)
					if err != nil {
						b.Fatal(err)
					}
					entries, total = infos[0].Entries, total+infos[0].Bytes
				} else {
					rc, _ := open()
					info, err := d.Restore(rc, scope, now)
					if err != nil {
						b.Fatal(err)
					}
					entries, total = info.Entries, total+info.Bytes
				}
				b.StopTimer()
				peak = max(peak, anon.Stop())
				if entries != int64(n) {
					b.Fatalf("%d entries restored, want %d", entries, n)
				}
				d.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-anon-MiB")
		})
	}
}

// Values above Badger's value threshold (1 KiB here) go to the value log
// through the StreamWriter; they restore, read and reopen like small
// ones, with their expiries.
func TestRestoreEmptyLargeValues(t *testing.T) {
	t.Parallel()
	now := kvNow()
	mem := NewMemory()
	var muts []Mutation
	for i, size := range []int{0, 10, 1000, 1023, 1024, 5000, 300 << 10} {
		for g := range 3 {
			v := bytes.Repeat([]byte{byte('a' + i)}, size)
			exp := int64(0)
			if g == 1 {
				exp = now + 3600_000
			}
			muts = append(muts, Mutation{Key: Key{Job: "j", Operator: "a", Namespace: "ns", KeyGroup: g * 40, User: fmt.Appendf(nil, "k%d", i)}, Value: v, ExpiresAt: exp})
		}
	}
	kvApply(t, mem, muts...)
	scope := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	data, _ := snapTake(t, mem, scope, now)
	want := kvScan(t, mem, Scope{Job: "j", Groups: AllKeyGroups}, now)
	dir := t.TempDir()
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.(BulkRestorer).RestoreEmpty([]RestoreSource{bytesSource(scope, data, objectSum(data))}, now, nil); err != nil {
		t.Fatal(err)
	}
	check := func(b Backend, when string) {
		if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d entries differ from the %d written", when, len(got), len(want))
		}
		for _, m := range muts {
			if v, exp, ok := kvGet(t, b, m.Key, now); !ok || v != string(m.Value) || exp != m.ExpiresAt {
				t.Fatalf("%s: get %s: %d bytes, exp %d, %v", when, m.Key.User, len(v), exp, ok)
			}
		}
	}
	check(b, "restored")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check(b, "reopened")
}

// A store with nothing live but with deleted entries of the very keys
// restored — still in the memtable, or flushed to tables by a reopen —
// restores all of them: the dead versions are dropped first, never shadow
// the restored ones.
func TestRestoreEmptyOverDeletedEntries(t *testing.T) {
	t.Parallel()
	now := kvNow()
	mem := NewMemory()
	snapPopulate(t, mem, now)
	scope := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	data, _ := snapTake(t, mem, scope, now)
	want := kvScan(t, mem, scope, now)
	var puts, dels []Mutation
	for _, e := range want {
		k := Key{Job: e.Job, Operator: e.Op, Namespace: e.NS, KeyGroup: e.Group, User: []byte(e.User)}
		puts = append(puts, kvPut(k, "old", 0))
		dels = append(dels, Mutation{Key: k, Delete: true})
	}
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) {
			dir := t.TempDir()
			b, err := Open(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			kvApply(t, b, puts...)
			kvApply(t, b, dels...)
			if reopen {
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				if b, err = Open(Options{Dir: dir}); err != nil {
					t.Fatal(err)
				}
			}
			defer b.Close()
			if _, err := b.(BulkRestorer).RestoreEmpty([]RestoreSource{bytesSource(scope, data, objectSum(data))}, now, nil); err != nil {
				t.Fatal(err)
			}
			if got := kvScan(t, b, scope, now); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("restored %d entries over deleted ones, want %d", len(got), len(want))
			}
		})
	}
}

// Size, which metrics call at any time, declines while RestoreEmpty runs
// (Badger may be dropping tables) and works again after.
func TestSizeDuringRestoreEmpty(t *testing.T) {
	t.Parallel()
	now := kvNow()
	mem := NewMemory()
	snapPopulate(t, mem, now)
	scope := Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}
	data, _ := snapTake(t, mem, scope, now)
	b, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opened, release := make(chan struct{}), make(chan struct{})
	src := RestoreSource{Scope: scope, Open: func() (io.ReadCloser, error) {
		close(opened)
		<-release
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
	done := make(chan error, 1)
	go func() {
		_, err := b.(BulkRestorer).RestoreEmpty([]RestoreSource{src}, now, nil)
		done <- err
	}()
	<-opened
	if _, err := b.Size("j", "a"); !errors.Is(err, ErrRestoring) {
		t.Fatalf("Size during the restore: %v, want ErrRestoring", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := b.Size("j", "a"); err != nil || n == 0 {
		t.Fatalf("Size after the restore: %d, %v", n, err)
	}
}
