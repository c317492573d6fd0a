package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Key encoding, shared by every backend and by the snapshot format:
//
//	0x01 | u16 len(job) | job | u16 len(op) | op | u16 keygroup | u16 len(ns) | ns | user bytes
//
// All integers are big-endian. The leading tag byte versions the layout.
// Because job and operator come first, length-prefixed, every entry of one
// job shares the prefix 0x01|len|job, every entry of one operator the
// prefix 0x01|len|job|len|op, and inside an operator the entries sort by
// key group first: a key-group range of an operator is one contiguous range
// of encoded keys, and a restore or snapshot of a task's groups is a range
// scan, not a filter over the whole store. Namespace and user key follow
// the key group, so an operator's namespaces interleave inside a key group
// (scans return them in (operator, key group, namespace, user) order, where
// operators and namespaces compare by length first, then bytes).
//
// Job, operator and namespace are limited to 65535 bytes and key groups to
// [0, 65535]; larger values are errors, never truncations. Job and operator
// must not be empty.
//
// Stored value encoding (Badger; the memory backend keeps the same fields
// unencoded and accounts the same number of bytes):
//
//	u8 version (1) | i64 expiresAt (Unix ms, 0 = never) | value
//
// Expiry. An entry is live at now when ExpiresAt == 0 or ExpiresAt > now.
// Badger is also given the expiry as its own TTL, rounded up to whole
// seconds, so it garbage-collects expired entries in compaction; Badger
// hides an entry once that TTL has passed by the wall clock. Both backends
// therefore apply the same two rules — hidden when ExpiresAt <= now, gone
// when ceil(ExpiresAt/1000) <= wall-clock Unix seconds — so they agree when
// now runs close to the wall clock (processing time, which is what TTLs
// are measured in). A caller that passes a now far behind the wall clock
// sees entries disappear at the wall-clock expiry.

const (
	keyTag byte = 0x01
	// MaxKeyGroup is the largest key group a key can carry.
	MaxKeyGroup = 0xFFFF
	// maxKeyField is the longest job, operator or namespace.
	maxKeyField = 0xFFFF

	storedValueVersion byte = 1
	storedValueHeader       = 9 // version + expiresAt
)

// AllKeyGroups is the key-group range that covers every encodable group.
var AllKeyGroups = job.KeyGroupRange{Start: 0, End: MaxKeyGroup}

var errKeyEncoding = errors.New("state: malformed encoded key")

// keyEncode appends the encoding of k to dst.
func keyEncode(dst []byte, k Key) ([]byte, error) {
	if k.Job == "" || k.Operator == "" {
		return dst, fmt.Errorf("state: key needs a job and an operator (job %q, operator %q)", k.Job, k.Operator)
	}
	if len(k.Job) > maxKeyField {
		return dst, fmt.Errorf("state: job name is %d bytes, the limit is %d", len(k.Job), maxKeyField)
	}
	if len(k.Operator) > maxKeyField {
		return dst, fmt.Errorf("state: operator name is %d bytes, the limit is %d", len(k.Operator), maxKeyField)
	}
	if len(k.Namespace) > maxKeyField {
		return dst, fmt.Errorf("state: namespace is %d bytes, the limit is %d", len(k.Namespace), maxKeyField)
	}
	if k.KeyGroup < 0 || k.KeyGroup > MaxKeyGroup {
		return dst, fmt.Errorf("state: key group %d outside [0, %d]", k.KeyGroup, MaxKeyGroup)
	}
	dst = append(dst, keyTag)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.Job)))
	dst = append(dst, k.Job...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.Operator)))
	dst = append(dst, k.Operator...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(k.KeyGroup))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.Namespace)))
	dst = append(dst, k.Namespace...)
	dst = append(dst, k.User...)
	return dst, nil
}

// keyJobPrefix returns 0x01|len|job: the prefix of every key of the job.
func keyJobPrefix(jobName string) ([]byte, error) {
	if jobName == "" {
		return nil, errors.New("state: scope needs a job")
	}
	if len(jobName) > maxKeyField {
		return nil, fmt.Errorf("state: job name is %d bytes, the limit is %d", len(jobName), maxKeyField)
	}
	p := make([]byte, 0, 3+len(jobName))
	p = append(p, keyTag)
	p = binary.BigEndian.AppendUint16(p, uint16(len(jobName)))
	return append(p, jobName...), nil
}

// keyOperatorPrefix returns 0x01|len|job|len|op.
func keyOperatorPrefix(jobName, op string) ([]byte, error) {
	p, err := keyJobPrefix(jobName)
	if err != nil {
		return nil, err
	}
	if len(op) > maxKeyField {
		return nil, fmt.Errorf("state: operator name is %d bytes, the limit is %d", len(op), maxKeyField)
	}
	p = binary.BigEndian.AppendUint16(p, uint16(len(op)))
	return append(p, op...), nil
}

// keySplit returns the length of the operator prefix of an encoded key
// (0x01|len|job|len|op) and its key group.
func keySplit(enc []byte) (opPrefixLen int, group int, err error) {
	if len(enc) < 3 || enc[0] != keyTag {
		return 0, 0, errKeyEncoding
	}
	i := 3 + int(binary.BigEndian.Uint16(enc[1:]))
	if len(enc) < i+2 {
		return 0, 0, errKeyEncoding
	}
	i += 2 + int(binary.BigEndian.Uint16(enc[i:]))
	if len(enc) < i+4 {
		return 0, 0, errKeyEncoding
	}
	return i, int(binary.BigEndian.Uint16(enc[i:])), nil
}

