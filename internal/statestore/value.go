package statestore

import (
	"errors"
	"time"
)

// ErrReadOnly is returned by the writes of a Keyed that only reads
// committed state (a query's, Journal.ReadCommitted).
var ErrReadOnly = errors.New("state: read-only: this state handle reads committed state (a query's); only the operator writes")

// Keyed is the state of one key while an operator processes a batch: the
// engine side of the public state.Keyed. Writes are staged in the batch's
// epoch and commit when its output is acknowledged; reads see them at once.
type Keyed struct {
	j     *Journal
	e     *Epoch
	group int
	key   []byte
	now   int64
	ttl   int64 // default TTL in ms for writes; 0 = none
}

// NewKeyed returns the state handle of a key (its key bytes and key
// group) within an epoch. now is the wall clock in Unix ms; ttl the
// default time to live of writes (0: none).
func NewKeyed(j *Journal, e *Epoch, group int, key []byte, now int64, ttl time.Duration) *Keyed {
	return &Keyed{j: j, e: e, group: group, key: key, now: now, ttl: ttl.Milliseconds()}
}

// Key returns the key's bytes.
func (k *Keyed) Key() []byte { return k.key }

// DefaultTTL is the operator's default time to live of writes (0: none).
func (k *Keyed) DefaultTTL() time.Duration { return time.Duration(k.ttl) * time.Millisecond }

// Get reads user key user of namespace ns for this key's group; an
// expired entry is absent.
func (k *Keyed) Get(ns string, user []byte) ([]byte, bool, error) {
	return k.j.Get(ns, k.group, user, k.now)
}

// Put stages value under user in namespace ns, gone after ttl (0: never).
// A handle without an epoch (a query's) refuses it with ErrReadOnly.
func (k *Keyed) Put(ns string, user, value []byte, ttl time.Duration) error {
	if k.e == nil {
		return ErrReadOnly
	}
	var exp int64
	if ms := ttl.Milliseconds(); ms > 0 {
		exp = k.now + ms
	}
	k.e.Put(ns, k.group, user, value, exp)
	return nil
}

// Delete stages the removal of user in namespace ns; a handle without an
// epoch refuses it with ErrReadOnly.
func (k *Keyed) Delete(ns string, user []byte) error {
	if k.e == nil {
		return ErrReadOnly
	}
	k.e.Delete(ns, k.group, user)
	return nil
}

// ScanPrefix calls fn for every live entry of namespace ns whose user key
// starts with prefix (staged writes included), in key order, until fn
// returns false.
func (k *Keyed) ScanPrefix(ns string, prefix []byte, fn func(user, value []byte) bool) error {
	return k.j.ScanPrefix(ns, k.group, prefix, k.now, fn)
}

// Public converts an engine handle into the public *state.Keyed handed
// to user code (as an any holding a *state.Keyed). Package state sets it
// when it is initialised: only that package can build its Keyed, and the
// engine must not import it.
var Public func(*Keyed) any
