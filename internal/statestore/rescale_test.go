package statestore

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/job"
)

// writeOwn stores a subtask's own applied positions, as its journal's
// commits do.
func writeOwn(t *testing.T, b Backend, op string, group int, pos map[position]int64) {
	t.Helper()
	var muts []Mutation
	for p, off := range pos {
		muts = append(muts, Mutation{Key: Key{Job: "j", Operator: op, Namespace: PositionsNamespace, KeyGroup: group, User: positionKey(p)},
			Value: binary.BigEndian.AppendUint64(nil, uint64(off))})
	}
	if err := b.Apply(muts); err != nil {
		t.Fatal(err)
	}
}

const noOffset = int64(-1 << 63)

// After a relayout, every key group keeps the frontier of the
// subtask that owned it, whichever new subtask owns it now; a later
// relayout carries both what a subtask applied itself and what it
// inherited.
func TestRelayoutKeepsEveryKeyGroupsFrontier(t *testing.T) {
	t.Parallel()
	b := NewMemory()
	const M = 16
	p0, p1 := position{"in", 0}, position{"in", 1}
	writeOwn(t, b, "agg", 0, map[position]int64{p0: 100, p1: 50}) // subtask 0 of 2: groups 0-7
	writeOwn(t, b, "agg", 8, map[position]int64{p0: 120})         // subtask 1 of 2: groups 8-15
	// Another operator's positions are not touched.
	writeOwn(t, b, "other", 0, map[position]int64{p0: 7})
	if err := Relayout(b, "j", "agg", M, 2, 3); err != nil {
		t.Fatal(err)
	}
	check := func(par int, want func(g int, p position) int64) {
		t.Helper()
		for s := range par {
			r := keys.RangeFor(M, par, s)
			jr, err := NewJournal(b, "j", "agg", r)
			if err != nil {
				t.Fatal(err)
			}
			for g := r.Start; g <= r.End; g++ {
				for _, p := range []position{p0, p1} {
					if got, w := jr.AppliedIn(p.source, p.partition, g), want(g, p); got != w {
						t.Errorf("parallelism %d, subtask %d, group %d, %v: applied %d, want %d", par, s, g, p, got, w)
					}
				}
			}
		}
	}
	first := func(g int, p position) int64 {
		switch {
		case g < 8 && p == p0:
			return 100
		case g < 8:
			return 50
		case p == p0:
			return 120
		}
		return noOffset
	}
	check(3, first)
	// The old subtasks' own entries are gone: subtask 0 of 3 starts at
	// group 0 like subtask 0 of 2 did, and must not read them as its own.
	j0, err := NewJournal(b, "j", "agg", keys.RangeFor(M, 3, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := j0.Applied("in", 0); got != noOffset {
		t.Fatalf("subtask 0 of 3 has own position %d after the relayout", got)
	}
	if jo, _ := NewJournal(b, "j", "other", keys.RangeFor(M, 1, 0)); jo.Applied("in", 0) != 7 {
		t.Fatal("the relayout changed another operator's positions")
	}
	// Subtask 1 of 3 (groups 5-10) applies partition 0 up to 110 itself:
	// above what groups 5-7 inherited, below what 8-10 did.
	writeOwn(t, b, "agg", 5, map[position]int64{p0: 110})
	if err := Relayout(b, "j", "agg", M, 3, 1); err != nil {
		t.Fatal(err)
	}
	check(1, func(g int, p position) int64 {
		if p == p0 && g >= 5 && g <= 7 {
			return 110
		}
		return first(g, p)
	})
}

// A random chain of relayouts against a model that tracks every key
// group's frontier.
func TestRelayoutRandomChains(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		M := 1 + rng.IntN(40)
		b := NewMemory()
		parts := []position{{"a", 0}, {"a", 1}, {"b", 0}}
		model := make([]map[position]int64, M)
		for g := range model {
			model[g] = map[position]int64{}
		}
		par := 1 + rng.IntN(M)
		for step := range 6 {
			// Each subtask applies some more input on its own.
			for s := range par {
				r := keys.RangeFor(M, par, s)
				if r.Len() == 0 {
					continue
				}
				jr, err := NewJournal(b, "j", "op", r)
				if err != nil {
					t.Fatal(err)
				}
				own := map[position]int64{}
				for _, p := range parts {
					if rng.IntN(3) == 0 {
						continue
					}
					cur := jr.Applied(p.source, p.partition)
					off := int64(rng.IntN(100))
					if cur != noOffset {
						off += cur
					}
					own[p] = off
					for g := r.Start; g <= r.End; g++ {
						model[g][p] = max(model[g][p], off)
					}
				}
				if len(own) > 0 {
					// A journal keeps its own entry whole: merge with what
					// was there.
					for _, p := range parts {
						if _, ok := own[p]; !ok {
							if cur := jr.Applied(p.source, p.partition); cur != noOffset {
								own[p] = cur
							}
						}
					}
					writeOwn(t, b, "op", r.Start, own)
				}
			}
			next := 1 + rng.IntN(M)
			if err := Relayout(b, "j", "op", M, par, next); err != nil {
				t.Fatal(err)
			}
			par = next
			for s := range par {
				r := keys.RangeFor(M, par, s)
				if r.Len() == 0 {
					continue
				}
				jr, err := NewJournal(b, "j", "op", r)
				if err != nil {
					t.Fatal(err)
				}
				for g := r.Start; g <= r.End; g++ {
					for _, p := range parts {
						want, ok := model[g][p]
						if !ok {
							want = noOffset
						}
						if got := jr.AppliedIn(p.source, p.partition, g); got != want {
							t.Fatalf("seed %d step %d: M=%d parallelism %d group %d %v: applied %d, want %d", seed, step, M, par, g, p, got, want)
						}
					}
				}
			}
		}
		if n := countNamespace(t, b, "op", M, InheritedNamespace); n > M*len(parts) {
			t.Fatalf("seed %d: %d inherited entries for %d key groups", seed, n, M)
		}
	}
}

func countNamespace(t *testing.T, b Backend, op string, M int, ns string) int {
	t.Helper()
	n := 0
	err := ScanNamespace(b, Scope{Job: "j", Operator: op, Groups: job.KeyGroupRange{Start: 0, End: M - 1}}, ns, nil, 0, func(Entry) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRelayoutRefusesBadParallelism(t *testing.T) {
	t.Parallel()
	for _, c := range [][3]int{{8, 0, 2}, {8, 2, 9}, {8, -1, 1}} {
		if err := Relayout(NewMemory(), "j", "op", c[0], c[1], c[2]); err == nil {
			t.Errorf("Relayout(M=%d, %d → %d) accepted", c[0], c[1], c[2])
		}
	}
}
