package statestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// lazyRow is a PutLazy entry that counts its encodings and fails the test
// when it is encoded after its owner let it go (released: what an
// operator does when the delete of the row has settled).
type lazyRow struct {
	t        *testing.T
	user     string
	released atomic.Bool
	encoded  atomic.Int32
}

func (r *lazyRow) AppendEntry(dst []byte) ([]byte, int) {
	if r.released.Load() {
		r.t.Errorf("row %s encoded after its delete settled", r.user)
	}
	r.encoded.Add(1)
	dst = append(dst, r.user...)
	return append(dst, "v-"+r.user...), len(r.user)
}

// Lazy puts against a model: random epochs of lazy puts (PutLazy and
// PutLazyAll) and deletes by handle (DeleteUnread and DeleteHeld),
// acknowledged out of order, with reads and freezes in between, over
// every backend. The store must always hold what a second journal of
// plain Puts and Deletes over a memory store holds; a row's entry is
// encoded at most once, never after the epoch deleting it settled (the
// row is released then, as an interval join releases its batch), and on
// a memory store only if something read the store while the row was
// live.
func TestJournalLazyPuts(t *testing.T) {
	for _, c := range kvCases() {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(20) {
				lazyTrial(t, c.open(t), seed)
			}
		})
	}
}

func lazyTrial(t *testing.T, b Backend, seed uint64) {
	defer b.Close()
	model := NewMemory()
	defer model.Close()
	rng := rand.New(rand.NewPCG(seed, 9))
	j, err := NewJournal(b, "job", "op", AllKeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	mj, err := NewJournal(model, "job", "op", AllKeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	_, deferring := b.(*memBackend)
	type live struct {
		row  *lazyRow
		held *Held
	}
	rows := map[string]live{}
	var all []*lazyRow
	var open []*Epoch // staged, not yet done, in any order
	next := 0
	var reads int
	for step := range 60 {
		e, me := j.Begin(), mj.Begin()
		var puts []LazyPut
		var dels []*Held
		fresh := map[string]bool{}
		for range rng.IntN(6) {
			if len(rows) > 0 && rng.IntN(3) == 0 { // delete a live row
				var user string
				for u := range rows {
					if !fresh[u] { // not put by this step's PutLazyAll, which stages after
						user = u
						break
					}
				}
				if user == "" {
					continue
				}
				l := rows[user]
				delete(rows, user)
				me.Delete("rows", 5, []byte(user))
				switch {
				case l.held == nil: // Badger: no handle; the delete names the key
					e.DeleteUnread("rows", 5, []byte(user), nil)
				case rng.IntN(2) == 0:
					e.DeleteUnread("rows", 5, nil, l.held)
				default:
					dels = append(dels, l.held)
				}
				e.OnSettled(func(error) { l.row.released.Store(true) })
				continue
			}
			r := &lazyRow{t: t, user: fmt.Sprintf("r%03d", next)}
			next++
			all = append(all, r)
			me.Put("rows", 5, []byte(r.user), []byte("v-"+r.user), 0)
			var h Held
			if rng.IntN(2) == 0 {
				got := e.PutLazy("rows", 5, r, &h)
				if (got != nil) != deferring {
					t.Fatalf("PutLazy returned %v on %T", got, b)
				}
				rows[r.user] = live{r, got}
			} else {
				puts = append(puts, LazyPut{Group: 5, V: r, H: &h})
				fresh[r.user] = true
				rows[r.user] = live{r, &h}
			}
		}
		if len(puts) > 0 && e.PutLazyAll("rows", puts) != deferring {
			t.Fatalf("PutLazyAll reported handles %v on %T", !deferring, b)
		} else if !deferring {
			for _, p := range puts {
				rows[p.V.(*lazyRow).user] = live{p.V.(*lazyRow), nil}
			}
		}
		if len(dels) > 0 {
			e.DeleteHeld(dels)
		}
		me.Done(nil)
		open = append(open, e)
		// Acknowledge a random subset, out of order.
		for i := 0; i < len(open); {
			if rng.IntN(2) == 0 {
				open[i].Done(nil)
				open = append(open[:i], open[i+1:]...)
				continue
			}
			i++
		}
		if rng.IntN(5) == 0 && len(open) == 0 {
			reads++
			sameStore(t, fmt.Sprintf("seed %d step %d", seed, step), b, model)
		}
	}
	for _, e := range open {
		e.Done(nil)
	}
	sameStore(t, fmt.Sprintf("seed %d at the end", seed), b, model)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if n := r.encoded.Load(); n > 1 {
			t.Errorf("seed %d: row %s encoded %d times", seed, r.user, n)
		}
	}
	if deferring && reads == 0 {
		// Nothing read the store before the end: only the rows live then
		// were encoded.
		for _, r := range all {
			_, isLive := rows[r.user]
			if got := r.encoded.Load() == 1; got != isLive {
				t.Errorf("seed %d: row %s encoded %v, live at the end %v", seed, r.user, got, isLive)
			}
		}
	}
}

// sameStore fails unless b holds the entries model holds.
func sameStore(t *testing.T, when string, b, model Backend) {
	t.Helper()
	scope := Scope{Job: "job", Operator: "op", Groups: AllKeyGroups}
	read := func(s Backend) map[string]string {
		m := map[string]string{}
		if err := s.Scan(scope, 0, func(e Entry) error {
			if e.Key.Namespace == "rows" {
				m[string(e.Key.User)] = string(e.Value)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got, want := read(b), read(model); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: the store holds %v, the model %v", when, got, want)
	}
}

// A failed epoch drops every pending one; the lazy puts held back are
// encoded before the dropped epochs settle (their operator releases what
// the entries encode from then), and a Close after encodes nothing
// released.
func TestJournalLazyPutsSurviveAFailure(t *testing.T) {
	b := NewMemory()
	defer b.Close()
	j, err := NewJournal(b, "job", "op", AllKeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	var hs [3]Held
	rows := [3]*lazyRow{{t: t, user: "a"}, {t: t, user: "b"}, {t: t, user: "c"}}
	e1 := j.Begin()
	e1.PutLazy("rows", 1, rows[0], &hs[0])
	e1.PutLazy("rows", 1, rows[1], &hs[1])
	e1.Done(nil) // a and b committed, held back
	e2 := j.Begin()
	e2.DeleteHeld([]*Held{&hs[0]})
	e2.PutLazy("rows", 1, rows[2], &hs[2])
	e2.OnSettled(func(error) {
		rows[0].released.Store(true)
		rows[2].released.Store(true)
	})
	e2.Done(errors.New("the sink failed"))
	if rows[0].encoded.Load() != 1 || rows[1].encoded.Load() != 1 {
		t.Fatalf("the held puts were encoded %d and %d times before their epochs settled, want once each", rows[0].encoded.Load(), rows[1].encoded.Load())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if rows[2].encoded.Load() != 0 {
		t.Fatal("the failed epoch's put was encoded")
	}
}
