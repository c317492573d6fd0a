package hubstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// OutboxEntry is one unit of reconciler work.
type OutboxEntry struct {
	ID        int64
	EventKey  string // unique: enqueueing the same key twice is a no-op
	EventType string // reconcile_intent, retry_intent, observed, recovery, ...
	JobID     string
	IntentID  string
	Payload   json.RawMessage
	// AvailableAt delays the entry (zero: now).
	AvailableAt  time.Time
	ClaimedBy    string
	ClaimedUntil time.Time
	ClaimCount   int
	ProcessedAt  time.Time
	CreatedAt    time.Time
}

func insertOutbox(ctx context.Context, tx *cachedTx, e OutboxEntry, now int64) error {
	if e.EventKey == "" || e.EventType == "" {
		return invalidf("outbox entry needs event_key and event_type")
	}
	if err := checkJSON("outbox payload", e.Payload); err != nil {
		return err
	}
	avail := timeMS(e.AvailableAt)
	if avail == 0 {
		avail = now
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO outbox(event_key, event_type, job_id, intent_id, payload_json, available_at_ms, created_at_ms)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT(event_key) DO NOTHING`,
		e.EventKey, e.EventType, e.JobID, e.IntentID, nullBytes(e.Payload), avail, now)
	return err
}

// EnqueueOutbox adds an entry; an existing event key is left as it is.
func (s *Store) EnqueueOutbox(ctx context.Context, e OutboxEntry) error {
	return s.write(ctx, func(tx *cachedTx) error { return insertOutbox(ctx, tx, e, s.nowMS()) })
}

const outboxCols = `outbox_id, event_key, event_type, job_id, intent_id, payload_json, available_at_ms, claimed_by, claimed_until_ms,
	claim_count, processed_at_ms, created_at_ms`

func scanOutbox(sc interface{ Scan(...any) error }) (OutboxEntry, error) {
	var e OutboxEntry
	var p []byte
	var avail, until, proc, created int64
	if err := sc.Scan(&e.ID, &e.EventKey, &e.EventType, &e.JobID, &e.IntentID, &p, &avail, &e.ClaimedBy, &until, &e.ClaimCount, &proc, &created); err != nil {
		return OutboxEntry{}, err
	}
	e.Payload = p
	e.AvailableAt, e.ClaimedUntil, e.ProcessedAt, e.CreatedAt = msTime(avail), msTime(until), msTime(proc), msTime(created)
	return e, nil
}

// ClaimOutbox claims up to limit unprocessed, available entries for worker
// until now+lease, oldest first. An entry claimed earlier whose lease ran
// out without a completion is claimable again: a worker that died mid-way
// loses nothing.
func (s *Store) ClaimOutbox(ctx context.Context, worker string, lease time.Duration, limit int) ([]OutboxEntry, error) {
	if worker == "" || lease <= 0 {
		return nil, invalidf("claim needs a worker id and a positive lease")
	}
	if limit <= 0 {
		limit = 16
	}
	var out []OutboxEntry
	err := s.write(ctx, func(tx *cachedTx) error {
		now := s.nowMS()
		rows, err := tx.QueryContext(ctx, "SELECT "+outboxCols+` FROM outbox WHERE processed_at_ms = 0 AND available_at_ms <= ?
			AND claimed_until_ms <= ? ORDER BY outbox_id LIMIT ?`, now, now, limit)
		if err != nil {
			return err
		}
		var es []OutboxEntry
		for rows.Next() {
			e, err := scanOutbox(rows)
			if err != nil {
				rows.Close()
				return err
			}
			es = append(es, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		until := now + lease.Milliseconds()
		for i := range es {
			if _, err := tx.ExecContext(ctx, "UPDATE outbox SET claimed_by = ?, claimed_until_ms = ?, claim_count = claim_count + 1 WHERE outbox_id = ?",
				worker, until, es[i].ID); err != nil {
				return err
			}
			es[i].ClaimedBy, es[i].ClaimedUntil = worker, time.UnixMilli(until)
			es[i].ClaimCount++
		}
		out = es
		return nil
	})
	return out, err
}

// CompleteOutbox marks an entry processed. It is idempotent: completing a
// processed entry again is a no-op (done reports whether this call did it).
func (s *Store) CompleteOutbox(ctx context.Context, id int64) (done bool, err error) {
	err = s.write(ctx, func(tx *cachedTx) error {
		done, err = completeOutbox(ctx, tx, id, s.nowMS())
		return err
	})
	return done, err
}

func completeOutbox(ctx context.Context, tx *cachedTx, id, now int64) (bool, error) {
	res, err := tx.ExecContext(ctx, "UPDATE outbox SET processed_at_ms = ? WHERE outbox_id = ? AND processed_at_ms = 0", now, id)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	if n == 1 {
		return true, nil
	}
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1 FROM outbox WHERE outbox_id = ?", id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	} else if err != nil {
		return false, err
	}
	return false, nil
}

// DispatchOutbox is the reconciler's atomic step: it queues cmds and
// completes the outbox entry in one transaction, so a crash leaves either
// both or neither. If the entry was already processed (another worker got
// there after this one's lease lapsed) nothing is queued and done is false.
func (s *Store) DispatchOutbox(ctx context.Context, id int64, cmds []Command) (queued []Command, done bool, err error) {
	err = s.write(ctx, func(tx *cachedTx) error {
		now := s.nowMS()
		if done, err = completeOutbox(ctx, tx, id, now); err != nil || !done {
			return err
		}
		for i := range cmds {
			c := cmds[i]
			if err := s.insertCommand(ctx, tx, &c, now); err != nil {
				return err
			}
			queued = append(queued, c)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return queued, done, nil
}

// DeferOutbox releases a claimed entry and makes it available again at
// until (e.g. the target node is offline).
func (s *Store) DeferOutbox(ctx context.Context, id int64, until time.Time) error {
	return s.write(ctx, func(tx *cachedTx) error {
		_, err := tx.ExecContext(ctx, "UPDATE outbox SET available_at_ms = ?, claimed_until_ms = 0, claimed_by = '' WHERE outbox_id = ? AND processed_at_ms = 0",
			until.UnixMilli(), id)
		return err
	})
}

// OutboxStats counts pending (unprocessed) and currently claimed entries.
func (s *Store) OutboxStats(ctx context.Context) (pending, claimed int, err error) {
	err = s.rq.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN claimed_until_ms > ? THEN 1 ELSE 0 END),0)
		FROM outbox WHERE processed_at_ms = 0`, s.nowMS()).Scan(&pending, &claimed)
	return
}

