package hubstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Desired job states.
const (
	DesiredRunning = "running"
	DesiredStopped = "stopped"
)

// Job is a job's desired state.
type Job struct {
	JobID          string
	DesiredState   string
	Generation     int64
	CurrentVersion string
	ActionID       string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	UpdatedBy      string
	CorrelationID  string
}

// JobVersion is an immutable, content-addressed job version.
type JobVersion struct {
	JobID     string
	VersionID string // SpecDigest of the spec
	Number    int64  // 1, 2, ... per job (ArkFlow v1's JobVersion)
	Spec      json.RawMessage
	Plan      json.RawMessage
	Digest    string
	CreatedAt time.Time
	CreatedBy string
}

// Assignment places one task (placement unit) of a job generation on a node.
type Assignment struct {
	JobID        string
	Generation   int64
	AssignmentID string
	NodeID       string
	VersionID    string
	Payload      json.RawMessage
}

// SubmitRequest submits a job version.
type SubmitRequest struct {
	JobID          string
	Spec           json.RawMessage
	Plan           json.RawMessage
	Actor          string
	CorrelationID  string
	IdempotencyKey string
}

// SubmitResult is the outcome of SubmitJob.
type SubmitResult struct {
	Job        Job
	Version    JobVersion
	NewVersion bool // false: the same spec was submitted before
	NewJob     bool
}

const jobCols = "job_id, desired_state, generation, current_version, action_id, created_at_ms, updated_at_ms, updated_by, correlation_id"

func scanJob(sc interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var created, updated int64
	if err := sc.Scan(&j.JobID, &j.DesiredState, &j.Generation, &j.CurrentVersion, &j.ActionID, &created, &updated, &j.UpdatedBy, &j.CorrelationID); err != nil {
		return Job{}, err
	}
	j.CreatedAt, j.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return j, nil
}

func getJob(ctx context.Context, q queryer, jobID string) (Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE job_id = ?", jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNotFound
	}
	return j, err
}

// GetJob returns a job or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, jobID string) (Job, error) {
	return getJob(ctx, s.rq, jobID)
}

// ListJobs returns every job ordered by id.
func (s *Store) ListJobs(ctx context.Context) ([]Job, error) {
	return queryAll(ctx, s.rq, scanJob, "SELECT "+jobCols+" FROM jobs ORDER BY job_id")
}

const versionCols = "job_id, version_id, number, spec_json, plan_json, digest, created_at_ms, created_by"

func scanVersion(sc interface{ Scan(...any) error }) (JobVersion, error) {
	var v JobVersion
	var spec, plan []byte
	var at int64
	if err := sc.Scan(&v.JobID, &v.VersionID, &v.Number, &spec, &plan, &v.Digest, &at, &v.CreatedBy); err != nil {
		return JobVersion{}, err
	}
	v.Spec, v.Plan, v.CreatedAt = spec, plan, time.UnixMilli(at)
	return v, nil
}

// GetVersion returns one version of a job or ErrNotFound.
func (s *Store) GetVersion(ctx context.Context, jobID, versionID string) (JobVersion, error) {
	v, err := scanVersion(s.rq.QueryRowContext(ctx, "SELECT "+versionCols+" FROM job_versions WHERE job_id = ? AND version_id = ?", jobID, versionID))
	if errors.Is(err, sql.ErrNoRows) {
		return JobVersion{}, ErrNotFound
	}
	return v, err
}

// ListVersions returns a job's versions, oldest first.
func (s *Store) ListVersions(ctx context.Context, jobID string) ([]JobVersion, error) {
	return queryAll(ctx, s.rq, scanVersion, "SELECT "+versionCols+" FROM job_versions WHERE job_id = ? ORDER BY number", jobID)
}

