// Package streambuf holds the buffers of Stream configs (memory,
// tumbling_window, session_window, sliding_window, and the join block of
// the window buffers) as state machines driven by their caller: every
// method takes the time it runs at, and nothing in here starts a timer or
// a goroutine. The Stream runtime drives a buffer with its clock; tests
// drive it with any time they like. New makes one from its config.
package streambuf

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
)

// Entry is one batch written to a buffer.
type Entry struct {
	// Rec holds the rows; the buffer owns it from Write on.
	Rec arrow.RecordBatch
	// Input is the name of the input the rows came from (a
	// multiple_inputs child's name), "" for a single input.
	Input string
	// Ack holds one reference, which the buffer hands to the emissions
	// holding the rows: it is released once every emission holding the
	// rows has been handled (or with an error when the buffer drops them).
	// May be nil.
	Ack *ack.Node
}

// Emission is a batch a buffer emits.
type Emission struct {
	// Rec holds the rows; the caller owns it.
	Rec arrow.RecordBatch
	// Ack holds one reference: the caller releases it once the rows are
	// handled (nil) or failed (the error).
	Ack *ack.Node
}

// Buffer is one stream's buffer. Its methods are called from one
// goroutine, with times that never go back. When rows cannot be emitted
// (batches of different schemas to put together, a join that fails), the
// method returns the error and drops the entries concerned, releasing
// their acknowledgements with it; the buffer goes on with the rest.
type Buffer interface {
	// Write takes e and returns what it emits at once (a memory buffer
	// reaching its capacity, a sliding window filling up).
	Write(now time.Time, e Entry) ([]Emission, error)
	// Deadline is when Tick has something to do next; false when
	// nothing is waiting on time.
	Deadline() (time.Time, bool)
	// Tick returns what is due at now.
	Tick(now time.Time) ([]Emission, error)
	// Flush is called once at the end of input: it returns everything
	// still held that would ever be emitted.
	Flush(now time.Time) ([]Emission, error)
	// Close drops whatever is still held, releasing its acknowledgements
	// with an error.
	Close()
}
