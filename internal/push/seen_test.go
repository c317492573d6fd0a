package push

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// seenModel is the reference seen-set: the keys accepted, in order, of
// which the newest keep are seen.
type seenModel struct {
	keep  int
	order []string
}

func (m *seenModel) accept(k string) {
	if !m.seen(k) {
		m.order = append(m.order, k)
	}
}

func (m *seenModel) seen(k string) bool {
	return slices.Contains(m.order[max(len(m.order)-m.keep, 0):], k)
}

// Random calls of random keys, each accepted or refused at random, against
// the model: Claim pushes exactly the rows whose keys are neither seen nor
// repeated earlier in the call (and every row without a key); a refused
// call's keys stay free; the set keeps the newest keep keys.
func TestSeenAgainstModel(t *testing.T) {
	const keep = 20
	rng := rand.New(rand.NewPCG(4, 5))
	s := NewSeen(keep)
	m := &seenModel{keep: keep}
	for call := range 2000 {
		keys := make([]string, 1+rng.IntN(4))
		for i := range keys {
			if rng.IntN(8) > 0 {
				keys[i] = strconv.Itoa(rng.IntN(60))
			}
		}
		push, sums, err := s.Claim(context.Background(), keys)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		inCall := map[string]bool{}
		for i, k := range keys {
			if k == "" || (!m.seen(k) && !inCall[k]) {
				want = append(want, i)
			}
			inCall[k] = k != ""
		}
		if !slices.Equal(push, want) {
			t.Fatalf("call %d %q (seen: %v): pushes rows %v, want %v", call, keys, m.order[max(len(m.order)-keep, 0):], push, want)
		}
		for j, i := range push {
			if (sums[j] == Sum{}) != (keys[i] == "") {
				t.Fatalf("call %d: row %d (key %q) has sum %x", call, i, keys[i], sums[j])
			}
		}
		if rng.IntN(4) == 0 {
			s.Settle(sums, errors.New("refused"))
			continue
		}
		s.Settle(sums, nil)
		for _, i := range push {
			if keys[i] != "" {
				m.accept(keys[i])
			}
		}
		if got, want := s.Len(), min(len(m.order), keep); got != want {
			t.Fatalf("call %d: %d keys seen, want %d", call, got, want)
		}
	}
}

// Two calls claiming the same key: the second waits for the first's
// outcome. Accepted, the key is a duplicate for the second; refused, the
// second takes it. A waiting claim gives up when its context ends.
func TestSeenClaimWaitsForTheOutcome(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprint("refused=", refuse), func(t *testing.T) {
			s := NewSeen(10)
			ctx := context.Background()
			_, first, err := s.Claim(ctx, []string{"a", "b"})
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if _, _, err := s.Claim(short, []string{"c", "b"}); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("claim of a claimed key: %v, want it to wait until its context ends", err)
			}
			type result struct {
				push []int
				err  error
			}
			second := make(chan result, 1)
			go func() {
				push, _, err := s.Claim(ctx, []string{"c", "b"})
				second <- result{push, err}
			}()
			var outcome error
			if refuse {
				outcome = errors.New("stopped")
			}
			s.Settle(first, outcome)
			r := <-second
			want := []int{0}
			if refuse {
				want = []int{0, 1}
			}
			if r.err != nil || !slices.Equal(r.push, want) {
				t.Fatalf("the second claim: rows %v, %v; want %v", r.push, r.err, want)
			}
		})
	}
}

// Many goroutines claim the same keys at once: each key is pushed by one.
func TestSeenConcurrentClaims(t *testing.T) {
	s := NewSeen(1000)
	const keys, racers = 100, 8
	var mu sync.Mutex
	pushed := map[string]int{}
	var wg sync.WaitGroup
	for g := range racers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for _, k := range rng.Perm(keys) {
				key := strconv.Itoa(k)
				push, sums, err := s.Claim(context.Background(), []string{key})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				pushed[key] += len(push)
				mu.Unlock()
				s.Settle(sums, nil)
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if n := pushed[strconv.Itoa(k)]; n != 1 {
			t.Errorf("key %d pushed %d times, want once", k, n)
		}
	}
}

// accept claims and accepts keys.
func accept(t *testing.T, s *Seen, keys ...string) {
	t.Helper()
	_, sums, err := s.Claim(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	s.Settle(sums, nil)
}

// seenKeys returns which of keys s has seen.
func seenKeys(t *testing.T, s *Seen, keys []string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		push, sums, err := s.Claim(context.Background(), []string{k})
		if err != nil {
			t.Fatal(err)
		}
		if len(push) == 0 {
			out = append(out, k)
		}
		s.Settle(sums, errors.New("only looking"))
	}
	return out
}

