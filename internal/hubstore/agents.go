package hubstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Capabilities an Agent declares; the Hub places tasks only on Agents
// whose capabilities fit.
type Capabilities struct {
	// JobRuntimeVersion is the version of the job runtime the Agent embeds.
	JobRuntimeVersion string `json:"job_runtime_version,omitempty"`
	// StateBackends the Agent can run (e.g. "badger", "memory").
	StateBackends []string `json:"state_backends,omitempty"`
	// CheckpointProtocol is the checkpoint protocol version it speaks.
	CheckpointProtocol int `json:"checkpoint_protocol,omitempty"`
	// Features are ArkFlow v1 capability strings ("stream_lifecycle", ...).
	Features []string `json:"features,omitempty"`
	// Connectors ("input:T", "output:T") and Operators ("job/op" bound to
	// Go values) the Agent's process has, so placement survives a Hub
	// restart without waiting for a heartbeat.
	Connectors []string `json:"connectors,omitempty"`
	Operators  []string `json:"operators,omitempty"`
}

// Registration is what an Agent sends to register.
type Registration struct {
	NodeID          string
	BootID          string // random per process; may be empty for a v1 agent (it comes with reports)
	ProtocolVersion string
	SoftwareVersion string
	Capabilities    Capabilities
}

// Session is the result of a registration.
type Session struct {
	NodeID string
	// Token is the session token: 128 random bits, hex. It is returned
	// only here; the store keeps its SHA-256.
	Token        string
	Epoch        int64
	BootID       string
	LeaseExpires time.Time
	// NewBoot is true when the boot id differs from the previous session's.
	NewBoot bool
	// FencedCommands are the commands an earlier boot had acknowledged but
	// not finished; they are now terminal node_unavailable (retryable).
	FencedCommands []string
}

// Agent is a stored agent.
type Agent struct {
	NodeID           string
	ProtocolVersion  string
	SoftwareVersion  string
	Capabilities     Capabilities
	BootID           string
	SessionEpoch     int64
	State            string // as last reported; see Online
	MaintenanceState string
	LeaseExpires     time.Time
	LastSeen         time.Time
	ReportBootID     string
	LastReportSeq    int64 // -1 before the session's first report
	LastReport       json.RawMessage
	CreatedAt        time.Time
}

