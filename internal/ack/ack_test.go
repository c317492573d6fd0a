package ack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// recorder counts completions of a node and keeps the errors it got.
type recorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *recorder) done(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *recorder) calls() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestNewCompletesOnLastRelease(t *testing.T) {
	for _, extra := range []int{0, 1, 2, 7} {
		t.Run(fmt.Sprint(extra), func(t *testing.T) {
			var rec recorder
			n := New(rec.done)
			if got := n.Pending(); got != 1 {
				t.Fatalf("Pending after New = %d, want 1", got)
			}
			n.Retain(extra)
			if got := n.Pending(); got != int64(1+extra) {
				t.Fatalf("Pending after Retain(%d) = %d, want %d", extra, got, 1+extra)
			}
			for i := 0; i < extra; i++ {
				n.Release(nil)
				if c := rec.calls(); len(c) != 0 {
					t.Fatalf("completed after %d of %d releases", i+1, extra+1)
				}
				if got, want := n.Pending(), int64(extra-i); got != want {
					t.Fatalf("Pending = %d, want %d", got, want)
				}
			}
			n.Release(nil)
			c := rec.calls()
			if len(c) != 1 || c[0] != nil {
				t.Fatalf("done calls = %v, want exactly one with nil", c)
			}
			if n.Pending() != 0 {
				t.Fatalf("Pending after completion = %d", n.Pending())
			}
		})
	}
}

func TestNilDoneIsAllowed(t *testing.T) {
	n := New(nil)
	n.Retain(1)
	n.Release(errors.New("x"))
	n.Release(nil)
	if n.Pending() != 0 {
		t.Fatalf("Pending = %d", n.Pending())
	}
}

func TestFirstErrorWins(t *testing.T) {
	e1, e2 := errors.New("first"), errors.New("second")
	cases := []struct {
		name string
		errs []error
		want error
	}{
		{"all nil", []error{nil, nil, nil}, nil},
		{"first", []error{e1, e2, nil}, e1},
		{"after nil", []error{nil, e2, e1}, e2},
		{"last only", []error{nil, nil, e1}, e1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			n := New(rec.done)
			n.Retain(len(tc.errs) - 1)
			for _, e := range tc.errs {
				n.Release(e)
			}
			c := rec.calls()
			if len(c) != 1 || c[0] != tc.want {
				t.Fatalf("done calls = %v, want [%v]", c, tc.want)
			}
		})
	}
}

func TestMisusePanics(t *testing.T) {
	n := New(nil)
	n.Release(nil)
	mustPanic(t, "Release of a completed node", func() { n.Release(nil) })
	m := New(nil)
	m.Release(nil)
	mustPanic(t, "Retain on a completed node", func() { m.Retain(1) })
}

func TestNilNode(t *testing.T) {
	var n *Node
	n.Retain(3)
	n.Release(errors.New("ignored"))
	if n.Pending() != 0 {
		t.Fatalf("nil Pending = %d", n.Pending())
	}
	if Derive() != nil || Derive(nil, nil) != nil {
		t.Fatal("Derive of no non-nil parent should be nil")
	}
}

func TestRetainZeroIsNoop(t *testing.T) {
	var rec recorder
	n := New(rec.done)
	n.Retain(0)
	if n.Pending() != 1 {
		t.Fatalf("Pending = %d", n.Pending())
	}
	n.Release(nil)
	if len(rec.calls()) != 1 {
		t.Fatal("not completed")
	}
	// Retain(0) on a completed node is also a no-op, not a panic.
	n.Retain(0)
}

func TestDeriveSingleParentIsParent(t *testing.T) {
	p := New(nil)
	if d := Derive(nil, p, nil); d != p {
		t.Fatalf("Derive(single) = %p, want the parent %p", d, p)
	}
}

func TestDeriveReleasesEveryParent(t *testing.T) {
	boom := errors.New("boom")
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			recs := make([]recorder, 3)
			parents := make([]*Node, 3)
			for i := range parents {
				parents[i] = New(recs[i].done)
			}
			// The second parent has another holder.
			parents[1].Retain(1)
			d := Derive(parents[0], nil, parents[1], parents[2])
			if d == nil || d == parents[0] || d.Pending() != 1 {
				t.Fatalf("Derive returned %v", d)
			}
			d.Retain(2)
			var err error
			if fail {
				err = boom
			}
			d.Release(nil)
			d.Release(err)
			for i := range recs {
				if len(recs[i].calls()) != 0 {
					t.Fatalf("parent %d completed before the derived node", i)
				}
			}
			d.Release(nil)
			for _, i := range []int{0, 2} {
				c := recs[i].calls()
				if len(c) != 1 || c[0] != err {
					t.Fatalf("parent %d done calls = %v, want [%v]", i, c, err)
				}
			}
			if len(recs[1].calls()) != 0 || parents[1].Pending() != 1 {
				t.Fatalf("parent 1: calls %v pending %d, want none and 1", recs[1].calls(), parents[1].Pending())
			}
			// The other holder of parent 1 succeeds; the derived error still wins.
			parents[1].Release(nil)
			c := recs[1].calls()
			if len(c) != 1 || c[0] != err {
				t.Fatalf("parent 1 done calls = %v, want [%v]", c, err)
			}
		})
	}
}

func TestDeriveChain(t *testing.T) {
	var root recorder
	r := New(root.done)
	r.Retain(1)
	a := Derive(r, New(nil))
	b := Derive(r, New(nil))
	top := Derive(a, b)
	boom := errors.New("deep")
	top.Retain(1)
	top.Release(boom)
	if len(root.calls()) != 0 {
		t.Fatal("root completed early")
	}
	top.Release(nil)
	c := root.calls()
	if len(c) != 1 || c[0] != boom {
		t.Fatalf("root done = %v, want [%v]", c, boom)
	}
}

func TestConcurrentRelease(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 50; iter++ {
		var rec recorder
		n := New(rec.done)
		parts := 1 + rng.IntN(64)
		n.Retain(parts - 1)
		errs := make([]error, parts)
		anyErr := false
		for i := range errs {
			if rng.IntN(4) == 0 {
				errs[i] = fmt.Errorf("part %d", i)
				anyErr = true
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < parts; i++ {
			wg.Go(func() {
				<-start
				n.Release(errs[i])
			})
		}
		close(start)
		wg.Wait()
		c := rec.calls()
		if len(c) != 1 {
			t.Fatalf("done called %d times", len(c))
		}
		if !anyErr {
			if c[0] != nil {
				t.Fatalf("done(%v), want nil", c[0])
			}
			continue
		}
		found := false
		for _, e := range errs {
			found = found || (e != nil && e == c[0])
		}
		if !found {
			t.Fatalf("done(%v), want one of the reported errors", c[0])
		}
	}
}

func TestConcurrentRetainRelease(t *testing.T) {
	var rec recorder
	n := New(rec.done)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		n.Retain(1) // taken by the spawner, handed to the goroutine
		wg.Go(func() {
			for j := 0; j < 100; j++ {
				n.Retain(2)
				n.Release(nil)
				n.Release(nil)
			}
			n.Release(nil)
		})
	}
	wg.Wait()
	if len(rec.calls()) != 0 || n.Pending() != 1 {
		t.Fatalf("calls %v pending %d, want none and 1", rec.calls(), n.Pending())
	}
	n.Release(nil)
	if c := rec.calls(); len(c) != 1 || c[0] != nil {
		t.Fatalf("done calls = %v", c)
	}
}
