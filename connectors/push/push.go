package push

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	queue "github.com/arkflow-rs/arkflow-go/internal/push"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
	"github.com/arkflow-rs/arkflow-go/job"
)

// ErrStopped is returned by Push for rows the job did not take because
// it had stopped (or stopped while they waited). Nothing of them was
// processed; a service answers its caller with a retryable error.
var ErrStopped = queue.ErrStopped

// ErrClosed is returned by Push after Close.
var ErrClosed = queue.ErrClosed

// Config configures a Push source. The zero value is one partition,
// round-robin, with at most DefaultMaxPending rows waiting.
type Config[T any] struct {
	// Partitions is the number of source partitions (default 1). Each
	// partition is read in push order by one source subtask. Give as many
	// as the source's parallelism, or more.
	//
	// Under event time each partition has its own watermark, and the
	// source's is their minimum: a partition that gets no rows holds every
	// window back, and windows never fire. When some partitions may stay
	// empty (a PartitionKey over few keys, pushes that stop), give
	// arkflow.EventTime an IdleTimeout, after which a partition without rows stops
	// holding the others back. (Without one, the source logs a warning
	// when a partition that never had a row has held the watermark back
	// for 10 s while others have rows.)
	Partitions int
	// PartitionKey, when set, sends each row to the partition of its key
	// (FNV-1a 64 of the key, modulo Partitions), so that the
	// rows of one key keep their order. When nil, each Push call goes to
	// one partition, round-robin over calls.
	PartitionKey func(row T) string
	// MaxPending bounds the rows pushed and not yet taken by the job
	// (default DefaultMaxPending). Push blocks while it is reached, and
	// the job takes rows only as fast as its bounded channels drain, so a
	// slow job slows its callers instead of growing the heap. A single
	// call with more rows than this waits until nothing else is pending.
	MaxPending int
	// IdempotencyKey, when set, makes pushes idempotent: a row whose key
	// was accepted before is acknowledged again without entering the job,
	// so a client that retries after losing the answer is counted once.
	// The keys seen live beside the write-ahead log and survive a crash,
	// so the source needs arkflow.Durable: without it Build refuses the
	// job. A row whose key is "" has none and always enters. The
	// package documentation ("Idempotent pushes") says when a key counts
	// as seen, and how calls of several rows and racing retries go.
	IdempotencyKey func(row T) string
	// IdempotencyRetention is how many keys are remembered, the newest
	// accepted (default DefaultIdempotencyRetention): a retry that comes
	// after more new keys than this enters again. The seen-set takes
	// about 55 bytes of heap a key, and its file at most 32 bytes a key.
	IdempotencyRetention int
}

// DefaultMaxPending is the default Config.MaxPending.
const DefaultMaxPending = queue.DefaultMaxPending

// DefaultIdempotencyRetention is the default Config.IdempotencyRetention:
// at 1,000 new keys a second, retries are recognized for about 16 minutes.
const DefaultIdempotencyRetention = 1_000_000

// Source is a source that a Go service feeds: its handlers call Push with
// rows of type T, and the job reads them. Create it with New, give it to
// the Builder's Source, and push while the job runs. Push returns nil once
// the job has taken every row of the call; with arkflow.Durable on the
// source that means the rows are in the write-ahead log and survive a
// crash. PushWait returns once they were processed. The package
// documentation says what each promises, which rows Push refuses, how
// rows are ordered and numbered, and how memory stays bounded.
//
// A Source is meant for one job at a time; rows pushed after the job
// stopped fail with ErrStopped until a job using the source starts again.
// It is safe for concurrent use.
type Source[T any] struct {
	cfg   Config[T]
	codec *typed.Codec[T]
	err   error
	q     *queue.Queue
	turn  atomic.Uint64
}

// New returns a push source for rows of type T, a struct whose fields
// map to columns as described at arkflow.Encode. A T that cannot map is reported by
// the Builder that receives the source, and by every Push.
func New[T any](cfg Config[T]) *Source[T] {
	p := &Source[T]{cfg: cfg}
	p.codec, p.err = typed.For[T]()
	if p.err == nil && cfg.IdempotencyRetention < 0 {
		p.err = fmt.Errorf("push: Config.IdempotencyRetention is %d: it must be > 0, or 0 for the default %d", cfg.IdempotencyRetention, DefaultIdempotencyRetention)
	}
	if p.err == nil {
		var seen *queue.Seen
		if cfg.IdempotencyKey != nil {
			seen = queue.NewSeen(cmp.Or(cfg.IdempotencyRetention, DefaultIdempotencyRetention))
		}
		p.q = queue.New(p.codec.Schema(), cfg.Partitions, cfg.MaxPending, seen)
	}
	return p
}

// InputType implements arkflow.SourceComponent.
func (p *Source[T]) InputType() string { return pushInputType }

// MarshalJSON writes the source's spec config: its schema and partition
// count (the rows themselves stay in Go).
func (p *Source[T]) MarshalJSON() ([]byte, error) {
	var cfg pushSpec
	cfg.Partitions = max(p.cfg.Partitions, 1)
	if p.err == nil {
		decl, err := connectors.FromArrow(p.codec.Schema())
		if err != nil {
			return nil, err
		}
		cfg.Schema = decl
	}
	return json.Marshal(cfg)
}