// GetOutbox returns one entry or ErrNotFound.
func (s *Store) GetOutbox(ctx context.Context, id int64) (OutboxEntry, error) {
	e, err := scanOutbox(s.rq.QueryRowContext(ctx, "SELECT "+outboxCols+" FROM outbox WHERE outbox_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxEntry{}, ErrNotFound
	}
	return e, err
}

// Intent is one desired-state intent (one per job generation).
type Intent struct {
	IntentID         string
	JobID            string
	Generation       int64
	Kind             string
	DesiredState     string
	VersionID        string
	ActionID         string
	Payload          json.RawMessage
	State            string // accepted, converging, retrying, converged, blocked, superseded, failed
	Convergence      string // pending, converging, degraded, in_sync, blocked, failed
	RetryCount       int
	SupersededBy     string
	LastFailureClass string
	LastError        string
	Actor            string
	CorrelationID    string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	ConvergedAt      time.Time
}

const intentCols = `intent_id, job_id, generation, kind, desired_state, version_id, action_id, payload_json, state, convergence, retry_count,
	superseded_by, last_failure_class, last_error, actor, correlation_id, created_at_ms, updated_at_ms, converged_at_ms`

func scanIntent(sc interface{ Scan(...any) error }) (Intent, error) {
	var i Intent
	var p []byte
	var c, u, cv int64
	if err := sc.Scan(&i.IntentID, &i.JobID, &i.Generation, &i.Kind, &i.DesiredState, &i.VersionID, &i.ActionID, &p, &i.State, &i.Convergence,
		&i.RetryCount, &i.SupersededBy, &i.LastFailureClass, &i.LastError, &i.Actor, &i.CorrelationID, &c, &u, &cv); err != nil {
		return Intent{}, err
	}
	i.Payload = p
	i.CreatedAt, i.UpdatedAt, i.ConvergedAt = msTime(c), msTime(u), msTime(cv)
	return i, nil
}

// GetIntent returns an intent or ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, id string) (Intent, error) {
	i, err := scanIntent(s.rq.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE intent_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Intent{}, ErrNotFound
	}
	return i, err
}

