package ops

import (
	"bytes"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// QueryShape says how an operator's state is looked up by key while the
// job runs (arkflow's Job.Query): the type of its key and the schema of
// the rows a lookup answers. Built.Query is nil for operators whose state
// is not looked up that way.
type QueryShape struct {
	Key    arrow.DataType
	Schema *arrow.Schema
	// State marks an operator whose state user code reads itself, through
	// state.Value and state.Map (Process): it answers KeyState, not Lookup.
	State bool
}

// Queryable is implemented by the instances of operators with a
// QueryShape. Its methods are called from goroutines other than the
// task's, while it runs, and never see a batch half applied; what each
// operator answers (committed state, or every batch it has taken) is its
// documentation's. key is the key's bytes (keys.Encode).
type Queryable interface {
	// Lookup returns the rows of key (QueryShape.Schema), none when the
	// operator keeps nothing for it.
	Lookup(key []byte) (arrow.RecordBatch, error)
}

// KeyStateReader is implemented by the instances of operators whose state
// user code reads (QueryShape.State): KeyState returns a read-only handle
// on the committed state of key.
type KeyStateReader interface {
	KeyState(key []byte) *statestore.Keyed
}

// EmptyRecord returns a record of schema s without rows: a lookup's
// answer for a key the operator keeps nothing for.
func EmptyRecord(s *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	return b.NewRecordBatch()
}

// ScanRequest asks a subtask for a page of its state, in the order of its
// keys' (key group, key bytes): the keys after (AfterGroup, AfterKey)
// (AfterKey nil: the start of AfterGroup) that Match accepts, at most
// Limit of them.
type ScanRequest struct {
	AfterGroup int
	AfterKey   []byte
	Match      func(key []byte) bool
	Limit      int
}

// After reports whether (group, key) comes after the request's cursor.
func (q ScanRequest) After(group int, key []byte) bool {
	if group != q.AfterGroup {
		return group > q.AfterGroup
	}
	return q.AfterKey == nil || bytes.Compare(key, q.AfterKey) > 0
}

// ScanPage is a page of a subtask's state: the rows of the keys it
// holds (QueryShape.Schema), and where the last of them is (the cursor
// of the next page; Keys 0 when none).
type ScanPage struct {
	Rec       arrow.RecordBatch
	Keys      int
	LastGroup int
	LastKey   []byte
}

// Scanner is implemented by Queryable instances whose state can be read a
// page at a time.
type Scanner interface {
	Scan(q ScanRequest) (ScanPage, error)
}
