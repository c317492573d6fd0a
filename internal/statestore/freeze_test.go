package statestore

import (
	"bytes"
	"fmt"
	"testing"
)

// A frozen view snapshots what the store held at Freeze, whatever is
// written or deleted afterwards (the cut is short; snapshots
// stream while the pipeline runs on). Drop empties one scope only.
func TestFreezeAndDrop(t *testing.T) {
	t.Parallel()
	now := kvNow()
	forEachKV(t, func(t *testing.T, b Backend) {
		n := snapPopulate(t, b, now)
		all := Scope{Job: "j", Groups: AllKeyGroups}
		before := kvScan(t, b, all, now)
		f, err := b.(Freezer).Freeze()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// Change the store after the freeze: overwrite, add, delete.
		for _, e := range before[:3] {
			k := Key{Job: e.Job, Operator: e.Op, KeyGroup: e.Group, Namespace: e.NS, User: []byte(e.User)}
			kvApply(t, b, kvPut(k, "changed", 0), Mutation{Key: Key{Job: "j", Operator: e.Op, KeyGroup: e.Group, Namespace: e.NS, User: []byte("new-" + e.User)}, Value: []byte("x")})
		}
		k0 := before[4]
		kvApply(t, b, Mutation{Key: Key{Job: k0.Job, Operator: k0.Op, KeyGroup: k0.Group, Namespace: k0.NS, User: []byte(k0.User)}, Delete: true})
		var buf bytes.Buffer
		info, err := f.Snapshot(&buf, all, now)
		if err != nil {
			t.Fatal(err)
		}
		if info.Entries != int64(n) {
			t.Fatalf("frozen snapshot has %d entries, want %d", info.Entries, n)
		}
		d := NewMemory()
		defer d.Close()
		if _, err := d.Restore(&buf, all, now); err != nil {
			t.Fatal(err)
		}
		if got := kvScan(t, d, all, now); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Fatal("the frozen snapshot differs from the store at Freeze")
		}
		// Drop one operator's scope; the other stays.
		op := before[0].Op
		if err := b.(Dropper).Drop(Scope{Job: "j", Operator: op, Groups: AllKeyGroups}); err != nil {
			t.Fatal(err)
		}
		for _, e := range kvScan(t, b, all, now) {
			if e.Op == op {
				t.Fatalf("entry of dropped operator %s remains: %+v", op, e)
			}
		}
		if len(kvScan(t, b, all, now)) == 0 {
			t.Fatal("Drop removed other operators' entries")
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Snapshot(&buf, all, now); err == nil {
			t.Fatal("Snapshot after Close succeeded")
		}
	})
}
