package runtime

// This file holds queries of a running job's state by key (Lookup,
// KeyState): the instances that answer them, registered as they are
// created, and the routing of a key to the subtask that keeps it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// Errors of queries.
var (
	// ErrNotQueryable is returned for an operator that is not in the job
	// or whose state is not looked up by key.
	ErrNotQueryable = errors.New("arkflow: operator state cannot be queried")
	// ErrKeyType is returned for a key its operator's key column cannot
	// hold.
	ErrKeyType = errors.New("arkflow: key of the wrong type")
	// ErrKeyNotLocal is returned, in a run of part of a job (an Agent's),
	// for a key whose key group another process owns.
	ErrKeyNotLocal = errors.New("arkflow: key owned by another process")
)

// opQuery is what answers the queries of one operator: its local
// subtasks' instances (nil for subtasks elsewhere), by subtask.
type opQuery struct {
	shape *ops.QueryShape
	subs  []ops.Instance
	// coPartitioned: the operator keeps its keys in its own subtask's
	// key groups (job.Source.KeyedBy), so a key may be in any subtask.
	coPartitioned bool
}

// registerQuery records a created instance of an operator whose state is
// queried.
func (r *Runtime) registerQuery(opID string, sub, par int, coPart bool, inst ops.Instance) {
	shape := r.g.Ops[opID].Query
	if shape == nil {
		return
	}
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if r.queries == nil {
		r.queries = map[string]*opQuery{}
	}
	q := r.queries[opID]
	if q == nil {
		q = &opQuery{shape: shape, subs: make([]ops.Instance, par), coPartitioned: coPart}
		r.queries[opID] = q
	}
	q.subs[sub] = inst
}

// closeQueries ends queries: the instances are closed.
func (r *Runtime) closeQueries() {
	r.qmu.Lock()
	r.queries, r.queriesClosed = nil, true
	r.qmu.Unlock()
}

// QueryShape returns how operator op's state is queried, or nil.
func (r *Runtime) QueryShape(op string) *ops.QueryShape { return r.g.Ops[op].Query }

// Lookup returns the rows of key's state in operator op (see
// ops.Queryable): none when it keeps nothing for the key. It waits for a
// starting job to run; ErrNotRunning before Run and after the job ended.
func (r *Runtime) Lookup(ctx context.Context, op string, key any) (arrow.RecordBatch, error) {
	var out arrow.RecordBatch
	err := r.query(ctx, op, key, false, func(inst ops.Instance, kb []byte) (bool, error) {
		q, ok := inst.(ops.Queryable)
		if !ok {
			return false, fmt.Errorf("%w: operator %q", ErrNotQueryable, op)
		}
		rec, err := q.Lookup(kb)
		if err != nil {
			return false, err
		}
		if out != nil {
			out.Release()
		}
		out = rec
		return rec.NumRows() > 0, nil
	})
	if err != nil && out != nil {
		out.Release()
		out = nil
	}
	return out, err
}

// KeyState returns a read-only handle on the committed state of key in a
// Process operator (ops.KeyStateReader).
func (r *Runtime) KeyState(ctx context.Context, op string, key any) (*statestore.Keyed, error) {
	var out *statestore.Keyed
	err := r.query(ctx, op, key, true, func(inst ops.Instance, kb []byte) (bool, error) {
		ks, ok := inst.(ops.KeyStateReader)
		if !ok {
			return false, fmt.Errorf("%w: operator %q", ErrNotQueryable, op)
		}
		out = ks.KeyState(kb)
		return true, nil
	})
	return out, err
}

// query encodes key for op and calls ask with the instance of every
// subtask that may keep it (one, unless the operator is co-partitioned)
// until ask reports it found the key.
func (r *Runtime) query(ctx context.Context, op string, key any, state bool, ask func(ops.Instance, []byte) (bool, error)) error {
	shape := r.g.Ops[op].Query
	if shape == nil || shape.State != state {
		return notQueryable(r, op, state)
	}
	kb, err := keys.Encode(shape.Key, key)
	if err != nil {
		return fmt.Errorf("%w: operator %q: %v", ErrKeyType, op, err)
	}
	if err := r.waitQueryable(ctx, op); err != nil {
		return err
	}
	r.qmu.RLock()
	defer r.qmu.RUnlock()
	q := r.queries[op]
	if r.queriesClosed || q == nil {
		return fmt.Errorf("%w: operator %q: the job has ended", ErrNotRunning, op)
	}
	if q.coPartitioned {
		if state {
			return fmt.Errorf("%w: operator %q keeps each key in the subtask its source partition sent it to (keyed_by), so its state is not read by key", ErrNotQueryable, op)
		}
		for _, inst := range q.subs {
			if inst == nil {
				continue
			}
			if found, err := ask(inst, kb); found || err != nil {
				return err
			}
		}
		return nil
	}
	m := r.g.Spec.MaxParallelism
	sub := keys.OwnerOf(m, len(q.subs), keys.KeyGroup(kb, m))
	inst := q.subs[sub]
	if inst == nil {
		return fmt.Errorf("%w: operator %q: the key is in key group %d, of task %s, which runs elsewhere", ErrKeyNotLocal, op, keys.KeyGroup(kb, m), planner.TaskID(op, sub))
	}
	_, err = ask(inst, kb)
	return err
}