// Schema returns the Arrow schema of T's rows (nil when T cannot map).
func (p *Source[T]) Schema() *arrow.Schema {
	if p.err != nil {
		return nil
	}
	return p.codec.Schema()
}

// Push hands rows to the job and returns once it took them (see Source
// for what that promises with and without durability). It blocks while
// MaxPending rows wait to be taken, returns ctx's error when ctx ends first
// (the rows may then still be taken), ErrStopped when the job stopped
// before taking them, ErrClosed after Close, and an error naming the
// field and row, taking none of the call, when a row has no event time
// (see Source). Rows of one call keep their order within a partition.
func (p *Source[T]) Push(ctx context.Context, rows ...T) error {
	_, err := p.push(ctx, false, rows)
	return err
}

// PushDedup is Push that also returns how many rows of the call were
// duplicates: rows whose key (Config.IdempotencyKey) was accepted before,
// or repeats an earlier row's of the call. They are acknowledged, nil
// error, without entering the job; the other rows go in as Push takes
// them. On an error the count still says how many rows were duplicates.
// Without an IdempotencyKey it is Push, and the count is 0.
func (p *Source[T]) PushDedup(ctx context.Context, rows ...T) (duplicates int, err error) {
	return p.push(ctx, false, rows)
}

// PushWait is Push that returns only once the rows were processed:
// acknowledged by every sink they reached, or filtered away. It returns the
// error that kept them from being processed (a failed sink write, the job
// stopping first). A duplicate (Config.IdempotencyKey) does not wait for
// the processing of the row it repeats.
func (p *Source[T]) PushWait(ctx context.Context, rows ...T) error {
	_, err := p.push(ctx, true, rows)
	return err
}

// Close ends the input: the job reads what is queued, then sees the end of
// its input, fires every open window and ends (as a bounded source would).
// Later pushes fail with ErrClosed.
func (p *Source[T]) Close() {
	if p.q != nil {
		p.q.Close()
	}
}

// Pending returns the number of rows pushed and not yet taken by the job.
func (p *Source[T]) Pending() int64 {
	if p.q == nil {
		return 0
	}
	return p.q.Pending()
}

func (p *Source[T]) push(ctx context.Context, processed bool, rows []T) (dups int, err error) {
	if p.err != nil {
		return 0, fmt.Errorf("arkflow: push: %w", p.err)
	}
	if len(rows) == 0 {
		return 0, ctx.Err()
	}
	// The rows are checked against the job that will take them, whole,
	// before any is queued. (An idempotent source waits here until the
	// keys of the job's WAL are all seen.)
	et, err := p.q.Reading(ctx)
	if err != nil {
		return 0, pushErr(err)
	}
	if et != nil && !et.Route {
		if first, n, null := p.codec.Missing(rows, et.Col); n > 0 {
			return 0, fmt.Errorf("arkflow: push: %w", et.Refusal(first, n, null))
		}
	}
	var ids []string
	var sums []queue.Sum
	if p.cfg.IdempotencyKey != nil {
		n := len(rows)
		if rows, ids, sums, err = p.claim(ctx, rows); err != nil {
			return 0, pushErr(err)
		}
		if dups = n - len(rows); len(rows) == 0 {
			return dups, nil
		}
	}
	return dups, p.send(ctx, processed, rows, ids, sums)
}

// claim keeps the rows that are not duplicates, with their keys (ids) and the
// sums claimed for them (see queue.Seen.Claim): the claims settle when
// the rows are accepted or refused, or, when they are never queued, by
// send.
func (p *Source[T]) claim(ctx context.Context, rows []T) ([]T, []string, []queue.Sum, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = p.cfg.IdempotencyKey(r)
	}
	idx, sums, err := p.q.Seen().Claim(ctx, ids)
	if err != nil || len(idx) == len(rows) {
		return rows, ids, sums, err
	}
	kept, kids := make([]T, len(idx)), make([]string, len(idx))
	for j, i := range idx {
		kept[j], kids[j] = rows[i], ids[i]
	}
	return kept, kids, sums, nil
}

