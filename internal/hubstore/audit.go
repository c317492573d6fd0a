package hubstore

import (
	"context"
	"time"
)

// AuditRecord is one audit log row.
type AuditRecord struct {
	ID            int64
	Actor         string
	Action        string
	ResourceType  string
	ResourceID    string
	Outcome       string // accepted | rejected
	FailureCode   string
	Message       string // cut to 256 bytes
	CorrelationID string
	At            time.Time // set by the store
}

func (s *Store) audit(ctx context.Context, tx *cachedTx, a AuditRecord) error {
	if len(a.Message) > 256 {
		a.Message = a.Message[:256]
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_log(actor, action, resource_type, resource_id, outcome, failure_code, message, correlation_id, occurred_at_ms)
		VALUES (?,?,?,?,?,?,?,?,?)`, a.Actor, a.Action, a.ResourceType, a.ResourceID, a.Outcome, a.FailureCode, a.Message, a.CorrelationID, s.nowMS())
	return err
}

// Audit appends a row to the audit log (e.g. a denied request).
func (s *Store) Audit(ctx context.Context, a AuditRecord) error {
	if a.Outcome == "" {
		a.Outcome = "accepted"
	}
	return s.write(ctx, func(tx *cachedTx) error { return s.audit(ctx, tx, a) })
}

// ListAudit returns up to limit audit rows, newest first, for one resource
// id ("" for all).
func (s *Store) ListAudit(ctx context.Context, resourceID string, limit int) ([]AuditRecord, error) {
	if limit <= 0 {
		limit = 100
	}
	out, _, err := s.AuditPage(ctx, resourceID, 0, limit)
	return out, err
}

// AuditPage returns the audit rows of one resource id ("" for all), newest
// first, skipping offset and returning at most limit, and how many rows
// match in all.
func (s *Store) AuditPage(ctx context.Context, resourceID string, offset, limit int) ([]AuditRecord, int64, error) {
	var total int64
	if err := s.rq.QueryRowContext(ctx, `SELECT count(*) FROM audit_log WHERE (? = '' OR resource_id = ?)`, resourceID, resourceID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.rq.QueryContext(ctx, `SELECT audit_id, actor, action, resource_type, resource_id, outcome, failure_code, message, correlation_id, occurred_at_ms
		FROM audit_log WHERE (? = '' OR resource_id = ?) ORDER BY audit_id DESC LIMIT ? OFFSET ?`, resourceID, resourceID, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var a AuditRecord
		var at int64
		if err := rows.Scan(&a.ID, &a.Actor, &a.Action, &a.ResourceType, &a.ResourceID, &a.Outcome, &a.FailureCode, &a.Message, &a.CorrelationID, &at); err != nil {
			return nil, 0, err
		}
		a.At = time.UnixMilli(at)
		out = append(out, a)
	}
	return out, total, rows.Err()
}