// Online reports whether the Agent's lease is still valid at now.
func (a Agent) Online(now time.Time) bool { return now.Before(a.LeaseExpires) }

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// RegisterAgent opens a new session for the node: a fresh random token,
// the report sequence restarted, the lease renewed. Every older
// session of the node ends, so its late requests are rejected with
// ErrStaleSession. Commands delivered to an older session but never
// acknowledged become claimable at once; if the boot id changed, commands
// the old process had acknowledged are fenced (FencedCommands).
func (s *Store) RegisterAgent(ctx context.Context, reg Registration) (Session, error) {
	if reg.NodeID == "" {
		return Session{}, invalidf("node_id must not be empty")
	}
	caps, err := json.Marshal(reg.Capabilities)
	if err != nil {
		return Session{}, err
	}
	token, err := newToken()
	if err != nil {
		return Session{}, fmt.Errorf("hubstore: session token: %w", err)
	}
	hash := hashToken(token)
	var out Session
	err = s.write(ctx, func(tx *cachedTx) error {
		now := s.nowMS()
		lease := now + s.opts.LeaseTTL.Milliseconds()
		var epoch int64
		var oldBoot string
		err := tx.QueryRowContext(ctx, "SELECT session_epoch, boot_id FROM agents WHERE node_id = ?", reg.NodeID).Scan(&epoch, &oldBoot)
		existed := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		boot := reg.BootID
		if boot == "" {
			boot = oldBoot
		}
		epoch++
		if existed {
			if _, err := tx.ExecContext(ctx, "UPDATE agent_sessions SET ended_at_ms = ? WHERE node_id = ? AND ended_at_ms = 0", now, reg.NodeID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE agents SET protocol_version=?, software_version=?, capabilities_json=?,
				boot_id=?, session_epoch=?, session_token_hash=?, state='online', lease_expires_at_ms=?, last_seen_at_ms=?,
				report_boot_id=?, last_report_seq=-1, updated_at_ms=? WHERE node_id=?`,
				reg.ProtocolVersion, reg.SoftwareVersion, string(caps), boot, epoch, hash, lease, now, boot, now, reg.NodeID); err != nil {
				return err
			}
		} else {
			if _, err := tx.ExecContext(ctx, `INSERT INTO agents(node_id, protocol_version, software_version, capabilities_json,
				boot_id, session_epoch, session_token_hash, state, lease_expires_at_ms, last_seen_at_ms, report_boot_id,
				last_report_seq, created_at_ms, updated_at_ms) VALUES (?,?,?,?,?,?,?,'online',?,?,?,-1,?,?)`,
				reg.NodeID, reg.ProtocolVersion, reg.SoftwareVersion, string(caps), boot, epoch, hash, lease, now, boot, now, now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO agent_sessions(node_id, epoch, token_hash, boot_id, created_at_ms) VALUES (?,?,?,?,?)",
			reg.NodeID, epoch, hash, boot, now); err != nil {
			return err
		}
		// Delivered but unacknowledged commands of the old session: the new
		// session gets them on its first poll.
		if _, err := tx.ExecContext(ctx, "UPDATE commands SET claimed_until_ms = 0, updated_at_ms = ? WHERE node_id = ? AND state = 'delivered'", now, reg.NodeID); err != nil {
			return err
		}
		out = Session{NodeID: reg.NodeID, Token: token, Epoch: epoch, BootID: boot, LeaseExpires: time.UnixMilli(lease)}
		if existed && reg.BootID != "" && oldBoot != "" && reg.BootID != oldBoot {
			out.NewBoot = true
			out.FencedCommands, err = s.fenceBoot(ctx, tx, reg.NodeID, now)
			if err != nil {
				return err
			}
		}
		return s.audit(ctx, tx, AuditRecord{Actor: "node:" + reg.NodeID, Action: "agent.register", ResourceType: "node", ResourceID: reg.NodeID, Outcome: "accepted"})
	})
	return out, err
}

// fenceBoot ends the commands a previous process of the node had
// acknowledged: that process is gone, so they will never finish.
func (s *Store) fenceBoot(ctx context.Context, tx *cachedTx, nodeID string, now int64) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT command_id FROM commands WHERE node_id = ? AND state IN ('acknowledged','running') ORDER BY seq", nodeID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		r := CommandResult{CommandID: id, State: CommandNodeUnavailable, FailureClass: "node_unavailable", Error: "agent restarted with a new boot id"}
		if err := s.insertResult(ctx, tx, r, now); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE commands SET state = ?, finished_at_ms = ?, updated_at_ms = ? WHERE command_id = ?", CommandNodeUnavailable, now, now, id); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// authSession checks the node's session token in constant time against
// the current session. A token of an ended session gives ErrStaleSession.
func authSession(ctx context.Context, q queryer, nodeID, token string) (epoch int64, err error) {
	var stored []byte
	err = q.QueryRowContext(ctx, "SELECT session_epoch, session_token_hash FROM agents WHERE node_id = ?", nodeID).Scan(&epoch, &stored)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrUnauthorized
	}
	if err != nil {
		return 0, err
	}
	h := hashToken(token)
	if subtle.ConstantTimeCompare(h, stored) == 1 {
		return epoch, nil
	}
	var one int
	err = q.QueryRowContext(ctx, "SELECT 1 FROM agent_sessions WHERE node_id = ? AND token_hash = ?", nodeID, h).Scan(&one)
	if err == nil {
		return 0, ErrStaleSession
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrUnauthorized
	}
	return 0, err
}

// Authenticate checks a node's session token without writing anything.
func (s *Store) Authenticate(ctx context.Context, nodeID, token string) (epoch int64, err error) {
	return authSession(ctx, s.rq, nodeID, token)
}

// Heartbeat is what a heartbeat updates besides the lease.
type Heartbeat struct {
	State           string        // agent state; "" keeps the stored one
	SoftwareVersion string        // "" keeps the stored one
	Capabilities    *Capabilities // nil keeps the stored ones
}

// Heartbeat renews the node's lease (now + LeaseTTL).
func (s *Store) Heartbeat(ctx context.Context, nodeID, token string, hb Heartbeat) (leaseExpires time.Time, err error) {
	var caps []byte
	if hb.Capabilities != nil {
		if caps, err = json.Marshal(hb.Capabilities); err != nil {
			return time.Time{}, err
		}
	}
	// Grouped: many Agents' heartbeats share one commit (group.go).
	err = s.writeGrouped(ctx, func(tx *cachedTx) error {
		if _, err := authSession(ctx, tx, nodeID, token); err != nil {
			return err
		}
		now := s.nowMS()
		lease := now + s.opts.LeaseTTL.Milliseconds()
		leaseExpires = time.UnixMilli(lease)
		_, err := tx.ExecContext(ctx, `UPDATE agents SET lease_expires_at_ms = ?, last_seen_at_ms = ?, updated_at_ms = ?,
			state = CASE WHEN ? = '' THEN state ELSE ? END,
			software_version = CASE WHEN ? = '' THEN software_version ELSE ? END,
			capabilities_json = CASE WHEN ? IS NULL THEN capabilities_json ELSE ? END
			WHERE node_id = ?`,
			lease, now, now, hb.State, hb.State, hb.SoftwareVersion, hb.SoftwareVersion, nullBytes(caps), nullBytes(caps), nodeID)
		return err
	})
	return leaseExpires, err
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Report is one agent report (ArkFlow's NodeReport).
type Report struct {
	NodeID       string
	SessionToken string
	BootID       string // "" means the session's current boot
	Seq          int64
	Snapshot     json.RawMessage // the report as received, kept for the detail views
	Jobs         []JobObservation
}

// JobObservation is what a node observes of one job.
type JobObservation struct {
	JobID      string
	Generation int64
	State      string
	Error      string
	Snapshot   json.RawMessage
}

// ReportOutcome says what RecordReport did.
type ReportOutcome struct {
	// Accepted is false for a duplicate or older report of the current
	// session and boot (v1 answers 204 anyway); nothing was written.
	Accepted bool
	// NewBoot: the report named a boot id other than the session's; its
	// sequence started afresh and the old boot's commands were fenced.
	NewBoot        bool
	FencedCommands []string
	// IgnoredJobs are observations at a generation other than the job's
	// current one, or of unknown jobs.
	IgnoredJobs []string
}

// RecordReport applies a report if it is fresh: it must come
// from the node's current session (a late report of an older session is
// ErrStaleSession and changes nothing), and within the session either name
// a new boot id or carry a sequence number above the last accepted one. A
// new session restarts the sequence, so an agent that resets report_seq
// on reconnect (ArkFlow's pitfall) is not dropped.
func (s *Store) RecordReport(ctx context.Context, rep Report) (ReportOutcome, error) {
	if err := checkJSON("report", rep.Snapshot); err != nil {
		return ReportOutcome{}, err
	}
	for _, o := range rep.Jobs {
		if err := checkJSON("job observation", o.Snapshot); err != nil {
			return ReportOutcome{}, err
		}
	}
	var out ReportOutcome
	// Grouped: many Agents' reports share one commit (group.go); the
	// function may run again, so it starts out afresh.
	err := s.writeGrouped(ctx, func(tx *cachedTx) error {
		out = ReportOutcome{}
		epoch, err := authSession(ctx, tx, rep.NodeID, rep.SessionToken)
		if err != nil {
			return err
		}
		var boot, reportBoot string
		var lastSeq int64
		if err := tx.QueryRowContext(ctx, "SELECT boot_id, report_boot_id, last_report_seq FROM agents WHERE node_id = ?", rep.NodeID).
			Scan(&boot, &reportBoot, &lastSeq); err != nil {
			return err
		}
		repBoot := rep.BootID
		if repBoot == "" {
			repBoot = reportBoot
		}
		now := s.nowMS()
		if repBoot == reportBoot && rep.Seq <= lastSeq {
			return nil // duplicate or reordered: keep the newer state
		}
		out.Accepted = true
		if boot != "" && repBoot != boot {
			out.NewBoot = true
			if out.FencedCommands, err = s.fenceBoot(ctx, tx, rep.NodeID, now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET boot_id = ?, report_boot_id = ?, last_report_seq = ?, last_report_json = ?,
			last_report_at_ms = ?, last_seen_at_ms = ?, updated_at_ms = ? WHERE node_id = ?`,
			repBoot, repBoot, rep.Seq, nullBytes(rep.Snapshot), now, now, now, rep.NodeID); err != nil {
			return err
		}
		for _, o := range rep.Jobs {
			ok, err := s.putObservation(ctx, tx, rep.NodeID, repBoot, epoch, rep.Seq, o, now)
			if err != nil {
				return err
			}
			if !ok {
				out.IgnoredJobs = append(out.IgnoredJobs, o.JobID)
			}
		}
		return nil
	})
	return out, err
}

// RecordJobObservation stores an unsequenced job observation (v1
// /agent/job-observations). It must come from the current session and
// name the job's current generation (else ErrStaleGeneration), and it
// never replaces an observation written by a newer session.
func (s *Store) RecordJobObservation(ctx context.Context, nodeID, token string, o JobObservation) error {
	if err := checkJSON("job observation", o.Snapshot); err != nil {
		return err
	}
	return s.write(ctx, func(tx *cachedTx) error {
		epoch, err := authSession(ctx, tx, nodeID, token)
		if err != nil {
			return err
		}
		var boot string
		var seq int64
		if err := tx.QueryRowContext(ctx, "SELECT report_boot_id, last_report_seq FROM agents WHERE node_id = ?", nodeID).Scan(&boot, &seq); err != nil {
			return err
		}
		ok, err := s.putObservation(ctx, tx, nodeID, boot, epoch, seq, o, s.nowMS())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: job %q generation %d", ErrStaleGeneration, o.JobID, o.Generation)
		}
		return nil
	})
}

