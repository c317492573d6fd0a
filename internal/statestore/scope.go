package statestore

import (
	"bytes"
	"errors"
)

// kvCursor is an ordered cursor over encoded keys, implemented by both
// backends (and by restored layers) so the key-group range logic exists
// once.
type kvCursor interface {
	// seek positions the cursor at the first key >= k.
	seek(k []byte)
	valid() bool
	// key is the current encoded key; valid until the cursor moves.
	key() []byte
	next()
}

// scopeIter walks a cursor over the keys of a scope, in key order. With
// an operator it is one range scan [op|start, op|end]; for a whole job it
// visits each operator's range, seeking over the groups outside the
// scope, so its cost follows the entries in scope and the number of
// operators, not the job's size.
//
// With sub (an encoded namespace and user-key prefix, see keySubPrefix;
// only with an operator) it visits, in each key group, only the keys
// that continue with sub: keys are ordered by key group, then namespace,
// so that is one seek per key group, and the scope's other namespaces
// are not read.
type scopeIter struct {
	c          kvCursor
	start, end int
	prefix     []byte // the operator's prefix, or the job's
	byOp       bool
	sub        []byte
	ok         bool
	err        error
}

// newScopeIter positions a scopeIter at the first key of scope (that
// continues with sub, when sub is not nil).
func newScopeIter(c kvCursor, scope Scope, sub []byte) *scopeIter {
	it := &scopeIter{c: c, sub: sub}
	start, end, ok := scopeGroups(scope.Groups)
	if !ok {
		return it
	}
	it.start, it.end = start, end
	if scope.Operator != "" {
		p, err := keyOperatorPrefix(scope.Job, scope.Operator)
		if err != nil {
			it.err = err
			return it
		}
		it.prefix, it.byOp = p, true
		c.seek(append(keyGroupSeek(p, start), sub...))
	} else {
		if sub != nil {
			it.err = errors.New("state: a namespace scan needs an operator")
			return it
		}
		p, err := keyJobPrefix(scope.Job)
		if err != nil {
			it.err = err
			return it
		}
		it.prefix = p
		c.seek(p)
	}
	it.settle()
	return it
}

func (it *scopeIter) valid() bool { return it.ok }

// key is the cursor's key; only while valid.
func (it *scopeIter) key() []byte { return it.c.key() }

func (it *scopeIter) next() {
	if !it.ok {
		return
	}
	it.c.next()
	it.settle()
}

// settle moves the cursor from where it is to the first key in scope at
// or after it, or ends the walk.
func (it *scopeIter) settle() {
	it.ok = false
	for it.c.valid() {
		k := it.c.key()
		if !bytes.HasPrefix(k, it.prefix) {
			return
		}
		opLen, g, err := keySplit(k)
		if err != nil {
			it.err = errKeyEncoding
			return
		}
		switch {
		case it.byOp:
			// Seeked to op|start, and keys only grow.
			if g > it.end {
				return
			}
			if it.sub != nil {
				rest := k[opLen+2:]
				if !bytes.HasPrefix(rest, it.sub) {
					switch {
					case bytes.Compare(rest, it.sub) < 0:
						it.c.seek(append(keyGroupSeek(k[:opLen], g), it.sub...))
					case g < it.end:
						it.c.seek(append(keyGroupSeek(k[:opLen], g+1), it.sub...))
					default:
						return
					}
					continue
				}
			}
			it.ok = true
			return
		case g < it.start:
			it.c.seek(keyGroupSeek(k[:opLen], it.start))
		case g > it.end:
			nxt := keyPrefixEnd(k[:opLen])
			if nxt == nil {
				return
			}
			it.c.seek(nxt)
		default:
			it.ok = true
			return
		}
	}
}

// walkScope calls fn with the cursor positioned at every key of scope, in
// key order (see scopeIter).
func walkScope(c kvCursor, scope Scope, fn func() error) error {
	return walkScopeSub(c, scope, nil, fn)
}

// walkScopeSub is walkScope over the keys that continue with sub in each
// key group (see scopeIter).
func walkScopeSub(c kvCursor, scope Scope, sub []byte, fn func() error) error {
	it := newScopeIter(c, scope, sub)
	for ; it.valid(); it.next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return it.err
}
