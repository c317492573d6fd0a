package statestore

import (
	"io"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Frozen is a point-in-time view of a store: what it held when Freeze
// returned, whatever is written afterwards. A checkpoint freezes the store
// during its short synchronous cut and streams the snapshots from the view
// while the pipeline runs on.
type Frozen interface {
	// Snapshot streams the view's entries in scope like Backend.Snapshot.
	// It may be called several times, for different scopes.
	Snapshot(w io.Writer, scope Scope, now int64) (SnapshotInfo, error)
	// Close releases the view. It is idempotent.
	Close() error
}

// Freezer is implemented by backends that can give a point-in-time view
// (both of this package's backends do).
type Freezer interface {
	Freeze() (Frozen, error)
}

// Dropper is implemented by backends that can delete a whole scope: a
// restore empties the scope it is about to fill.
type Dropper interface {
	Drop(scope Scope) error
}

// Freeze returns a view on one read transaction.
func (b *badgerBackend) Freeze() (Frozen, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	return &badgerFrozen{b: b, txn: b.db.NewTransaction(false), layers: b.pinLayers("")}, nil
}

type badgerFrozen struct {
	b   *badgerBackend
	mu  sync.Mutex
	txn *badger.Txn
	// layers are the restored layers when the view was taken.
	layers []*layer
	done   bool
}

func (f *badgerFrozen) Snapshot(w io.Writer, scope Scope, now int64) (SnapshotInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return SnapshotInfo{}, ErrClosed
	}
	prefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return SnapshotInfo{}, err
	}
	it := f.txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: prefix})
	defer it.Close()
	c := badgerCursor{it}
	return snapshotWrite(w, scope, now, func(scope Scope, now int64, fn func(key, value []byte, exp int64) error) error {
		return f.b.scanRaw(c, f.layers, scope, nil, now, fn)
	})
}

func (f *badgerFrozen) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil
	}
	f.done = true
	f.txn.Discard()
	unpinLayers(f.layers)
	f.b.exit()
	return nil
}

// Drop deletes every entry of scope. A whole operator goes with Badger's
// DropPrefix, which drops whole tables instead of writing a tombstone per
// key (a restore that first emptied a million keys one by one spent most
// of its time on them, and the reads after it on the tombstones).
func (b *badgerBackend) Drop(scope Scope) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.exit()
	return b.dropEntered(scope)
}

// dropEntered is Drop for a caller that has entered: Badger's entries,
// then the restored layers' (layer.go).
func (b *badgerBackend) dropEntered(scope Scope) error {
	has, err := b.holdsAny(scope)
	if err != nil {
		return err
	}
	if !has {
		// Nothing of Badger's to drop (a new store, or a scope a layer
		// holds alone): DropPrefix would still stop writes and flush the
		// memtable.
	} else if scope.Operator != "" && scope.Groups == AllKeyGroups {
		prefix, err := keyOperatorPrefix(scope.Job, scope.Operator)
		if err != nil {
			return err
		}
		if err := b.db.DropPrefix(prefix); err != nil {
			return err
		}
	} else if err := b.dropScope(scope); err != nil {
		return err
	}
	if b.inMemory {
		return nil
	}
	return b.dropLayers(scope)
}

// holdsAny reports whether Badger holds any item (live or not) in scope.
// The caller has entered.
func (b *badgerBackend) holdsAny(scope Scope) (bool, error) {
	prefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return false, err
	}
	found := false
	err = b.viewEntered(prefix, func(c badgerCursor) error {
		it := newScopeIter(c, scope, nil)
		found = it.valid()
		return it.err
	})
	return found, err
}