func (s *Store) putObservation(ctx context.Context, tx *cachedTx, nodeID, boot string, epoch, seq int64, o JobObservation, now int64) (bool, error) {
	var gen int64
	err := tx.QueryRowContext(ctx, "SELECT generation FROM jobs WHERE job_id = ?", o.JobID).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if o.Generation != gen {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO job_observations(job_id, node_id, generation, state, error, boot_id, session_epoch, report_seq, snapshot_json, observed_at_ms)
		VALUES (?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(job_id, node_id) DO UPDATE SET generation=excluded.generation, state=excluded.state, error=excluded.error,
			boot_id=excluded.boot_id, session_epoch=excluded.session_epoch, report_seq=excluded.report_seq,
			snapshot_json=excluded.snapshot_json, observed_at_ms=excluded.observed_at_ms
		WHERE excluded.session_epoch >= job_observations.session_epoch AND excluded.generation >= job_observations.generation`,
		o.JobID, nodeID, o.Generation, o.State, o.Error, boot, epoch, seq, nullBytes(o.Snapshot), now)
	return err == nil, err
}

// StoredObservation is a job observation as stored.
type StoredObservation struct {
	JobObservation
	NodeID       string
	BootID       string
	SessionEpoch int64
	ReportSeq    int64
	ObservedAt   time.Time
}

// JobObservations lists the per-node observations of a job.
func (s *Store) JobObservations(ctx context.Context, jobID string) ([]StoredObservation, error) {
	rows, err := s.rq.QueryContext(ctx, `SELECT job_id, node_id, generation, state, error, boot_id, session_epoch, report_seq, snapshot_json, observed_at_ms
		FROM job_observations WHERE job_id = ? ORDER BY node_id`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StoredObservation
	for rows.Next() {
		var o StoredObservation
		var snap []byte
		var at int64
		if err := rows.Scan(&o.JobID, &o.NodeID, &o.Generation, &o.State, &o.Error, &o.BootID, &o.SessionEpoch, &o.ReportSeq, &snap, &at); err != nil {
			return nil, err
		}
		o.Snapshot, o.ObservedAt = snap, time.UnixMilli(at)
		out = append(out, o)
	}
	return out, rows.Err()
}

const agentCols = `node_id, protocol_version, software_version, capabilities_json, boot_id, session_epoch, state, maintenance_state,
	lease_expires_at_ms, last_seen_at_ms, report_boot_id, last_report_seq, last_report_json, created_at_ms`

func scanAgent(sc interface{ Scan(...any) error }) (Agent, error) {
	var a Agent
	var caps string
	var rep []byte
	var lease, seen, created int64
	if err := sc.Scan(&a.NodeID, &a.ProtocolVersion, &a.SoftwareVersion, &caps, &a.BootID, &a.SessionEpoch, &a.State, &a.MaintenanceState,
		&lease, &seen, &a.ReportBootID, &a.LastReportSeq, &rep, &created); err != nil {
		return Agent{}, err
	}
	if err := json.Unmarshal([]byte(caps), &a.Capabilities); err != nil {
		return Agent{}, fmt.Errorf("hubstore: agent %s capabilities: %w", a.NodeID, err)
	}
	a.LastReport = rep
	a.LeaseExpires, a.LastSeen, a.CreatedAt = time.UnixMilli(lease), time.UnixMilli(seen), time.UnixMilli(created)
	return a, nil
}

// GetAgent returns one agent or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, nodeID string) (Agent, error) {
	a, err := scanAgent(s.rq.QueryRowContext(ctx, "SELECT "+agentCols+" FROM agents WHERE node_id = ?", nodeID))
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, ErrNotFound
	}
	return a, err
}

// ListAgents returns every agent ordered by node id.
func (s *Store) ListAgents(ctx context.Context) ([]Agent, error) {
	return queryAll(ctx, s.rq, scanAgent, "SELECT "+agentCols+" FROM agents ORDER BY node_id")
}
