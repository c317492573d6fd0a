package hubstore

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CommandState is a command's lifecycle state.
type CommandState string

// Command states. queued → delivered (claimed by a poll, until the claim
// lease ends) → acknowledged → running → one terminal state. A delivered
// command whose claim lapses without an acknowledgement is delivered again.
const (
	CommandQueued          CommandState = "queued"
	CommandDelivered       CommandState = "delivered"
	CommandAcknowledged    CommandState = "acknowledged"
	CommandRunning         CommandState = "running"
	CommandSucceeded       CommandState = "succeeded"
	CommandFailed          CommandState = "failed"
	CommandTimedOut        CommandState = "timed_out"
	CommandCancelled       CommandState = "cancelled"
	CommandSuperseded      CommandState = "superseded"
	CommandNodeUnavailable CommandState = "node_unavailable"
)

// Terminal reports whether s is final.
func (s CommandState) Terminal() bool {
	switch s {
	case CommandSucceeded, CommandFailed, CommandTimedOut, CommandCancelled, CommandSuperseded, CommandNodeUnavailable:
		return true
	}
	return false
}

func (s CommandState) rank() int {
	switch s {
	case CommandQueued:
		return 0
	case CommandDelivered:
		return 1
	case CommandAcknowledged:
		return 2
	case CommandRunning:
		return 3
	}
	return 4
}

// ArkFlow v1 job command operations.
const (
	OpJobStart            = "job_start"
	OpJobStop             = "job_stop"
	OpJobCheckpoint       = "job_checkpoint"
	OpJobSavepoint        = "job_savepoint"
	OpJobCheckpointCommit = "job_checkpoint_commit"
	OpJobSavepointCommit  = "job_savepoint_commit"
)

// Command is one command for one agent.
type Command struct {
	ID            string
	NodeID        string
	Operation     string // job_start, job_stop, job_checkpoint, ...
	JobID         string
	Generation    int64
	AssignmentID  string
	IntentID      string
	CheckpointID  string
	ActionID      string
	CorrelationID string
	Payload       json.RawMessage
	State         CommandState
	// ExpiresAt is the execution deadline (zero: none). A command not
	// acknowledged by then becomes timed_out.
	ExpiresAt     time.Time
	ClaimedUntil  time.Time
	DeliveryCount int
	CreatedAt     time.Time
	FinishedAt    time.Time
}

// CommandResult is one result an agent posted for a command.
type CommandResult struct {
	CommandID string
	// Generation, if not 0, must equal the command's.
	Generation         int64
	State              CommandState
	Progress           int
	FailureClass       string
	Error              string
	ObservedGeneration int64
	Details            json.RawMessage
	ReceivedAt         time.Time
}

// ResultOutcome is what RecordCommandResult did.
type ResultOutcome struct {
	Command Command
	// Terminal is the stored terminal result, if the command is terminal.
	Terminal *CommandResult
	// Duplicate: the command was already terminal; nothing changed.
	Duplicate bool
}

const commandCols = `command_id, node_id, operation, job_id, generation, assignment_id, intent_id, checkpoint_id, action_id,
	correlation_id, payload_json, state, expires_at_ms, claimed_until_ms, delivery_count, created_at_ms, finished_at_ms`