// What Save wrote, Open reads back: the newest keep keys, across appends
// and compactions; the file never grows past twice keep keys; keys
// recovered from the WAL are saved too.
func TestSeenSaveAndOpen(t *testing.T) {
	const keep = 50
	path := filepath.Join(t.TempDir(), "KEYS")
	s := NewSeen(keep)
	if err := s.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	var all []string
	rng := rand.New(rand.NewPCG(6, 7))
	for i := 0; i < 400; {
		var batch []string
		for range 1 + rng.IntN(15) {
			batch = append(batch, "k"+strconv.Itoa(i))
			i++
		}
		if rng.IntN(3) == 0 {
			s.Recover(batch)
		} else {
			accept(t, s, batch...)
		}
		all = append(all, batch...)
		s.Save()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if max := int64(len(keyMagic) + 2*keep*(16+8)); fi.Size() > max {
			t.Fatalf("after %d keys the key log has %d bytes, more than %d", i, fi.Size(), max)
		}
		again := NewSeen(keep)
		if err := again.Open(path, nil); err != nil {
			t.Fatal(err)
		}
		want := all[max(len(all)-keep, 0):]
		if got := seenKeys(t, again, all); !slices.Equal(got, want) {
			t.Fatalf("after %d keys, reopened: seen %v, want the newest %d: %v", i, got, keep, want)
		}
	}
}

// A torn last record (a crash during an append) is cut at Open, with the
// keys before it kept; appends after it are read back.
func TestSeenOpenCutsATornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "KEYS")
	s := NewSeen(100)
	if err := s.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	accept(t, s, "a", "b")
	s.Save()
	accept(t, s, "c")
	s.Save()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < 8+16; cut++ {
		if err := os.WriteFile(path, b[:len(b)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		again := NewSeen(100)
		if err := again.Open(path, nil); err != nil {
			t.Fatal(err)
		}
		accept(t, again, "d")
		again.Save()
		third := NewSeen(100)
		if err := third.Open(path, nil); err != nil {
			t.Fatal(err)
		}
		if got := seenKeys(t, third, []string{"a", "b", "c", "d"}); !slices.Equal(got, []string{"a", "b", "d"}) {
			t.Fatalf("%d bytes cut: seen %v, want a, b (before the torn record) and d (appended after)", cut, got)
		}
	}
	if err := os.WriteFile(path, []byte("not keys"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewSeen(100).Open(path, nil); err == nil {
		t.Fatal("Open of a file without the header: no error")
	}
}

// A failed Save fails the claims that follow, until a Save succeeds;
// that Save writes the set whole, so nothing accepted meanwhile is lost.
func TestSeenFailedSaveFailsClaims(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "KEYS")
	s := NewSeen(100)
	if err := s.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	accept(t, s, "a")
	s.Save()
	accept(t, s, "b")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.Save()
	if _, _, err := s.Claim(context.Background(), []string{"c"}); err == nil {
		t.Fatal("claim after a failed save: no error")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Save()
	accept(t, s, "c")
	s.Save()
	again := NewSeen(100)
	if err := again.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	if got := seenKeys(t, again, []string{"a", "b", "c"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after the failed save and a good one: seen %v, want a, b, c", got)
	}
}

// seenHeap returns the heap a seen-set of keep keys takes once 3×keep
// keys went through it, saved as the WAL would save them.
func seenHeap(t testing.TB, keep int) uint64 {
	path := filepath.Join(t.TempDir(), "KEYS")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewSeen(keep)
	if err := s.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := make([]string, 1)
	for i := range 3 * keep {
		// Keys as a client would make them: 36-byte UUID-like strings.
		keys[0] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919)
		_, sums, err := s.Claim(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		s.Settle(sums, nil)
		if i%10_000 == 0 {
			s.Save()
		}
	}
	s.Save()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != keep {
		t.Fatalf("%d keys seen, want %d", s.Len(), keep)
	}
	runtime.KeepAlive(s)
	return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
}

// The seen-set's heap is bounded by its retention, whatever went
// through it: at most 80 bytes a key retained (16 in the ring, the map
// entry, and the map's growth).
func TestSeenHeapBoundedByRetention(t *testing.T) {
	const keep = 100_000
	heap := seenHeap(t, keep)
	t.Logf("%d keys retained of %d: %d bytes of heap, %.1f a key", keep, 3*keep, heap, float64(heap)/keep)
	if heap > 80*keep {
		t.Fatalf("the seen-set takes %d bytes for %d keys, more than 80 a key", heap, keep)
	}
}

// BenchmarkSeenHeap measures the heap of a seen-set at the default
// retention (1,000,000 keys) after 3,000,000 keys went through it.
func BenchmarkSeenHeap(b *testing.B) {
	for range b.N {
		heap := seenHeap(b, 1_000_000)
		b.ReportMetric(float64(heap)/1_000_000, "bytes/key")
		b.ReportMetric(float64(heap)/(1<<20), "MiB")
	}
}