// send queues rows (with their keys and claimed sums, for an idempotent
// source) and waits for the outcome Push or PushWait reports.
func (p *Source[T]) send(ctx context.Context, processed bool, rows []T, ids []string, sums []queue.Sum) error {
	parts := p.q.Partitions()
	if p.cfg.PartitionKey == nil || parts == 1 {
		part := 0
		if parts > 1 {
			part = int((p.turn.Add(1) - 1) % uint64(parts))
		}
		w, err := p.enqueue(ctx, processed, part, rows, ids, sums)
		if err != nil {
			return err
		}
		return wait(ctx, w)
	}
	groups := make([]group[T], parts)
	for i, r := range rows {
		g := &groups[keys.HashKey([]byte(p.cfg.PartitionKey(r)))%uint64(parts)]
		g.rows = append(g.rows, r)
		if ids != nil {
			g.ids, g.sums = append(g.ids, ids[i]), append(g.sums, sums[i])
		}
	}
	// Every group is handed over before waiting for any, so the
	// partitions' subtasks take them in parallel.
	var waits []chan error
	var first error
	for part, g := range groups {
		if len(g.rows) == 0 {
			continue
		}
		if first != nil {
			p.settle(g.sums, first) // never queued: its keys are free again
			continue
		}
		w, err := p.enqueue(ctx, processed, part, g.rows, g.ids, g.sums)
		if err != nil {
			first = err
			continue
		}
		waits = append(waits, w)
	}
	for _, w := range waits {
		if err := wait(ctx, w); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// group is the rows of one Push call that go to one partition.
type group[T any] struct {
	rows []T
	ids  []string // the rows' idempotency keys
	sums []queue.Sum
}

// settle ends the claims of rows that were never queued (err is why).
func (p *Source[T]) settle(sums []queue.Sum, err error) {
	if seen := p.q.Seen(); seen != nil && sums != nil {
		seen.Settle(sums, err)
	}
}

// enqueue encodes rows and queues them; the channel reports acceptance
// (or processing, when processed). On an error the rows' claims are
// settled.
func (p *Source[T]) enqueue(ctx context.Context, processed bool, part int, rows []T, ids []string, sums []queue.Sum) (chan error, error) {
	rec, err := p.batch(rows)
	if err != nil {
		err = fmt.Errorf("arkflow: push: %w", err)
		p.settle(sums, err)
		return nil, err
	}
	// w reports the one callback the call waits for: acceptance, or
	// processing (rows not taken are reported to both, with one error).
	w := make(chan error, 1)
	report := func(err error) { w <- err }
	var accepted, done func(error) = report, nil
	if processed {
		accepted, done = nil, report
	}
	if err := p.q.Enqueue(ctx, part, rec, ids, sums, accepted, done); err != nil {
		return nil, pushErr(err)
	}
	return w, nil
}

// batch makes the record of rows: when T's values survive encoding
// unchanged (times and durations rounded to their units first), a typed
// batch of a copy of them (the caller may reuse its slice once Push
// returns), whose columns are encoded only when read (the WAL, a
// shuffle's key, the event time; a typed operator or sink reads the rows
// themselves); otherwise the encoded rows.
func (p *Source[T]) batch(rows []T) (arrow.RecordBatch, error) {
	if p.codec.Exact() {
		own := p.codec.MakeRows(len(rows))
		copy(own, rows)
		if err := p.codec.Normalize(own); err != nil {
			return nil, err
		}
		return typed.NewBatch(p.codec, own), nil
	}
	return p.codec.Encode(nil, rows)
}

func wait(ctx context.Context, w chan error) error {
	select {
	case err := <-w:
		return pushErr(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func pushErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err == ErrStopped || err == ErrClosed {
		return fmt.Errorf("arkflow: %w", err) // their text starts with "push: "
	}
	return fmt.Errorf("arkflow: push: %w", err)
}

// pushInputType is the input type of Push sources in a spec.
const pushInputType = "push"

// pushSpec is a Push source's spec config.
type pushSpec struct {
	Schema     connectors.Schema `json:"schema,omitempty"`
	Partitions int               `json:"partitions,omitempty"`
}

// pushInput is what the push factory needs of a bound *Source[T].
type pushInput interface {
	input(t *job.Time) (connectors.Input, error)
}

// input is the source's Input for a job whose time block for it is t.
func (p *Source[T]) input(t *job.Time) (connectors.Input, error) {
	if p.err != nil {
		return nil, p.err
	}
	var et *queue.EventTime
	if t != nil && t.Mode == job.EventTime {
		// An unknown column is the build's to report.
		if idx := p.codec.Schema().FieldIndices(t.TimestampField); len(idx) == 1 {
			et = &queue.EventTime{Col: idx[0], Field: p.codec.FieldPath(idx[0]), Column: t.TimestampField, Route: t.LateEventPolicy == job.LateRoute}
		}
	}
	return p.q.Input(et), nil
}

func init() {
	// An idempotent source keeps its seen keys beside its WAL: without one
	// the job is refused at Build, naming the source.
	connectors.RegisterJobCheck(func(v connectors.JobView) []connectors.JobProblem {
		var out []connectors.JobProblem
		for _, in := range v.Inputs {
			if id, ok := in.Input.(interface{ Idempotent() bool }); ok && id.Idempotent() && !in.Durable {
				out = append(out, connectors.JobProblem{OperatorID: in.OperatorID, Field: in.Path + ".durability", Reason: queue.ErrNotDurable.Error()})
			}
		}
		return out
	})
	connectors.RegisterInput(pushInputType, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg pushSpec
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		p, ok := bc.Bound.(pushInput)
		if !ok {
			return nil, fmt.Errorf("input type %q is fed by Go code: give a push.New value to the Builder's Source; a spec alone cannot run it", pushInputType)
		}
		return p.input(bc.Time)
	})
}