// ListIntents returns a job's intents, newest generation first.
func (s *Store) ListIntents(ctx context.Context, jobID string) ([]Intent, error) {
	return queryAll(ctx, s.rq, scanIntent, "SELECT "+intentCols+" FROM intents WHERE job_id = ? ORDER BY generation DESC", jobID)
}

// IntentUpdate moves an intent. Retry, if set, also queues a retry_intent
// outbox entry available at Retry.
type IntentUpdate struct {
	IntentID     string
	State        string
	Convergence  string
	FailureClass string
	Error        string
	Retry        time.Time
}

// UpdateIntent applies u. A superseded or converged intent is final:
// updating it returns ErrStaleGeneration and changes nothing.
func (s *Store) UpdateIntent(ctx context.Context, u IntentUpdate) error {
	return s.write(ctx, func(tx *cachedTx) error {
		i, err := scanIntent(tx.QueryRowContext(ctx, "SELECT "+intentCols+" FROM intents WHERE intent_id = ?", u.IntentID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if i.State == "superseded" || i.State == "converged" {
			return fmt.Errorf("%w: intent %s is %s", ErrStaleGeneration, i.IntentID, i.State)
		}
		now := s.nowMS()
		retry := 0
		if !u.Retry.IsZero() {
			retry = 1
		}
		converged := int64(0)
		if u.State == "converged" {
			converged = now
		}
		if _, err := tx.ExecContext(ctx, `UPDATE intents SET state = ?, convergence = ?, last_failure_class = ?, last_error = ?,
			retry_count = retry_count + ?, updated_at_ms = ?, converged_at_ms = ? WHERE intent_id = ?`,
			u.State, u.Convergence, u.FailureClass, u.Error, retry, now, converged, u.IntentID); err != nil {
			return err
		}
		if retry == 1 {
			return insertOutbox(ctx, tx, OutboxEntry{EventKey: fmt.Sprintf("reconcile:retry:%s:%d", i.IntentID, i.RetryCount+1), EventType: "retry_intent",
				JobID: i.JobID, IntentID: i.IntentID, AvailableAt: u.Retry}, now)
		}
		return nil
	})
}

// RecoverIntents runs at Hub start: every open intent without a pending
// outbox entry gets one, so no accepted intent is forgotten.
func (s *Store) RecoverIntents(ctx context.Context) (n int, err error) {
	err = s.write(ctx, func(tx *cachedTx) error {
		now := s.nowMS()
		rows, err := tx.QueryContext(ctx, `SELECT intent_id, job_id FROM intents i WHERE state IN ('accepted','converging','retrying')
			AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.intent_id = i.intent_id AND o.processed_at_ms = 0)`)
		if err != nil {
			return err
		}
		type pair struct{ intent, job string }
		var ps []pair
		for rows.Next() {
			var p pair
			if err := rows.Scan(&p.intent, &p.job); err != nil {
				rows.Close()
				return err
			}
			ps = append(ps, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, p := range ps {
			if err := insertOutbox(ctx, tx, OutboxEntry{EventKey: fmt.Sprintf("reconcile:recovery:%s:%d", p.intent, now), EventType: "reconcile_intent",
				JobID: p.job, IntentID: p.intent}, now); err != nil {
				return err
			}
		}
		n = len(ps)
		return nil
	})
	return n, err
}