// keyDecode decodes enc into k. Strings equal to the ones already in k are
// kept (no allocation), which makes scans over one operator cheap. k.User
// aliases enc.
func keyDecode(enc []byte, k *Key) error {
	if len(enc) < 3 || enc[0] != keyTag {
		return errKeyEncoding
	}
	i := 1
	field := func() ([]byte, bool) {
		if len(enc) < i+2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(enc[i:]))
		i += 2
		if len(enc) < i+n {
			return nil, false
		}
		f := enc[i : i+n]
		i += n
		return f, true
	}
	jb, ok := field()
	if !ok {
		return errKeyEncoding
	}
	ob, ok := field()
	if !ok {
		return errKeyEncoding
	}
	if len(enc) < i+2 {
		return errKeyEncoding
	}
	group := int(binary.BigEndian.Uint16(enc[i:]))
	i += 2
	nb, ok := field()
	if !ok {
		return errKeyEncoding
	}
	if len(jb) == 0 || len(ob) == 0 {
		return errKeyEncoding
	}
	if k.Job != string(jb) {
		k.Job = string(jb)
	}
	if k.Operator != string(ob) {
		k.Operator = string(ob)
	}
	if k.Namespace != string(nb) {
		k.Namespace = string(nb)
	}
	k.KeyGroup = group
	k.User = enc[i:]
	return nil
}

// keyPrefixEnd returns the smallest key greater than every key with prefix
// p, or nil when there is none (p is all 0xFF).
func keyPrefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// keySubPrefix returns what follows the key group in the keys of
// namespace whose user key starts with prefix: u16(len(ns))|ns|prefix.
func keySubPrefix(namespace string, prefix []byte) ([]byte, error) {
	if len(namespace) > maxKeyField {
		return nil, fmt.Errorf("state: namespace is %d bytes, the limit is %d", len(namespace), maxKeyField)
	}
	sub := binary.BigEndian.AppendUint16(nil, uint16(len(namespace)))
	sub = append(sub, namespace...)
	return append(sub, prefix...), nil
}

// keyNamespace returns the namespace bytes of an encoded key.
func keyNamespace(enc []byte) ([]byte, bool) {
	opLen, _, err := keySplit(enc)
	if err != nil {
		return nil, false
	}
	i := opLen + 2
	if len(enc) < i+2 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(enc[i:]))
	if len(enc) < i+2+n {
		return nil, false
	}
	return enc[i+2 : i+2+n], true
}

// keyGroupSeek returns opPrefix|u16(group).
func keyGroupSeek(opPrefix []byte, group int) []byte {
	s := make([]byte, len(opPrefix), len(opPrefix)+2)
	copy(s, opPrefix)
	return binary.BigEndian.AppendUint16(s, uint16(group))
}

// scopeGroups clamps a scope's key-group range to the encodable groups;
// ok is false when the range is empty.
func scopeGroups(r job.KeyGroupRange) (start, end int, ok bool) {
	start, end = max(r.Start, 0), min(r.End, MaxKeyGroup)
	return start, end, start <= end
}

// storedValueEncode appends the stored encoding of a value to dst.
func storedValueEncode(dst []byte, value []byte, expiresAt int64) []byte {
	dst = append(dst, storedValueVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	return append(dst, value...)
}

// storedValueDecode splits a stored value; value aliases enc. A
// tombstone (layer.go) decodes as an entry that expired at 1 ms, which
// no read takes as live.
func storedValueDecode(enc []byte) (value []byte, expiresAt int64, err error) {
	if len(enc) == storedValueHeader && enc[0] == storedTombstone {
		return nil, 1, nil
	}
	if len(enc) < storedValueHeader || enc[0] != storedValueVersion {
		return nil, 0, errors.New("state: malformed stored value")
	}
	return enc[storedValueHeader:], int64(binary.BigEndian.Uint64(enc[1:])), nil
}

// storedTombstoneValue is the stored value of a tombstone.
func storedTombstoneValue() []byte {
	return []byte{storedTombstone, 0, 0, 0, 0, 0, 0, 0, 0}
}

// expirySeconds is the Badger TTL of an expiry: Unix seconds, rounded up.
func expirySeconds(expiresAt int64) uint64 {
	if expiresAt <= 0 {
		return 0
	}
	return uint64((expiresAt + 999) / 1000)
}

// liveAt reports whether an entry with the expiry is visible at now (and
// not yet collected by the wall-clock TTL, wallSec being Unix seconds).
func liveAt(expiresAt, now, wallSec int64) bool {
	if expiresAt == 0 {
		return true
	}
	return expiresAt > now && expirySeconds(expiresAt) > uint64(wallSec)
}

// notCollected reports whether the wall-clock TTL has not yet collected an
// entry (the rule Size uses, which has no now).
func notCollected(expiresAt, wallSec int64) bool {
	return expiresAt == 0 || expirySeconds(expiresAt) > uint64(wallSec)
}

// wallSeconds is the wall clock in Unix seconds, as Badger reads it.
func wallSeconds() int64 { return time.Now().Unix() }

// mutationCheck validates the non-key fields of a mutation.
func mutationCheck(m *Mutation) error {
	if !m.Delete && m.ExpiresAt < 0 {
		return fmt.Errorf("state: negative ExpiresAt %d for %s/%s", m.ExpiresAt, m.Key.Job, m.Key.Operator)
	}
	return nil
}