// SubmitJob stores a job version. Versions are immutable and content
// addressed: submitting the same spec again returns the existing version.
// A new job is created stopped at generation 1 with this version current;
// for an existing job the version is only added (it becomes current through
// SetDesired with VersionID: upgrade or rollback).
func (s *Store) SubmitJob(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	if req.JobID == "" {
		return SubmitResult{}, invalidf("job_id must not be empty")
	}
	digest, spec, err := SpecDigest(req.Spec)
	if err != nil {
		return SubmitResult{}, err
	}
	plan := []byte(req.Plan)
	if len(plan) == 0 {
		plan = []byte("null")
	}
	if !json.Valid(plan) {
		return SubmitResult{}, invalidf("plan is not JSON")
	}
	hash, err := requestHash(struct {
		Job, Digest string
		Plan        []byte
	}{req.JobID, digest, plan})
	if err != nil {
		return SubmitResult{}, err
	}
	var out SubmitResult
	err = s.write(ctx, func(tx *cachedTx) error {
		if found, err := idemLookup(ctx, tx, "submit:"+req.JobID, req.Actor, req.IdempotencyKey, hash, &out); found || err != nil {
			return err
		}
		now := s.nowMS()
		_, err := getJob(ctx, tx, req.JobID)
		switch {
		case errors.Is(err, ErrNotFound):
			out.NewJob = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO jobs(job_id, desired_state, generation, current_version, created_at_ms, updated_at_ms, updated_by, correlation_id)
				VALUES (?, 'stopped', 1, ?, ?, ?, ?, ?)`, req.JobID, digest, now, now, req.Actor, req.CorrelationID); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		v, err := scanVersion(tx.QueryRowContext(ctx, "SELECT "+versionCols+" FROM job_versions WHERE job_id = ? AND version_id = ?", req.JobID, digest))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out.NewVersion = true
			var n int64
			if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(number),0)+1 FROM job_versions WHERE job_id = ?", req.JobID).Scan(&n); err != nil {
				return err
			}
			v = JobVersion{JobID: req.JobID, VersionID: digest, Number: n, Spec: spec, Plan: plan, Digest: digest, CreatedAt: time.UnixMilli(now), CreatedBy: req.Actor}
			if _, err := tx.ExecContext(ctx, "INSERT INTO job_versions("+versionCols+") VALUES (?,?,?,?,?,?,?,?)",
				v.JobID, v.VersionID, v.Number, []byte(v.Spec), []byte(v.Plan), v.Digest, now, v.CreatedBy); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		out.Version = v
		if out.Job, err = getJob(ctx, tx, req.JobID); err != nil {
			return err
		}
		if err := s.audit(ctx, tx, AuditRecord{Actor: req.Actor, Action: "job.submit", ResourceType: "job", ResourceID: req.JobID,
			Outcome: "accepted", Message: fmt.Sprintf("version %d %s", v.Number, v.VersionID), CorrelationID: req.CorrelationID}); err != nil {
			return err
		}
		return idemSave(ctx, tx, "submit:"+req.JobID, req.Actor, req.IdempotencyKey, hash, out, now)
	})
	return out, err
}

// DesiredChange changes a job's desired state under a generation CAS.
type DesiredChange struct {
	JobID        string
	DesiredState string // running | stopped
	// VersionID makes another stored version current (upgrade, rollback);
	// "" keeps the current one.
	VersionID string
	// Kind is the intent kind: "set_state" (default), "upgrade",
	// "rollback", "restart".
	Kind     string
	ActionID string
	// ExpectedGeneration is the If-Match generation; nil skips the check.
	ExpectedGeneration *int64
	// Assignments place the new generation's tasks. Their JobID,
	// Generation and VersionID are filled in by the store.
	Assignments    []Assignment
	Payload        json.RawMessage
	Actor          string
	CorrelationID  string
	IdempotencyKey string
}

// DesiredResult is the accepted intent.
type DesiredResult struct {
	JobID        string
	IntentID     string
	Generation   int64
	DesiredState string
	VersionID    string
	ActionID     string
	// Replayed: an earlier request with the same Idempotency-Key produced
	// this result; nothing was written now.
	Replayed bool
}

// SetDesired records a desired-state change as one transaction:
// Idempotency-Key check (same key and request: the first result again;
// same key, other request: ErrIdempotencyKeyReused), generation CAS
// (*GenerationConflictError), generation+1, the new generation's
// assignments, a new intent (older open intents superseded, undelivered
// commands of older generations superseded), an outbox row for the
// reconciler and an audit row. When it returns nil the intent is durable.
func (s *Store) SetDesired(ctx context.Context, ch DesiredChange) (DesiredResult, error) {
	if err := checkDesired(ch); err != nil {
		return DesiredResult{}, err
	}
	if ch.Kind == "" {
		ch.Kind = "set_state"
	}
	// The hash identifies the client's request: the assignments are the
	// Hub's placement, which may differ when the request is replayed.
	hashed := ch
	hashed.CorrelationID, hashed.IdempotencyKey, hashed.Actor, hashed.Assignments = "", "", "", nil
	hash, err := requestHash(hashed)
	if err != nil {
		return DesiredResult{}, err
	}
	scope := "desired:" + ch.JobID
	var out DesiredResult
	err = s.write(ctx, func(tx *cachedTx) error {
		if found, err := idemLookup(ctx, tx, scope, ch.Actor, ch.IdempotencyKey, hash, &out); found || err != nil {
			out.Replayed = found
			return err
		}
		j, err := getJob(ctx, tx, ch.JobID)
		if err != nil {
			return err
		}
		if ch.ExpectedGeneration != nil && *ch.ExpectedGeneration != j.Generation {
			return &GenerationConflictError{Resource: "job/" + ch.JobID, Expected: *ch.ExpectedGeneration, Current: j.Generation}
		}
		version := j.CurrentVersion
		if ch.VersionID != "" {
			if err := versionExists(ctx, tx, ch.JobID, ch.VersionID); err != nil {
				return err
			}
			version = ch.VersionID
		}
		now := s.nowMS()
		gen := j.Generation + 1
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET desired_state = ?, generation = ?, current_version = ?, action_id = ?, updated_at_ms = ?,
			updated_by = ?, correlation_id = ? WHERE job_id = ? AND generation = ?`,
			ch.DesiredState, gen, version, ch.ActionID, now, ch.Actor, ch.CorrelationID, ch.JobID, j.Generation)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return &GenerationConflictError{Resource: "job/" + ch.JobID, Expected: j.Generation, Current: -1}
		}
		for _, a := range ch.Assignments {
			if _, err := tx.ExecContext(ctx, `INSERT INTO assignments(job_id, generation, assignment_id, node_id, version_id, payload_json, created_at_ms)
				VALUES (?,?,?,?,?,?,?)`, ch.JobID, gen, a.AssignmentID, a.NodeID, version, nullBytes(a.Payload), now); err != nil {
				return err
			}
		}
		intentID := "intent-" + uuid.NewString()
		if err := supersedeOlder(ctx, tx, ch.JobID, intentID, gen, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO intents(intent_id, job_id, generation, kind, desired_state, version_id, action_id, payload_json,
			state, convergence, actor, correlation_id, created_at_ms, updated_at_ms) VALUES (?,?,?,?,?,?,?,?,'accepted','pending',?,?,?,?)`,
			intentID, ch.JobID, gen, ch.Kind, ch.DesiredState, version, ch.ActionID, nullBytes(ch.Payload), ch.Actor, ch.CorrelationID, now, now); err != nil {
			return err
		}
		if err := insertOutbox(ctx, tx, OutboxEntry{EventKey: fmt.Sprintf("reconcile:%s:%d", intentID, gen), EventType: "reconcile_intent",
			JobID: ch.JobID, IntentID: intentID}, now); err != nil {
			return err
		}
		out = DesiredResult{JobID: ch.JobID, IntentID: intentID, Generation: gen, DesiredState: ch.DesiredState, VersionID: version, ActionID: ch.ActionID}
		if err := s.audit(ctx, tx, AuditRecord{Actor: ch.Actor, Action: "job." + ch.Kind, ResourceType: "job", ResourceID: ch.JobID, Outcome: "accepted",
			Message: fmt.Sprintf("desired %s generation %d", ch.DesiredState, gen), CorrelationID: ch.CorrelationID}); err != nil {
			return err
		}
		return idemSave(ctx, tx, scope, ch.Actor, ch.IdempotencyKey, hash, out, now)
	})
	return out, err
}

// checkDesired checks a desired-state change before anything is read: a
// known state, and assignments with ids and nodes, each id once.
func checkDesired(ch DesiredChange) error {
	if ch.DesiredState != DesiredRunning && ch.DesiredState != DesiredStopped {
		return invalidf("state must be running or stopped")
	}
	seen := map[string]bool{}
	for _, a := range ch.Assignments {
		if a.AssignmentID == "" || a.NodeID == "" {
			return invalidf("assignment needs assignment_id and node_id")
		}
		if seen[a.AssignmentID] {
			return invalidf("duplicate assignment %q", a.AssignmentID)
		}
		seen[a.AssignmentID] = true
	}
	return nil
}

// versionExists returns ErrNotFound (wrapped) unless the job has the
// version.
func versionExists(ctx context.Context, tx *cachedTx, jobID, versionID string) error {
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1 FROM job_versions WHERE job_id = ? AND version_id = ?", jobID, versionID).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: version %s of job %s", ErrNotFound, versionID, jobID)
		}
		return err
	}
	return nil
}

// supersedeOlder marks, in a desired-state change's transaction, the job's
// open intents superseded by intentID and its undelivered commands of
// generations before gen superseded (with a result saying so).
func supersedeOlder(ctx context.Context, tx *cachedTx, jobID, intentID string, gen, now int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE intents SET state = 'superseded', superseded_by = ?, updated_at_ms = ?
		WHERE job_id = ? AND state IN ('accepted','converging','retrying')`, intentID, now, jobID); err != nil {
		return err
	}
	// Queued and delivered commands have no result yet (a result moves
	// them to acknowledged or further), so theirs is result number 1.
	if _, err := tx.ExecContext(ctx, `INSERT INTO command_results(command_id, n, state, failure_class, error, received_at_ms)
		SELECT command_id, 1, 'superseded', 'stale_generation', ?, ? FROM commands
		WHERE job_id = ? AND generation < ? AND state IN ('queued','delivered')`,
		fmt.Sprintf("superseded by generation %d", gen), now, jobID, gen); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE commands SET state = 'superseded', finished_at_ms = ?, updated_at_ms = ?
		WHERE job_id = ? AND generation < ? AND state IN ('queued','delivered')`, now, now, jobID, gen)
	return err
}

// Assignments lists a job generation's assignments by assignment id.
func (s *Store) Assignments(ctx context.Context, jobID string, generation int64) ([]Assignment, error) {
	return listAssignments(ctx, s.rq, jobID, generation)
}

func listAssignments(ctx context.Context, q queryer, jobID string, generation int64) ([]Assignment, error) {
	rows, err := q.QueryContext(ctx, `SELECT job_id, generation, assignment_id, node_id, version_id, payload_json FROM assignments
		WHERE job_id = ? AND generation = ? ORDER BY assignment_id`, jobID, generation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Assignment
	for rows.Next() {
		var a Assignment
		var p []byte
		if err := rows.Scan(&a.JobID, &a.Generation, &a.AssignmentID, &a.NodeID, &a.VersionID, &p); err != nil {
			return nil, err
		}
		a.Payload = p
		out = append(out, a)
	}
	return out, rows.Err()
}

// idemLookup finds a stored response for (scope, principal, key). The key
// is scoped by principal: two principals never share a key.
func idemLookup(ctx context.Context, tx *cachedTx, scope, principal, key, hash string, out any) (bool, error) {
	if key == "" {
		return false, nil
	}
	var storedHash string
	var resp []byte
	err := tx.QueryRowContext(ctx, "SELECT request_hash, response_json FROM idempotency_keys WHERE scope = ? AND principal = ? AND key = ?",
		scope, principal, key).Scan(&storedHash, &resp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if storedHash != hash {
		return false, ErrIdempotencyKeyReused
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return false, fmt.Errorf("hubstore: stored idempotent response: %w", err)
	}
	return true, nil
}

func idemSave(ctx context.Context, tx *cachedTx, scope, principal, key, hash string, resp any, now int64) error {
	if key == "" {
		return nil
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO idempotency_keys(scope, principal, key, request_hash, response_json, created_at_ms) VALUES (?,?,?,?,?,?)",
		scope, principal, key, hash, b, now)
	return err
}
