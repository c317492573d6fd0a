package statestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// kvScanNS is ScanNamespace as kvEntries.
func kvScanNS(t testing.TB, b Backend, scope Scope, ns string, prefix []byte, now int64) []kvEntry {
	t.Helper()
	var out []kvEntry
	err := ScanNamespace(b, scope, ns, prefix, now, func(e Entry) error {
		out = append(out, kvEntry{e.Key.Job, e.Key.Operator, e.Key.Namespace, e.Key.KeyGroup, string(e.Key.User), string(e.Value), e.ExpiresAt})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// filterNS is what ScanNamespace must return: the scope's scan, filtered.
func filterNS(all []kvEntry, ns string, prefix []byte) []kvEntry {
	var out []kvEntry
	for _, e := range all {
		if e.NS == ns && bytes.HasPrefix([]byte(e.User), prefix) {
			out = append(out, e)
		}
	}
	return out
}

// scanOnly hides a backend's namespaceScanner: ScanNamespace then scans
// the scope and filters.
type scanOnly struct{ Backend }

// namespaceCases are namespaces and user prefixes that share bytes with
// each other (the encoding's length prefix must keep "n" from matching
// "nn"), the empty namespace, and prefixes that match all, some or none.
var namespaceCases = []struct {
	ns     string
	prefix []byte
}{
	{"n", nil}, {"nn", nil}, {"", nil}, {"n", []byte{}}, {"n", []byte("u1")}, {"nn", []byte("u")},
	{"n", []byte("u12345")}, {"m", nil}, {"absent", nil}, {"n", []byte{0xFF}},
}

// ScanNamespace returns exactly the scope's scan filtered to the
// namespace and user prefix, on every backend, for scopes of one key
// group, a range, every group and the last group (where the seek to the
// next group must not wrap).
func TestScanNamespace(t *testing.T) {
	t.Parallel()
	now := kvNow()
	rng := rand.New(rand.NewPCG(3, 9))
	var muts []Mutation
	for range 600 {
		g := rng.IntN(12)
		if rng.IntN(10) == 0 {
			g = MaxKeyGroup
		}
		exp := int64(0)
		if rng.IntN(5) == 0 {
			exp = now - 1000 // expired: not returned
		}
		muts = append(muts, kvPut(Key{Job: "j", Operator: []string{"o", "p"}[rng.IntN(2)], Namespace: []string{"n", "nn", "", "m"}[rng.IntN(4)],
			KeyGroup: g, User: fmt.Appendf(nil, "u%d", rng.IntN(200))}, fmt.Sprint(rng.IntN(100)), exp))
	}
	scopes := []Scope{
		{Job: "j", Operator: "o", Groups: AllKeyGroups},
		{Job: "j", Operator: "o", Groups: job.KeyGroupRange{Start: 3, End: 3}},
		{Job: "j", Operator: "p", Groups: job.KeyGroupRange{Start: 2, End: 9}},
		{Job: "j", Operator: "o", Groups: job.KeyGroupRange{Start: MaxKeyGroup, End: MaxKeyGroup}},
		{Job: "j", Operator: "o", Groups: job.KeyGroupRange{Start: 20, End: 30}}, // nothing there
		{Job: "j", Operator: "zz", Groups: AllKeyGroups},                         // no such operator
	}
	check := func(t *testing.T, b Backend) {
		kvApply(t, b, muts...)
		n := 0
		for _, sc := range scopes {
			all := kvScan(t, b, sc, now)
			for _, c := range namespaceCases {
				want := filterNS(all, c.ns, c.prefix)
				n += len(want)
				for _, s := range []Backend{b, scanOnly{b}} {
					if got := kvScanNS(t, s, sc, c.ns, c.prefix, now); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%T: scope %+v, namespace %q, prefix %q: %s", s, sc, c.ns, c.prefix, firstDiff(got, want))
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("no case had entries")
		}
		// A scope without an operator is refused, by name.
		err := ScanNamespace(b, Scope{Job: "j", Groups: AllKeyGroups}, "n", nil, now, func(Entry) error { return nil })
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("operator")) {
			t.Fatalf("a scope without an operator: %v", err)
		}
	}
	forEachKV(t, check)
	// Restored layers under Badger, with writes and deletes over them.
	t.Run("badger-layers", func(t *testing.T) {
		src := NewMemory()
		kvApply(t, src, muts...)
		b := openDir(t, t.TempDir())
		defer b.Close()
		var srcs []RestoreSource
		for _, op := range []string{"o", "p"} {
			sc := Scope{Job: "j", Operator: op, Groups: AllKeyGroups}
			data, _ := snapTake(t, src, sc, now)
			srcs = append(srcs, bytesSource(sc, data, objectSum(data)))
		}
		if _, err := b.(LayerRestorer).RestoreLayers(srcs, now, nil); err != nil {
			t.Fatal(err)
		}
		if st, _ := LayerStatsOf(b); st.Layers != 2 {
			t.Fatalf("%d layers", st.Layers)
		}
		// Over the layers: deletes, rewrites and new keys in every
		// namespace (check applies muts again on top).
		var over []Mutation
		for i := range 100 {
			k := muts[rng.IntN(len(muts))].Key
			if i%3 == 0 {
				over = append(over, Mutation{Key: k, Delete: true})
			} else {
				k.User = fmt.Appendf(nil, "u%d", rng.IntN(300))
				over = append(over, kvPut(k, "over", 0))
			}
		}
		kvApply(t, b, over...)
		check(t, b)
	})
}

// countingCursor counts the keys a walk visits.
type countingCursor struct {
	kvCursor
	visits int
}

func (c *countingCursor) next() { c.visits++; c.kvCursor.next() }

// A namespace scan visits the namespace's keys, not the rest of the key
// group: the reason it exists (an operator's start after a restore read
// its whole key group from the cold layer before).
func TestScanNamespaceSkipsOtherNamespaces(t *testing.T) {
	t.Parallel()
	b := NewMemory().(*memBackend)
	var muts []Mutation
	for g := range 4 {
		for i := range 1000 {
			muts = append(muts, kvPut(Key{Job: "j", Operator: "o", Namespace: "big", KeyGroup: g, User: fmt.Appendf(nil, "%04d", i)}, "v", 0))
			muts = append(muts, kvPut(Key{Job: "j", Operator: "o", Namespace: "zbig", KeyGroup: g, User: fmt.Appendf(nil, "%04d", i)}, "v", 0))
		}
		muts = append(muts, kvPut(Key{Job: "j", Operator: "o", Namespace: "pos", KeyGroup: g, User: []byte("p")}, "v", 0))
	}
	kvApply(t, b, muts...)
	sub, err := keySubPrefix("pos", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.index()
	c := &countingCursor{kvCursor: &memCursor{b: b}}
	found := 0
	if err := walkScopeSub(c, Scope{Job: "j", Operator: "o", Groups: AllKeyGroups}, sub, func() error { found++; return nil }); err != nil {
		t.Fatal(err)
	}
	if found != 4 || c.visits > 8 {
		t.Fatalf("found %d entries (want 4) in %d steps (want at most 8: one past each group's namespace)", found, c.visits)
	}
}
