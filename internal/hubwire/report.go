package hubwire

// Report ordering (B.4, R-HUB-4).
//
// ArkFlow v1 orders reports by (boot_id, report_seq) alone: a report with
// the stored boot_id and report_seq <= the stored one is dropped, a new
// boot_id is accepted and resets the sequence, and a report without a
// boot_id is always accepted. That rule has two flaws. The Rust Agent
// restarts report_seq at 1 on every session but keeps its boot_id, so after
// a reconnect its reports are dropped until the sequence passes the old
// maximum; and a boot change alone cannot tell a restarted process from a
// late report of a dead one.
//
// We add the session to the cursor. A registration starts a new session
// and resets the node's cursor to NewSessionCursor(session): an empty
// boot_id and sequence 0, so the session's first report is accepted
// whatever its sequence (0 as R-HUB-4 prescribes, 1 as the Rust Agent
// sends, or a process-wide counter). Within the session the v1 rule
// applies, except that the boot id cannot change: a session token lives in
// one process's memory, so a second boot id within a session is refused as
// ReportBootChanged rather than taken as a restart. A report of any other
// session is rejected as ReportOldSession
// and changes nothing, so a late report of an old session, or of a
// process that was killed and restarted, never rolls back the new
// session's snapshot. The Hub normally refuses such a report earlier, with
// 401, because registering replaced the session token; the session check
// here closes the race where the token was checked before a concurrent
// registration committed. Callers must run CheckReport and store the
// returned cursor in the same transaction as the snapshot.
//
// ReportNewBoot only says that the sequence starts over; whether the
// process really restarted (the v1 boot fence, which fails the node's
// pending job_start operations) is decided by comparing the boot id with
// the node's previous one, which the Hub keeps outside the cursor.
//
// The same cursor orders job observations and per-stream snapshots.

// ReportCursor is what the Hub stores per node (and per stream) to order
// reports.
type ReportCursor struct {
	// Session identifies the registration the cursor belongs to, e.g. a
	// session id or a hash of the session token; never the token itself.
	Session string
	// BootID and Seq are those of the last accepted report that had a
	// boot id; BootID is empty until the session's first such report.
	BootID string
	Seq    uint64
}

// NewSessionCursor is the cursor a registration stores: nothing seen yet
// in session.
func NewSessionCursor(session string) ReportCursor {
	return ReportCursor{Session: session}
}

// ReportVerdict is the outcome of CheckReport.
type ReportVerdict int

// Verdicts. ReportStale, ReportOldSession and ReportBootChanged are not
// fresh: the Hub ignores the report and, for a stale replay, still answers
// 204 as v1 does.
const (
	// ReportStale: same session and boot, report_seq <= the stored one.
	ReportStale ReportVerdict = iota
	// ReportOldSession: the report belongs to a session other than the
	// cursor's, i.e. one replaced by a later registration.
	ReportOldSession
	// ReportBootChanged: same session, but a boot id other than the one
	// the session's earlier reports carried.
	ReportBootChanged
	// ReportInOrder: same session and boot, a higher report_seq.
	ReportInOrder
	// ReportNewBoot: the session's first report that has a boot id; the
	// sequence starts there.
	ReportNewBoot
	// ReportUnordered: the report has no boot id (a v1 [main] Agent); it is
	// accepted and leaves the cursor unchanged.
	ReportUnordered
)

// Fresh reports whether the Hub should apply a report with verdict v.
func (v ReportVerdict) Fresh() bool {
	return v == ReportInOrder || v == ReportNewBoot || v == ReportUnordered
}

func (v ReportVerdict) String() string {
	switch v {
	case ReportStale:
		return "stale"
	case ReportOldSession:
		return "old_session"
	case ReportBootChanged:
		return "boot_changed"
	case ReportInOrder:
		return "in_order"
	case ReportNewBoot:
		return "new_boot"
	case ReportUnordered:
		return "unordered"
	}
	return "unknown"
}

// CheckReport decides whether a report of session, carrying bootID and
// seq, is fresh against the stored cursor, and returns the cursor to store
// if it is (stored itself if it is not).
func CheckReport(stored ReportCursor, session, bootID string, seq uint64) (ReportVerdict, ReportCursor) {
	switch {
	case session != stored.Session:
		return ReportOldSession, stored
	case bootID == "":
		return ReportUnordered, stored
	case stored.BootID == "":
		return ReportNewBoot, ReportCursor{Session: session, BootID: bootID, Seq: seq}
	case bootID != stored.BootID:
		return ReportBootChanged, stored
	case seq <= stored.Seq:
		return ReportStale, stored
	default:
		return ReportInOrder, ReportCursor{Session: session, BootID: bootID, Seq: seq}
	}
}
