package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
)

// kvCase opens one backend under test.
type kvCase struct {
	name string
	open func(t testing.TB) Backend
}

func kvCases() []kvCase {
	return []kvCase{
		{"memory", func(t testing.TB) Backend { return NewMemory() }},
		{"badger", func(t testing.TB) Backend {
			b, err := Open(Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"badger-inmemory", func(t testing.TB) Backend {
			b, err := Open(Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	}
}

// forEachKV runs f against every backend; the backend is closed after.
func forEachKV(t *testing.T, f func(t *testing.T, b Backend)) {
	for _, c := range kvCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			defer b.Close()
			f(t, b)
		})
	}
}

// kvNow is a wall-clock now (TTLs are processing time: Badger collects by
// the wall clock).
func kvNow() int64 { return time.Now().UnixMilli() }

func kvApply(t testing.TB, b Backend, muts ...Mutation) {
	t.Helper()
	if err := b.Apply(muts); err != nil {
		t.Fatal(err)
	}
}

func kvPut(k Key, v string, exp int64) Mutation {
	return Mutation{Key: k, Value: []byte(v), ExpiresAt: exp}
}

// kvEntry is a copied Entry.
type kvEntry struct {
	Job, Op, NS string
	Group       int
	User, Value string
	Exp         int64
}

func kvScan(t testing.TB, b Backend, scope Scope, now int64) []kvEntry {
	t.Helper()
	var out []kvEntry
	err := b.Scan(scope, now, func(e Entry) error {
		out = append(out, kvEntry{e.Key.Job, e.Key.Operator, e.Key.Namespace, e.Key.KeyGroup, string(e.Key.User), string(e.Value), e.ExpiresAt})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kvGet(t testing.TB, b Backend, k Key, now int64) (string, int64, bool) {
	t.Helper()
	v, exp, ok, err := b.Get(k, now)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), exp, ok
}

func TestBackendGetApplyScan(t *testing.T) {
	t.Parallel()
	forEachKV(t, func(t *testing.T, b Backend) {
		now := kvNow()
		k := Key{Job: "j", Operator: "o", Namespace: "n", KeyGroup: 3, User: []byte("user")}
		if _, _, ok := kvGet(t, b, k, now); ok {
			t.Fatal("found before put")
		}
		kvApply(t, b, kvPut(k, "v1", 0), kvPut(k, "v2", 0)) // in order: last wins
		if v, exp, ok := kvGet(t, b, k, now); !ok || v != "v2" || exp != 0 {
			t.Fatalf("get = %q %d %v", v, exp, ok)
		}
		kvApply(t, b, Mutation{Key: k, Delete: true}, kvPut(k, "v3", 0), Mutation{Key: k, Delete: true})
		if _, _, ok := kvGet(t, b, k, now); ok {
			t.Fatal("found after delete")
		}
		// Empty value is a value.
		kvApply(t, b, Mutation{Key: k})
		if v, _, ok := kvGet(t, b, k, now); !ok || v != "" {
			t.Fatalf("empty value: %q %v", v, ok)
		}
		// The caller may reuse its buffers after Apply and Get.
		buf := []byte("abc")
		kvApply(t, b, Mutation{Key: k, Value: buf})
		buf[0] = 'X'
		got, _, _, _ := b.Get(k, now)
		got[1] = 'Y'
		if v, _, _ := kvGet(t, b, k, now); v != "abc" {
			t.Fatalf("value aliased caller memory: %q", v)
		}
		// A bad mutation anywhere fails the whole batch.
		err := b.Apply([]Mutation{kvPut(Key{Job: "j", Operator: "o", User: []byte("z")}, "z", 0), kvPut(Key{Job: "j", Operator: "o", KeyGroup: 70000}, "x", 0)})
		if err == nil {
			t.Fatal("key group 70000 accepted")
		}
		if _, _, ok := kvGet(t, b, Key{Job: "j", Operator: "o", User: []byte("z")}, now); ok {
			t.Fatal("a failed batch was partly applied")
		}
		if err := b.Apply([]Mutation{{Key: k, Value: []byte("x"), ExpiresAt: -5}}); err == nil {
			t.Fatal("negative expiry accepted")
		}
		if err := b.Scan(Scope{Job: "", Groups: AllKeyGroups}, now, func(Entry) error { return nil }); err == nil {
			t.Fatal("scan without a job accepted")
		}
	})
}

func TestBackendScanOrderAndRange(t *testing.T) {
	t.Parallel()
	forEachKV(t, func(t *testing.T, b Backend) {
		now := kvNow()
		var muts []Mutation
		for _, op := range []string{"b", "a", "cc"} {
			for g := 9; g >= 0; g-- {
				for _, ns := range []string{"y", "x"} {
					for _, u := range []string{"2", "1"} {
						muts = append(muts, kvPut(Key{Job: "j", Operator: op, Namespace: ns, KeyGroup: g * 100, User: []byte(u)}, op+ns+u, 0))
					}
				}
			}
		}
		kvApply(t, b, muts...)
		all := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)
		if len(all) != len(muts) {
			t.Fatalf("scan all: %d entries, want %d", len(all), len(muts))
		}
		// Key order: operator (length, then bytes), group, namespace, user.
		less := func(x, y kvEntry) int {
			kx, _ := keyEncode(nil, Key{Job: x.Job, Operator: x.Op, Namespace: x.NS, KeyGroup: x.Group, User: []byte(x.User)})
			ky, _ := keyEncode(nil, Key{Job: y.Job, Operator: y.Op, Namespace: y.NS, KeyGroup: y.Group, User: []byte(y.User)})
			return bytes.Compare(kx, ky)
		}
		if !slices.IsSortedFunc(all, less) {
			t.Fatal("scan not in key order")
		}
		if all[0].Op != "a" || all[0].Group != 0 || all[0].NS != "x" || all[0].User != "1" {
			t.Fatalf("first entry %+v", all[0])
		}
		// Group range over every operator, and over one.
		sub := kvScan(t, b, Scope{Job: "j", Groups: job.KeyGroupRange{Start: 150, End: 420}}, now)
		if len(sub) != 3*3*4 {
			t.Fatalf("groups [150,420] of every operator: %d entries", len(sub))
		}
		for _, e := range sub {
			if e.Group < 150 || e.Group > 420 {
				t.Fatalf("entry of group %d", e.Group)
			}
		}
		one := kvScan(t, b, Scope{Job: "j", Operator: "cc", Groups: job.KeyGroupRange{Start: 900, End: 900}}, now)
		if len(one) != 4 || one[0].Op != "cc" {
			t.Fatalf("one group of cc: %+v", one)
		}
		if got := kvScan(t, b, Scope{Job: "j", Groups: job.KeyGroupRange{Start: 5, End: 4}}, now); len(got) != 0 {
			t.Fatal("empty range returned entries")
		}
		// An error from fn stops the scan and is returned as is.
		stop := errors.New("stop")
		n := 0
		err := b.Scan(Scope{Job: "j", Groups: AllKeyGroups}, now, func(Entry) error {
			n++
			if n == 5 {
				return stop
			}
			return nil
		})
		if err != stop || n != 5 {
			t.Fatalf("scan err %v after %d", err, n)
		}
		// A callback may call the backend.
		err = b.Scan(Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, now, func(e Entry) error {
			_, _, ok, err := b.Get(e.Key, now)
			if !ok || err != nil {
				return fmt.Errorf("nested get: %v %v", ok, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// Two jobs, two operators and two namespaces with the same user keys never
// see each other's entries — in one Badger directory too, across a reopen.
func TestBackendIsolation(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, b Backend) {
		now := kvNow()
		for _, j := range []string{"job1", "job2"} {
			for _, op := range []string{"op1", "op2"} {
				for _, ns := range []string{"", "ns"} {
					k := Key{Job: j, Operator: op, Namespace: ns, KeyGroup: 5, User: []byte("k")}
					if v, _, ok := kvGet(t, b, k, now); !ok || v != j+op+ns {
						t.Fatalf("%s/%s/%s = %q %v", j, op, ns, v, ok)
					}
				}
			}
			got := kvScan(t, b, Scope{Job: j, Groups: AllKeyGroups}, now)
			if len(got) != 4 {
				t.Fatalf("job %s scan: %+v", j, got)
			}
			for _, e := range got {
				if e.Job != j || e.Value != e.Job+e.Op+e.NS {
					t.Fatalf("job %s scan saw %+v", j, e)
				}
			}
			got = kvScan(t, b, Scope{Job: j, Operator: "op1", Groups: AllKeyGroups}, now)
			if len(got) != 2 || got[0].Op != "op1" || got[1].Op != "op1" {
				t.Fatalf("op1 scan: %+v", got)
			}
		}
		// Prefix-like names are distinct: "job" vs "job1", "op" vs "op1".
		if got := kvScan(t, b, Scope{Job: "job", Groups: AllKeyGroups}, now); len(got) != 0 {
			t.Fatalf("job %q sees %+v", "job", got)
		}
		if got := kvScan(t, b, Scope{Job: "job1", Operator: "op", Groups: AllKeyGroups}, now); len(got) != 0 {
			t.Fatalf("operator %q sees %+v", "op", got)
		}
		s1, _ := b.Size("job1", "op1")
		s2, _ := b.Size("job1", "")
		s3, _ := b.Size("job2", "")
		if s1 <= 0 || s2 != 2*s1 || s3 != s2 {
			t.Fatalf("sizes %d %d %d", s1, s2, s3)
		}
	}
	populate := func(t *testing.T, b Backend) {
		var muts []Mutation
		for _, j := range []string{"job1", "job2"} {
			for _, op := range []string{"op1", "op2"} {
				for _, ns := range []string{"", "ns"} {
					muts = append(muts, kvPut(Key{Job: j, Operator: op, Namespace: ns, KeyGroup: 5, User: []byte("k")}, j+op+ns, 0))
				}
			}
		}
		kvApply(t, b, muts...)
	}
	forEachKV(t, func(t *testing.T, b Backend) {
		populate(t, b)
		check(t, b)
	})
	t.Run("badger-reopen", func(t *testing.T) {
		dir := t.TempDir()
		b, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		populate(t, b)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b, err = Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if s, _ := BadgerStatsOf(b); !s.Sealed || s.Open <= 0 || OpenDuration(b) != s.Open {
			t.Fatalf("stats after a clean close: %+v", s)
		}
		check(t, b)
	})
}

func TestBackendTTL(t *testing.T) {
	t.Parallel()
	forEachKV(t, func(t *testing.T, b Backend) {
		now := kvNow()
		k := func(u string) Key { return Key{Job: "j", Operator: "o", KeyGroup: 1, User: []byte(u)} }
		kvApply(t, b,
			kvPut(k("forever"), "f", 0),
			kvPut(k("soon"), "s", now+10_000),    // expires in 10 s
			kvPut(k("later"), "l", now+3600_000), // in an hour
			kvPut(k("past"), "p", now-1),         // already expired by the wall clock
		)
		if _, _, ok := kvGet(t, b, k("past"), now); ok {
			t.Fatal("expired entry returned")
		}
		if v, exp, ok := kvGet(t, b, k("soon"), now); !ok || v != "s" || exp != now+10_000 {
			t.Fatalf("soon: %q %d %v", v, exp, ok)
		}
		// At a later now, "soon" is gone for Get and Scan.
		later := now + 20_000
		if _, _, ok := kvGet(t, b, k("soon"), later); ok {
			t.Fatal("expired entry returned by Get")
		}
		if _, _, ok := kvGet(t, b, k("soon"), now+10_000); ok {
			t.Fatal("entry returned at its expiry")
		}
		var users []string
		for _, e := range kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, later) {
			users = append(users, e.User)
		}
		if !slices.Equal(users, []string{"forever", "later"}) {
			t.Fatalf("scan at later: %v", users)
		}
		// Snapshot at now: three live entries, with their expiries.
		var snap bytes.Buffer
		info, err := b.Snapshot(&snap, Scope{Job: "j", Groups: AllKeyGroups}, now)
		if err != nil || info.Entries != 3 {
			t.Fatalf("snapshot: %+v %v", info, err)
		}
		for _, c := range kvCases() {
			dst := c.open(t)
			// Restore at a later now: "soon" expired in between and is
			// not resurrected; the others keep their expiry.
			ri, err := dst.Restore(bytes.NewReader(snap.Bytes()), Scope{Job: "j", Groups: AllKeyGroups}, later)
			if err != nil {
				t.Fatal(err)
			}
			if ri.Entries != 2 || ri.Skipped != 1 || ri.Checksum != info.Checksum || ri.Bytes != info.Bytes {
				t.Fatalf("%s restore info %+v (snapshot %+v)", c.name, ri, info)
			}
			got := kvScan(t, dst, Scope{Job: "j", Groups: AllKeyGroups}, now)
			if len(got) != 2 || got[0].User != "forever" || got[0].Exp != 0 || got[1].User != "later" || got[1].Exp != now+3600_000 {
				t.Fatalf("%s restored %+v", c.name, got)
			}
			if _, _, ok := kvGet(t, dst, k("later"), now+3600_000); ok {
				t.Fatalf("%s: restored entry outlived its expiry", c.name)
			}
			dst.Close()
		}
	})
}

func TestBackendSize(t *testing.T) {
	t.Parallel()
	sizes := map[string][]int64{}
	for _, c := range kvCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			defer b.Close()
			now := kvNow()
			size := func(op string) int64 {
				n, err := b.Size("j", op)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			var trace []int64
			if n := size(""); n != 0 {
				t.Fatalf("empty size %d", n)
			}
			var muts []Mutation
			for i := range 500 {
				v := strings.Repeat("v", 30)
				if i%50 == 0 {
					v = strings.Repeat("w", 5000) // in Badger's value log
				}
				muts = append(muts, kvPut(Key{Job: "j", Operator: "o", Namespace: "ns", KeyGroup: i % 64, User: fmt.Appendf(nil, "user-%d", i)}, v, 0))
			}
			kvApply(t, b, muts...)
			s1 := size("o")
			trace = append(trace, s1)
			// Exact: encoded key + 9-byte value header + value.
			var want int64
			for _, m := range muts {
				want += int64(keyEncodedLen(&m.Key) + storedValueHeader + len(m.Value))
			}
			if s1 != want {
				t.Fatalf("size %d, want exactly %d", s1, want)
			}
			kvApply(t, b, kvPut(Key{Job: "j", Operator: "o2", User: []byte("x")}, "y", 0))
			s2 := size("")
			if s2 <= s1 || size("o2") != s2-s1 {
				t.Fatalf("job size %d, operator sizes %d + %d", s2, s1, size("o2"))
			}
			if n, _ := b.Size("other", ""); n != 0 {
				t.Fatalf("other job size %d", n)
			}
			// Deletes shrink it; overwrites change it by the difference.
			var dels []Mutation
			for _, m := range muts[:250] {
				dels = append(dels, Mutation{Key: m.Key, Delete: true})
			}
			kvApply(t, b, dels...)
			s3 := size("o")
			trace = append(trace, s3)
			if s3 >= s1 || s3 <= 0 {
				t.Fatalf("size after deleting half: %d (was %d)", s3, s1)
			}
			m := muts[300]
			kvApply(t, b, kvPut(m.Key, string(m.Value)+"1234", 0))
			if s4 := size("o"); s4 != s3+4 {
				t.Fatalf("size after growing a value by 4: %d, want %d", s4, s3+4)
			}
			// Collected (expired by the wall clock) entries do not count.
			kvApply(t, b, kvPut(Key{Job: "j", Operator: "o3", User: []byte("x")}, "y", now-5000))
			if n := size("o3"); n != 0 {
				t.Fatalf("expired entry counted: %d", n)
			}
			for _, m := range muts[250:] {
				dels = append(dels, Mutation{Key: m.Key, Delete: true})
			}
			kvApply(t, b, dels...)
			if n := size("o"); n != 0 {
				t.Fatalf("size after deleting everything: %d", n)
			}
			sizes[c.name] = trace
		})
	}
	if !slices.Equal(sizes["memory"], sizes["badger"]) || !slices.Equal(sizes["memory"], sizes["badger-inmemory"]) {
		t.Fatalf("backends disagree on sizes: %v", sizes)
	}
}

func TestBackendCloseTwiceAndErrClosed(t *testing.T) {
	t.Parallel()
	for _, c := range kvCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			k := Key{Job: "j", Operator: "o", User: []byte("k")}
			kvApply(t, b, kvPut(k, "v", 0))
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			now := kvNow()
			scope := Scope{Job: "j", Groups: AllKeyGroups}
			if _, _, _, err := b.Get(k, now); !errors.Is(err, ErrClosed) {
				t.Errorf("Get: %v", err)
			}
			if err := b.Apply([]Mutation{kvPut(k, "v", 0)}); !errors.Is(err, ErrClosed) {
				t.Errorf("Apply: %v", err)
			}
			if err := b.Scan(scope, now, func(Entry) error { return nil }); !errors.Is(err, ErrClosed) {
				t.Errorf("Scan: %v", err)
			}
			if _, err := b.Snapshot(io.Discard, scope, now); !errors.Is(err, ErrClosed) {
				t.Errorf("Snapshot: %v", err)
			}
			if _, err := b.Restore(bytes.NewReader(nil), scope, now); !errors.Is(err, ErrClosed) {
				t.Errorf("Restore: %v", err)
			}
			if _, err := b.Size("j", ""); !errors.Is(err, ErrClosed) {
				t.Errorf("Size: %v", err)
			}
		})
	}
}

// Close waits for calls in flight; calls racing with it either finish or
// return ErrClosed.
func TestBackendConcurrent(t *testing.T) {
	t.Parallel()
	for _, c := range kvCases() {
		t.Run(c.name, func(t *testing.T) {
			b := c.open(t)
			now := kvNow()
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						k := Key{Job: "j", Operator: fmt.Sprint("o", w), KeyGroup: i % 16, User: fmt.Appendf(nil, "%d", i)}
						if err := b.Apply([]Mutation{kvPut(k, "v", 0)}); err != nil {
							errs <- err
							return
						}
						if _, _, ok, err := b.Get(k, now); err != nil || !ok {
							errs <- fmt.Errorf("get %v %v", ok, err)
							return
						}
						if i%50 == 0 {
							if err := b.Scan(Scope{Job: "j", Groups: AllKeyGroups}, now, func(Entry) error { return nil }); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)
			if len(got) != 800 {
				t.Fatalf("%d entries", len(got))
			}
			// Racing with Close.
			var wg2 sync.WaitGroup
			for range 4 {
				wg2.Add(1)
				go func() {
					defer wg2.Done()
					for i := 0; ; i++ {
						err := b.Scan(Scope{Job: "j", Groups: AllKeyGroups}, now, func(Entry) error { return nil })
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			time.Sleep(10 * time.Millisecond)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			wg2.Wait()
		})
	}
}

// Badger refuses transactions above ~15% of a memtable; Apply goes on in
// further transactions.
func TestBadgerApplyLargeBatch(t *testing.T) {
	t.Parallel()
	b, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	muts := make([]Mutation, 150_000)
	for i := range muts {
		muts[i] = kvPut(Key{Job: "j", Operator: "o", KeyGroup: i % 128, User: fmt.Appendf(nil, "%08d", i)}, "0123456789012345678901234567890123456789", 0)
	}
	kvApply(t, b, muts...)
	n := 0
	if err := b.Scan(Scope{Job: "j", Groups: AllKeyGroups}, kvNow(), func(Entry) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != len(muts) {
		t.Fatalf("%d of %d entries", n, len(muts))
	}
}

func TestOpenUnknownBackend(t *testing.T) {
	t.Parallel()
	if _, err := Open(Options{Backend: "rocks"}); err == nil {
		t.Fatal("unknown backend accepted")
	}
	b, err := Open(Options{Backend: Memory})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, ok := BadgerStatsOf(b); ok || OpenDuration(b) != 0 {
		t.Fatal("memory backend has badger stats")
	}
}
