package statestore

import (
	"fmt"
	"testing"
)

// A journal over the memory backend holds committed unread mutations
// back: a fresh key put and deleted between two reads never reaches the
// backend, while every read, freeze and snapshot sees exactly the
// committed state, as the backend would have held it with every mutation
// applied at commit (a second journal over another memory store with
// plain Put and Delete is the model).
func TestJournalDefersUnreadMutations(t *testing.T) {
	t.Parallel()
	b := NewMemory().(*memBackend)
	model := NewMemory()
	defer b.Close()
	defer model.Close()
	groups := AllKeyGroups
	j, err := NewJournal(b, "job", "op", groups)
	if err != nil {
		t.Fatal(err)
	}
	mj, err := NewJournal(model, "job", "op", groups)
	if err != nil {
		t.Fatal(err)
	}
	type op struct {
		user string
		del  bool
	}
	puts := map[string]*Held{} // the handle of each key's put
	step := func(ops ...op) {
		t.Helper()
		e, me := j.Begin(), mj.Begin()
		for _, o := range ops {
			if o.del {
				e.DeleteUnread("rows", 3, []byte(o.user), puts[o.user])
				delete(puts, o.user)
				me.Delete("rows", 3, []byte(o.user))
			} else {
				puts[o.user] = e.PutUnread("rows", 3, []byte(o.user), []byte("v-"+o.user))
				me.Put("rows", 3, []byte(o.user), []byte("v-"+o.user), 0)
			}
		}
		e.Done(nil)
		me.Done(nil)
	}
	same := func(when string) {
		t.Helper()
		scope := Scope{Job: "job", Operator: "op", Groups: groups}
		want, got := map[string]string{}, map[string]string{}
		if err := model.Scan(scope, 0, func(e Entry) error { want[string(e.Key.User)] = string(e.Value); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := b.Scan(scope, 0, func(e Entry) error { got[string(e.Key.User)] = string(e.Value); return nil }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: the store holds %v, the model %v", when, got, want)
		}
	}
	step(op{user: "a"}, op{user: "b"})
	step(op{user: "a", del: true}, op{user: "c"})
	b.mu.Lock()
	untouched := len(b.m) == 0
	b.mu.Unlock()
	if !untouched {
		t.Fatal("the backend got mutations before anything read it")
	}
	same("first read") // b and c, applied by the read
	// b is in the backend now: its delete must reach it; d, put and
	// deleted before the next read, must not; g, put, deleted and put
	// again, is there once.
	step(op{user: "d"}, op{user: "g"})
	step(op{user: "b", del: true}, op{user: "d", del: true}, op{user: "e"}, op{user: "g", del: true})
	step(op{user: "g"})
	f, err := b.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	if err := f.(Backend).Scan(Scope{Job: "job", Operator: "op", Groups: groups}, 0, func(e Entry) error { got[string(e.Key.User)] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if len(got) != 3 || !got["c"] || !got["e"] || !got["g"] {
		t.Fatalf("the frozen view holds %v, want c, e and g", got)
	}
	same("after the freeze")
	step(op{user: "c", del: true}, op{user: "f"})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b.fmu.Lock()
	registered := len(b.deferring)
	b.fmu.Unlock()
	if registered != 0 {
		t.Fatalf("%d journals still registered after Close", registered)
	}
	b.mu.Lock()
	n := len(b.m)
	b.mu.Unlock()
	same("after Close")
	if v, _, ok, err := b.Get(Key{Job: "job", Operator: "op", Namespace: "rows", KeyGroup: 3, User: []byte("f")}, 0); err != nil || !ok || string(v) != "v-f" {
		t.Fatalf("Get f = %q, %v, %v", v, ok, err)
	}
	if n > 4+1 { // c (a tombstone), e, f and g; positions at most
		t.Fatalf("the backend's map holds %d entries", n)
	}
}
