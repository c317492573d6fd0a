package arkflow

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/state"
)

// Errors of Job.Query, QueryRows and Job.QueryState, besides ErrNotRunning
// (before Run, and once the job has ended).
var (
	// ErrNotQueryable is returned for an operator the job does not have, or
	// whose state is not read that way (the message says which reads it
	// has): Query reads aggregates, windows and temporal joins' tables,
	// QueryState the state of Process operators.
	ErrNotQueryable = runtime.ErrNotQueryable
	// ErrKeyType is returned for a key the operator's key column cannot
	// hold (a string for an int64 key that is not a number, 300 for an
	// int8 key); the message names the operator and the column type.
	ErrKeyType = runtime.ErrKeyType
)

// Query returns the state of one key in a running job's operator, as rows
// of the schema the operator emits, none when it keeps nothing for the
// key; rows of a key that reached one subtask at parallelism > 1 are found
// there. The key is a Go value of the key column's kind or text parsing
// as one (see QueryRows). What each operator answers:
//
//   - Aggregate: its committed accumulators, the row it last emitted for
//     the key and the sinks acknowledged; what a restart restores.
//   - Window: the key's open windows with every batch they have taken,
//     and fired ones kept for late updates (update true), by end.
//   - Temporal join: the newest committed version of the table's row,
//     its key and table columns.
//
// A query never sees a batch half applied, and holds the operator only
// while it copies one key's state. The caller releases the record.
func (j *Job) Query(ctx context.Context, operator string, key any) (arrow.RecordBatch, error) {
	return j.rt.Lookup(ctx, operator, key)
}

// QueryRows is Job.Query decoded into T, a struct as Decode takes
// (usually the type the operator's sink receives): nil when the operator
// keeps nothing for the key. The key may be a Go value (a string, an
// integer or float of any width, a bool, a time.Time for timestamp and
// date keys) or text that parses as the key column's type ("42",
// "2026-12-07T10:00:00Z"), as a key taken from a URL; a key the column
// cannot hold is an ErrKeyType.
//
//	totals, err := arkflow.QueryRows[Total](ctx, j, "totals", "north")
func QueryRows[T any](ctx context.Context, j *Job, operator string, key any) ([]T, error) {
	rec, err := j.Query(ctx, operator, key)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	if rec.NumRows() == 0 {
		return nil, nil
	}
	rows, err := Decode[T](rec)
	if err != nil {
		return nil, fmt.Errorf("operator %q: %w", operator, err)
	}
	return rows, nil
}

// QueryState returns the committed state of key in a Process operator
// (ProcessRows or Builder.Process) of a running job, read only: read it
// with the state.Value and state.Map the operator's function declared.
// Committed state is what the operator wrote for rows whose output the
// sinks acknowledged, and what a restart restores; writes return an
// error (state.Value's Clear panics).
//
//	k, err := j.QueryState(ctx, "count", "alice")
//	n, ok, err := visits.Get(k)
func (j *Job) QueryState(ctx context.Context, operator string, key any) (*state.Keyed, error) {
	k, err := j.rt.KeyState(ctx, operator, key)
	if err != nil {
		return nil, err
	}
	return statestore.Public(k).(*state.Keyed), nil
}

// ScanOptions selects a page of Job.Scan. Zero fields select nothing out:
// every key, 100 a page, from the start.
type ScanOptions struct {
	// Prefix keeps the keys that start with it (string and binary keys).
	Prefix string
	// From and To keep the keys in [From, To), by the key's value (a
	// number's order for numeric keys); nil leaves that end open. They
	// take what Query's key does.
	From, To any
	// Limit is the most keys a page holds (default 100, at most 10,000);
	// a window's key has a row per window.
	Limit int
	// After is the cursor the previous page returned.
	After string
}

// ErrBadCursor is returned by Scan for a ScanOptions.After that no page
// returned.
var ErrBadCursor = runtime.ErrBadCursor

// Scan reads a running job's operator state a page at a time, as Query
// answers each key (the same operators, the same consistency): the rows
// of the page's keys and the cursor of the next page, "" after the last.
// Keys come in the order the job keeps them, by key group then key, not
// by value; a key written while a scan pages is in a later page or not.
//
//	for after := ""; ; {
//		rows, next, err := j.Scan(ctx, "totals", arkflow.ScanOptions{Prefix: "eu-", After: after})
//		…
//		if after = next; after == "" { break }
//	}
func (j *Job) Scan(ctx context.Context, operator string, opts ScanOptions) (arrow.RecordBatch, string, error) {
	return j.rt.Scan(ctx, operator, runtime.ScanQuery{Prefix: []byte(opts.Prefix), From: opts.From, To: opts.To, Limit: opts.Limit, After: opts.After})
}

// ScanRows is Job.Scan decoded into T (see QueryRows).
func ScanRows[T any](ctx context.Context, j *Job, operator string, opts ScanOptions) (rows []T, next string, err error) {
	rec, next, err := j.Scan(ctx, operator, opts)
	if err != nil {
		return nil, "", err
	}
	defer rec.Release()
	if rec.NumRows() == 0 {
		return nil, next, nil
	}
	if rows, err = Decode[T](rec); err != nil {
		return nil, "", fmt.Errorf("operator %q: %w", operator, err)
	}
	return rows, next, nil
}
