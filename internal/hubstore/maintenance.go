package hubstore

import (
	"context"
	"time"
)

// Agent maintenance states.
const (
	MaintenanceActive   = "active"
	MaintenanceDraining = "draining"
	Maintenance         = "maintenance"
)

// SetMaintenance sets an agent's maintenance state and audits it.
func (s *Store) SetMaintenance(ctx context.Context, nodeID, state, actor, correlationID string) (Agent, error) {
	switch state {
	case MaintenanceActive, MaintenanceDraining, Maintenance:
	default:
		return Agent{}, invalidf("maintenance state %q", state)
	}
	err := s.write(ctx, func(tx *cachedTx) error {
		now := s.nowMS()
		res, err := tx.ExecContext(ctx, "UPDATE agents SET maintenance_state = ?, updated_at_ms = ? WHERE node_id = ?", state, now, nodeID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		return s.audit(ctx, tx, AuditRecord{Actor: actor, Action: "node.maintenance", ResourceType: "node", ResourceID: nodeID,
			Outcome: "accepted", Message: state, CorrelationID: correlationID})
	})
	if err != nil {
		return Agent{}, err
	}
	return s.GetAgent(ctx, nodeID)
}

// ListNodeCommands lists up to limit of a node's commands, newest first;
// only non-terminal ones if open.
func (s *Store) ListNodeCommands(ctx context.Context, nodeID string, open bool, limit int) ([]Command, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rq.QueryContext(ctx, "SELECT "+commandCols+` FROM commands WHERE node_id = ?
		AND (? = 0 OR state IN ('queued','delivered','acknowledged','running')) ORDER BY seq DESC LIMIT ?`, nodeID, open, limit)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}

// Pruned counts what Prune deleted.
type Pruned struct {
	Outbox, Commands, IdempotencyKeys, Sessions int64
}

// Prune deletes records finished before before: processed outbox entries,
// terminal commands with their results (a result posted for them later
// gets ErrNotFound instead of the stored answer), idempotency keys and
// ended agent sessions (a late request of such a session gets
// ErrUnauthorized instead of ErrStaleSession). Open work, jobs, versions,
// assignments, intents, checkpoints and the audit log are kept.
func (s *Store) Prune(ctx context.Context, before time.Time) (Pruned, error) {
	var p Pruned
	ms := before.UnixMilli()
	err := s.write(ctx, func(tx *cachedTx) error {
		exec := func(dst *int64, q string) error {
			res, err := tx.ExecContext(ctx, q, ms)
			if err != nil {
				return err
			}
			*dst, _ = res.RowsAffected()
			return nil
		}
		if err := exec(&p.Outbox, "DELETE FROM outbox WHERE processed_at_ms > 0 AND processed_at_ms < ?"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM command_results WHERE command_id IN
			(SELECT command_id FROM commands WHERE finished_at_ms > 0 AND finished_at_ms < ?)`, ms); err != nil {
			return err
		}
		if err := exec(&p.Commands, "DELETE FROM commands WHERE finished_at_ms > 0 AND finished_at_ms < ?"); err != nil {
			return err
		}
		if err := exec(&p.IdempotencyKeys, "DELETE FROM idempotency_keys WHERE created_at_ms < ?"); err != nil {
			return err
		}
		return exec(&p.Sessions, "DELETE FROM agent_sessions WHERE ended_at_ms > 0 AND ended_at_ms < ?")
	})
	return p, err
}
