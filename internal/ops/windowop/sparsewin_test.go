package windowop

import (
	"math/rand/v2"
	"testing"
)

// A window's groups by key against a map, through its sparse form, the
// move to the slice and the slice's growth: keys drawn from a key space
// that grows as the operator sees new keys, windows holding a few of them
// or most.
func TestWindowGroupsByKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var sparse, moved int // trials that used the map, and that left it
	for trial := range 200 {
		x := &win{}
		model := map[int32]int32{}
		seen := rng.IntN(3 * sparseMin)         // keys the operator has seen
		hold := 1 + rng.IntN(seen/sparseMax+64) // keys this window will hold
		if trial%4 == 0 {
			hold = seen / 2 // enough to move to the slice
		}
		sparseSeen := false
		for n := int32(0); len(model) < hold; n++ {
			seen += rng.IntN(3) // new keys arrive meanwhile
			key := int32(rng.IntN(seen + 1))
			if g := x.lookup(key); g != model[key]-1 {
				t.Fatalf("trial %d: key %d's group %d, the model's %d", trial, key, g, model[key]-1)
			}
			if _, ok := model[key]; ok {
				continue
			}
			model[key] = n + 1 // 0 stands for none in the model
			x.set(key, n, seen+1)
			x.members = append(x.members, n)
			sparseSeen = sparseSeen || x.byKey == nil
		}
		for key, g := range model {
			if got := x.lookup(key); got != g-1 {
				t.Fatalf("trial %d: at the end key %d's group %d, the model's %d (sparse %v)", trial, key, got, g-1, x.byKey == nil)
			}
		}
		if got := x.lookup(int32(seen + 5)); got != -1 {
			t.Fatalf("trial %d: a key never set has group %d", trial, got)
		}
		if sparseSeen {
			sparse++
			if x.byKey != nil {
				moved++
			}
		}
	}
	if sparse == 0 || moved == 0 {
		t.Fatalf("%d trials used the map and %d moved to the slice: the test misses a form", sparse, moved)
	}
}
