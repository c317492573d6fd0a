package statestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Keys that come and go between scans, as a join's kept rows do, leave
// the memory backend no larger than its live keys (plus a constant), and
// scans, frozen views and snapshots taken among the churn see exactly the
// live keys of a model map.
func TestMemoryChurnStaysBounded(t *testing.T) {
	t.Parallel()
	b := NewMemory().(*memBackend)
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	key := func(i int) Key {
		return Key{Job: "j", Operator: "op", Namespace: "rows", KeyGroup: i % 7, User: fmt.Appendf(nil, "k%09d", i)}
	}
	model := map[string][]byte{}
	const live, total = 2000, 300_000
	check := func(at int, view Backend) {
		t.Helper()
		var got []string
		err := view.Scan(Scope{Job: "j", Operator: "op", Groups: AllKeyGroups}, 0, func(e Entry) error {
			if want, ok := model[string(e.Key.User)]; !ok || !bytes.Equal(want, e.Value) {
				return fmt.Errorf("key %s: value %q, the model has %q (%v)", e.Key.User, e.Value, want, ok)
			}
			got = append(got, string(e.Key.User))
			return nil
		})
		if err != nil {
			t.Fatalf("after %d: %v", at, err)
		}
		if len(got) != len(model) {
			t.Fatalf("after %d: the scan saw %d keys, the model has %d", at, len(got), len(model))
		}
		slices.Sort(got)
		if len(slices.Compact(got)) != len(model) {
			t.Fatalf("after %d: the scan saw a key twice", at)
		}
	}
	for i := 0; i < total; i++ {
		v := fmt.Appendf(nil, "v%d", rng.IntN(1000))
		muts := []Mutation{{Key: key(i), Value: v}}
		model[string(key(i).User)] = v
		if i >= live {
			// Mostly the oldest key, sometimes one in the middle, and now
			// and then one that comes back.
			d := i - live
			if rng.IntN(10) == 0 {
				d = i - live/2 - rng.IntN(live/2)
			}
			if _, ok := model[string(key(d).User)]; ok {
				muts = append(muts, Mutation{Key: key(d), Delete: true})
				delete(model, string(key(d).User))
				if rng.IntN(20) == 0 {
					v := []byte("again")
					muts = append(muts, Mutation{Key: key(d), Value: v})
					model[string(key(d).User)] = v
				}
			}
		}
		if err := b.Apply(muts); err != nil {
			t.Fatal(err)
		}
		switch {
		case i%50_000 == 49_999:
			check(i, b)
		case i%70_001 == 70_000:
			f, err := b.Freeze()
			if err != nil {
				t.Fatal(err)
			}
			check(i, f.(Backend))
			f.Close()
		}
		if n := len(b.m) + len(b.pending) + len(b.sorted); n > 8*len(model)+3*4096 {
			t.Fatalf("after %d mutations with %d live keys the backend holds %d map entries, %d pending and %d sorted keys", i, len(model), len(b.m), len(b.pending), len(b.sorted))
		}
	}
	check(total, b)
}
