package state

import "bytes"

// kvCursor is an ordered cursor over encoded keys, implemented by both
// backends so the key-group range logic exists once.
type kvCursor interface {
	// seek positions the cursor at the first key >= k.
	seek(k []byte)
	valid() bool
	// key is the current encoded key; valid until the cursor moves.
	key() []byte
	next()
}

// walkScope calls fn with the cursor positioned at every key of scope, in
// key order. With an operator it is one range scan
// [op|start, op|end]; for a whole job it visits each operator's range,
// seeking over the groups outside the scope, so its cost follows the
// entries in scope and the number of operators, not the job's size.
func walkScope(c kvCursor, scope Scope, fn func() error) error {
	start, end, ok := scopeGroups(scope.Groups)
	if !ok {
		return nil
	}
	if scope.Operator != "" {
		opPrefix, err := keyOperatorPrefix(scope.Job, scope.Operator)
		if err != nil {
			return err
		}
		for c.seek(keyGroupSeek(opPrefix, start)); c.valid(); c.next() {
			k := c.key()
			if !bytes.HasPrefix(k, opPrefix) {
				return nil
			}
			_, g, err := keySplit(k)
			if err != nil {
				return errKeyEncoding
			}
			if g > end {
				return nil
			}
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	}
	jobPrefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return err
	}
	c.seek(jobPrefix)
	for c.valid() {
		k := c.key()
		if !bytes.HasPrefix(k, jobPrefix) {
			return nil
		}
		opLen, g, err := keySplit(k)
		if err != nil {
			return errKeyEncoding
		}
		switch {
		case g < start:
			c.seek(keyGroupSeek(k[:opLen], start))
		case g > end:
			nxt := keyPrefixEnd(k[:opLen])
			if nxt == nil {
				return nil
			}
			c.seek(nxt)
		default:
			if err := fn(); err != nil {
				return err
			}
			c.next()
		}
	}
	return nil
}
