package kafka

import "errors"

// EXTERNAL: errors callers branch on.

var (
	// ErrFenced is returned (wrapped) by an exactly-once sink's Write when
	// a newer producer with the same transactional_id took over: the
	// broker aborted this producer's open transaction, so none of the
	// write's rows became visible to read_committed consumers, and the
	// write is not retried (the other producer owns the id now). Check
	// that no two running sinks share a transactional_id.
	ErrFenced = errors.New("kafka: producer fenced: another producer with the same transactional_id took over")

	// ErrUnpairedGroup is returned (wrapped) by the Write of an output
	// with offset_commit_group when no kafka input with that
	// consumer_group and transactional_offsets: true is connected in this
	// process: the write fails (nothing is written) rather than writing
	// rows whose input offsets nobody commits.
	ErrUnpairedGroup = errors.New("kafka: offset_commit_group has no live transactional input")

	// ErrInstanceFenced is returned (wrapped) by the Read of a source
	// with parallelism 1 when another consumer joined its consumer group
	// with the same group.instance.id (static membership, KIP-345) and so
	// took its place and its partitions: the broker fenced this consumer,
	// which cannot rejoin, so the source fails instead of reading nothing
	// on. Check that the job does not run in two processes at once, and
	// that no other source sets the same group.instance.id in its
	// properties.
	ErrInstanceFenced = errors.New("kafka: consumer fenced: another consumer joined the group with the same group.instance.id")

	// ErrClosed is returned by Read and Write after Close.
	ErrClosed = errors.New("kafka: closed")
)

// INTERNAL

// errNotConnected is returned by Read and Write before Connect.
var errNotConnected = errors.New("kafka: not connected (Connect first)")