func scanCommand(sc interface{ Scan(...any) error }) (Command, error) {
	var c Command
	var payload []byte
	var exp, claimed, created, finished int64
	if err := sc.Scan(&c.ID, &c.NodeID, &c.Operation, &c.JobID, &c.Generation, &c.AssignmentID, &c.IntentID, &c.CheckpointID, &c.ActionID,
		&c.CorrelationID, &payload, &c.State, &exp, &claimed, &c.DeliveryCount, &created, &finished); err != nil {
		return Command{}, err
	}
	c.Payload = payload
	c.ExpiresAt, c.ClaimedUntil, c.CreatedAt, c.FinishedAt = msTime(exp), msTime(claimed), msTime(created), msTime(finished)
	return c, nil
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func timeMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func (s *Store) insertCommand(ctx context.Context, tx *cachedTx, c *Command, now int64) error {
	if c.NodeID == "" || c.Operation == "" {
		return invalidf("command needs node_id and operation")
	}
	if err := checkJSON("command payload", c.Payload); err != nil {
		return err
	}
	if c.ID == "" {
		c.ID = "cmd-" + uuid.NewString()
	}
	existing, err := scanCommand(tx.QueryRowContext(ctx, "SELECT "+commandCols+" FROM commands WHERE command_id = ?", c.ID))
	if err == nil {
		if existing.NodeID != c.NodeID || existing.Operation != c.Operation || existing.JobID != c.JobID || existing.Generation != c.Generation {
			return fmt.Errorf("%w: command id %s already names another command", ErrConflict, c.ID)
		}
		*c = existing
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	c.State = CommandQueued
	c.CreatedAt = time.UnixMilli(now)
	_, err = tx.ExecContext(ctx, `INSERT INTO commands(command_id, node_id, operation, job_id, generation, assignment_id, intent_id,
		checkpoint_id, action_id, correlation_id, payload_json, state, expires_at_ms, created_at_ms, updated_at_ms)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		c.ID, c.NodeID, c.Operation, c.JobID, c.Generation, c.AssignmentID, c.IntentID, c.CheckpointID, c.ActionID,
		c.CorrelationID, nullBytes(c.Payload), c.State, timeMS(c.ExpiresAt), now, now)
	return err
}

// EnqueueCommand queues a command. An empty ID gets a UUID. Enqueueing an
// existing ID again is a no-op returning the stored command.
func (s *Store) EnqueueCommand(ctx context.Context, c Command) (Command, error) {
	err := s.write(ctx, func(tx *cachedTx) error { return s.insertCommand(ctx, tx, &c, s.nowMS()) })
	return c, err
}

// GetCommand returns a command or ErrNotFound.
func (s *Store) GetCommand(ctx context.Context, id string) (Command, error) {
	c, err := scanCommand(s.rq.QueryRowContext(ctx, "SELECT "+commandCols+" FROM commands WHERE command_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Command{}, ErrNotFound
	}
	return c, err
}

// ListCommands lists a job's commands at a generation (all generations if
// generation < 0), oldest first.
func (s *Store) ListCommands(ctx context.Context, jobID string, generation int64) ([]Command, error) {
	rows, err := s.rq.QueryContext(ctx, "SELECT "+commandCols+" FROM commands WHERE job_id = ? AND (? < 0 OR generation = ?) ORDER BY seq",
		jobID, generation, generation)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}

func collectCommands(rows *sql.Rows) ([]Command, error) {
	defer rows.Close()
	var out []Command
	for rows.Next() {
		c, err := scanCommand(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClaimCommands is an agent's poll: it claims up to limit commands of the
// node for lease and returns them, oldest first. Claimable are queued
// commands and delivered ones whose claim lapsed without an
// acknowledgement; nothing is removed, so a command lost on the way is
// delivered again. Commands past their deadline become timed_out instead.
func (s *Store) ClaimCommands(ctx context.Context, nodeID, token string, lease time.Duration, limit int) ([]Command, error) {
	if limit <= 0 {
		limit = 128
	}
	if lease <= 0 {
		return nil, invalidf("claim lease must be positive")
	}
	if idle, err := s.pollIdle(ctx, nodeID, token); err != nil || idle {
		return nil, err
	}
	var out []Command
	err := s.write(ctx, func(tx *cachedTx) error {
		epoch, err := authSession(ctx, tx, nodeID, token)
		if err != nil {
			return err
		}
		now := s.nowMS()
		if _, err := s.expireCommands(ctx, tx, nodeID, now); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+commandCols+` FROM commands WHERE node_id = ?
			AND (state = 'queued' OR (state = 'delivered' AND claimed_until_ms <= ?)) ORDER BY seq LIMIT ?`, nodeID, now, limit)
		if err != nil {
			return err
		}
		cmds, err := collectCommands(rows)
		if err != nil {
			return err
		}
		until := now + lease.Milliseconds()
		for i := range cmds {
			if _, err := tx.ExecContext(ctx, `UPDATE commands SET state = 'delivered', claimed_until_ms = ?, claim_epoch = ?,
				delivery_count = delivery_count + 1, delivered_at_ms = ?, updated_at_ms = ? WHERE command_id = ?`,
				until, epoch, now, now, cmds[i].ID); err != nil {
				return err
			}
			cmds[i].State, cmds[i].ClaimedUntil = CommandDelivered, time.UnixMilli(until)
			cmds[i].DeliveryCount++
		}
		out = cmds
		return nil
	})
	return out, err
}

// pollIdle is a poll's fast path: most polls find nothing to claim, and
// they need not wait for the single writer to learn that. One statement
// on the read pool (one snapshot, like the claim's transaction) checks
// the current session's token and whether the node has a command that
// the claim would deliver or expire; idle is true only if the token is
// the current one and there is none, and then the poll returns nothing,
// as the claim's transaction would have at that snapshot. Anything else
// (work, a bad or stale token, an error) goes the write path, which
// checks again and claims atomically under its lease.
func (s *Store) pollIdle(ctx context.Context, nodeID, token string) (idle bool, err error) {
	// err is always nil: the fast path only ever says "nothing to do".
	now := s.nowMS()
	var stored []byte
	var work bool
	err = s.rq.QueryRowContext(ctx, `SELECT session_token_hash, EXISTS(SELECT 1 FROM commands WHERE node_id = agents.node_id
			AND (state = 'queued' OR (state = 'delivered' AND claimed_until_ms <= ?)
				OR (state IN ('queued','delivered','acknowledged','running') AND expires_at_ms > 0 AND expires_at_ms <= ?)))
		FROM agents WHERE node_id = ?`, now, now, nodeID).Scan(&stored, &work)
	if err != nil {
		return false, nil // no such node (ErrUnauthorized) or a failed read: the write path answers
	}
	if subtle.ConstantTimeCompare(hashToken(token), stored) != 1 {
		return false, nil // unauthorized or stale: the write path says which
	}
	return !work, nil
}

// ExpireCommands ends every non-terminal command past its deadline as
// timed_out (class temporary_execution if it was never acknowledged,
// ambiguous if it was) and returns their ids.
func (s *Store) ExpireCommands(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.write(ctx, func(tx *cachedTx) (err error) {
		ids, err = s.expireCommands(ctx, tx, "", s.nowMS())
		return err
	})
	return ids, err
}

func (s *Store) expireCommands(ctx context.Context, tx *cachedTx, nodeID string, now int64) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT command_id, state FROM commands WHERE (? = '' OR node_id = ?)
		AND state IN ('queued','delivered','acknowledged','running') AND expires_at_ms > 0 AND expires_at_ms <= ? ORDER BY seq`, nodeID, nodeID, now)
	if err != nil {
		return nil, err
	}
	type exp struct {
		id    string
		state CommandState
	}
	var todo []exp
	for rows.Next() {
		var e exp
		if err := rows.Scan(&e.id, &e.state); err != nil {
			rows.Close()
			return nil, err
		}
		todo = append(todo, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(todo))
	for _, e := range todo {
		class := "temporary_execution"
		if e.state == CommandAcknowledged || e.state == CommandRunning {
			class = "ambiguous"
		}
		r := CommandResult{CommandID: e.id, State: CommandTimedOut, FailureClass: class, Error: "command deadline passed"}
		if err := s.insertResult(ctx, tx, r, now); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE commands SET state = 'timed_out', finished_at_ms = ?, updated_at_ms = ? WHERE command_id = ?", now, now, e.id); err != nil {
			return nil, err
		}
		ids = append(ids, e.id)
	}
	return ids, nil
}

func (s *Store) insertResult(ctx context.Context, tx *cachedTx, r CommandResult, now int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO command_results(command_id, n, state, progress, failure_class, error, observed_generation, details_json, received_at_ms)
		VALUES (?, (SELECT COALESCE(MAX(n),0)+1 FROM command_results WHERE command_id = ?), ?,?,?,?,?,?,?)`,
		r.CommandID, r.CommandID, r.State, r.Progress, r.FailureClass, r.Error, r.ObservedGeneration, nullBytes(r.Details), now)
	return err
}

const resultCols = `command_id, state, progress, failure_class, error, observed_generation, details_json, received_at_ms`

func scanResult(sc interface{ Scan(...any) error }) (CommandResult, error) {
	var r CommandResult
	var det []byte
	var at int64
	if err := sc.Scan(&r.CommandID, &r.State, &r.Progress, &r.FailureClass, &r.Error, &r.ObservedGeneration, &det, &at); err != nil {
		return CommandResult{}, err
	}
	r.Details, r.ReceivedAt = det, time.UnixMilli(at)
	return r, nil
}

func terminalResult(ctx context.Context, q queryer, id string) (*CommandResult, error) {
	r, err := scanResult(q.QueryRowContext(ctx, "SELECT "+resultCols+" FROM command_results WHERE command_id = ? ORDER BY n DESC LIMIT 1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RecordCommandResult stores an agent's result for one of its commands.
// Results are idempotent by command id: once the command is terminal,
// further results change nothing and return the stored terminal result
// (Duplicate). A non-terminal result (acknowledged, running) stops
// redelivery; a regression (running then acknowledged) is recorded but
// does not move the state back.
func (s *Store) RecordCommandResult(ctx context.Context, nodeID, token string, r CommandResult) (ResultOutcome, error) {
	if r.CommandID == "" {
		return ResultOutcome{}, invalidf("command_id must not be empty")
	}
	if r.State.rank() < CommandAcknowledged.rank() {
		return ResultOutcome{}, invalidf("result state %q is not a result", r.State)
	}
	if err := checkJSON("result details", r.Details); err != nil {
		return ResultOutcome{}, err
	}
	var out ResultOutcome
	err := s.write(ctx, func(tx *cachedTx) error {
		if _, err := authSession(ctx, tx, nodeID, token); err != nil {
			return err
		}
		c, err := scanCommand(tx.QueryRowContext(ctx, "SELECT "+commandCols+" FROM commands WHERE command_id = ?", r.CommandID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if c.NodeID != nodeID {
			return ErrWrongNode
		}
		if c.State.Terminal() {
			out.Command, out.Duplicate = c, true
			out.Terminal, err = terminalResult(ctx, tx, c.ID)
			return err
		}
		if r.Generation != 0 && r.Generation != c.Generation {
			return fmt.Errorf("%w: result for generation %d, command %s is at %d", ErrStaleGeneration, r.Generation, c.ID, c.Generation)
		}
		now := s.nowMS()
		if err := s.insertResult(ctx, tx, r, now); err != nil {
			return err
		}
		switch {
		case r.State.Terminal():
			_, err = tx.ExecContext(ctx, "UPDATE commands SET state = ?, finished_at_ms = ?, updated_at_ms = ?, acknowledged_at_ms = CASE WHEN acknowledged_at_ms = 0 THEN ? ELSE acknowledged_at_ms END WHERE command_id = ?",
				r.State, now, now, now, c.ID)
			c.State, c.FinishedAt = r.State, time.UnixMilli(now)
			rr := r
			rr.ReceivedAt = time.UnixMilli(now)
			out.Terminal = &rr
		case r.State.rank() > c.State.rank():
			_, err = tx.ExecContext(ctx, "UPDATE commands SET state = ?, updated_at_ms = ?, acknowledged_at_ms = CASE WHEN acknowledged_at_ms = 0 THEN ? ELSE acknowledged_at_ms END WHERE command_id = ?",
				r.State, now, now, c.ID)
			c.State = r.State
		}
		out.Command = c
		return err
	})
	return out, err
}

// CommandResults lists every result posted for a command, oldest first.
func (s *Store) CommandResults(ctx context.Context, commandID string) ([]CommandResult, error) {
	return queryAll(ctx, s.rq, scanResult, "SELECT "+resultCols+" FROM command_results WHERE command_id = ? ORDER BY n", commandID)
}