// notQueryable says why op's state is not queried that way.
func notQueryable(r *Runtime, op string, state bool) error {
	o, _ := r.g.Spec.Operator(op)
	switch {
	case o == nil:
		return fmt.Errorf("%w: the job has no operator %q", ErrNotQueryable, op)
	case r.g.Ops[op].Query == nil:
		return fmt.Errorf("%w: operator %q is a %s; queries read aggregates, windows, temporal joins' tables and process operators' state", ErrNotQueryable, op, o.Kind)
	case state:
		return fmt.Errorf("%w: operator %q keeps no state.Value or state.Map (it is a %s): look its rows up instead", ErrNotQueryable, op, o.Kind)
	}
	return fmt.Errorf("%w: operator %q keeps state.Value and state.Map state, which its own types read: query the state of a key instead", ErrNotQueryable, op)
}

// waitQueryable waits for a starting job to run and to have replayed
// its write-ahead logs (Recovered).
func (r *Runtime) waitQueryable(ctx context.Context, op string) error {
	if err := r.waitRunning(ctx); err != nil {
		return err
	}
	select {
	case <-r.Recovered():
		return nil
	case <-r.done:
		return fmt.Errorf("%w: the job has ended", ErrNotRunning)
	case <-ctx.Done():
		return fmt.Errorf("operator %q: waiting for the job to replay its write-ahead logs: %w", op, ctx.Err())
	}
}

// waitRunning waits for a starting job to run.
func (r *Runtime) waitRunning(ctx context.Context) error {
	switch r.State() {
	case Created:
		return fmt.Errorf("%w: queries need Run", ErrNotRunning)
	case Running:
		return nil
	}
	select {
	case <-r.runningCh():
		return nil
	case <-r.done:
		return fmt.Errorf("%w: the job has ended", ErrNotRunning)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recovered is closed once what the job's write-ahead logs replay after a
// restart has gone through the job: every durable source has delivered
// its replay, and (with a checkpoint block, whose barriers this needs) a
// barrier sent after it has reached every sink, so every operator has
// taken the replayed rows. A job without durable sources is recovered
// when it runs. Queries wait for it: after a restart they answer what the
// job answered before, not a state the replay has yet to bring forward.
func (r *Runtime) Recovered() <-chan struct{} { return r.recoveredCh() }

func (r *Runtime) recoveredCh() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recovered == nil {
		r.recovered = make(chan struct{})
	}
	return r.recovered
}

// watchRecovery closes Recovered when the replay is through (see there);
// it runs from the moment the job runs until then or until ctx ends.
func (r *Runtime) watchRecovery(ctx context.Context) {
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	replays := false
	for _, s := range sources {
		if s.wal == nil {
			continue
		}
		replays = true
		select {
		case <-s.wal.ReplayOver():
		case <-s.done:
		case <-ctx.Done():
			return
		}
	}
	if replays && r.g.Spec.Checkpoint != nil {
		for {
			err := r.Sync(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil || IsNotRunning(err) {
				return
			}
			r.log.Warn("waiting for the replay to go through the job", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	close(r.recoveredCh())
}

// ErrBadCursor is returned for a scan cursor that no scan returned.
var ErrBadCursor = errors.New("arkflow: malformed scan cursor")

// ScanQuery selects a page of a scan (see Scan).
type ScanQuery struct {
	Prefix   []byte
	From, To any // nil: open
	Limit    int
	After    string
}

// Scan returns a page of operator op's state: the rows of at most
// q.Limit keys, in order of (key group, key bytes), after the cursor
// q.After, and the cursor of the next page ("" after the last).
func (r *Runtime) Scan(ctx context.Context, op string, q ScanQuery) (arrow.RecordBatch, string, error) {
	shape := r.g.Ops[op].Query
	if shape == nil || shape.State {
		return nil, "", notQueryable(r, op, false)
	}
	req, err := scanRequest(shape, op, q)
	if err != nil {
		return nil, "", err
	}
	if err := r.waitQueryable(ctx, op); err != nil {
		return nil, "", err
	}
	r.qmu.RLock()
	defer r.qmu.RUnlock()
	qs := r.queries[op]
	if r.queriesClosed || qs == nil {
		return nil, "", fmt.Errorf("%w: operator %q: the job has ended", ErrNotRunning, op)
	}
	m, p := r.g.Spec.MaxParallelism, len(qs.subs)
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	next := ""
	for s := 0; s < p && req.Limit > 0; s++ {
		if keys.RangeFor(m, p, s).End < req.AfterGroup {
			continue
		}
		sc, ok := qs.subs[s].(ops.Scanner)
		if qs.subs[s] == nil || !ok {
			return nil, "", fmt.Errorf("%w: operator %q: task %s runs elsewhere; a scan needs every subtask in this process", ErrKeyNotLocal, op, planner.TaskID(op, s))
		}
		page, err := sc.Scan(req)
		if err != nil {
			return nil, "", err
		}
		recs = append(recs, page.Rec)
		if page.Keys > 0 {
			req.Limit -= page.Keys
			req.AfterGroup, req.AfterKey = page.LastGroup, page.LastKey
			next = encodeCursor(page.LastGroup, page.LastKey)
		}
	}
	if req.Limit > 0 {
		next = ""
	}
	return concatRecords(shape.Schema, recs), next, nil
}
