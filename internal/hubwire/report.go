package hubwire

// Report ordering (B.4).
//
// ArkFlow v1 orders reports by (boot_id, report_seq) alone: a report with
// the stored boot_id and report_seq <= the stored one is dropped, a new
// boot_id is accepted and resets the sequence, and a report without a
// boot_id is always accepted. That rule has two flaws. The Rust Agent
// restarts report_seq at 1 on every session but keeps its boot_id, so after
// a reconnect its reports are dropped until the sequence passes the old
// maximum; and "a different boot_id resets" lets a late report of a dead
// process, whose boot_id differs from its successor's, roll the snapshot
// back.
//
// We order by (session, boot_id, report_seq). The session is the node's
// registration epoch: the Hub numbers a node's registrations 1, 2, 3...
// and knows a report's epoch from the session token that authenticated it.
//
//   - A report of an older session than the stored one is rejected
//     (ReportOldSession), whatever its boot id and sequence. A late report
//     of a replaced session, or of a process that was killed and restarted,
//     therefore never rolls back the new session's snapshot. (The Hub
//     normally refuses it earlier, with 401, because registering replaced
//     the token; this check closes the race where the token was checked
//     before a concurrent registration committed.)
//   - The first report of a newer session is accepted and starts the
//     sequence (ReportSessionStart), whatever its value: 0 as our
//     requirements prescribe, 1 as the Rust Agent sends, or a
//     process-wide counter.
//   - Within a session v1's rule applies, except that the boot id cannot
//     change: a session token lives in one process's memory, so a second
//     boot id within a session is refused (ReportBootChanged) rather than
//     taken as a restart. A report without a boot id is accepted and does
//     not move the sequence (ReportUnordered).
//
// Because newer sessions win by comparison, no reset is needed at
// registration, and the same cursor can be kept per node, per stream and
// per (job, node) and updated lazily. Callers must run CheckReport and
// store the returned cursor in the same transaction as the snapshot.
//
// Whether the process really restarted (v1's boot fence, which fails the
// node's pending job_start operations) is a comparison of the boot id with
// the node's previous one, not a verdict of CheckReport.

// ReportCursor is what the Hub stores to order reports.
type ReportCursor struct {
	// Session is the registration epoch of the last accepted report; 0
	// before any.
	Session uint64
	// BootID and Seq are those of the last accepted report of Session that
	// had a boot id; BootID is empty until there is one.
	BootID string
	Seq    uint64
}

// ReportVerdict is the outcome of CheckReport.
type ReportVerdict int

// Verdicts. ReportStale, ReportOldSession and ReportBootChanged are not
// fresh: the Hub ignores the report and, for a stale replay, still answers
// 204 as v1 does.
const (
	// ReportStale: same session and boot, report_seq <= the stored one.
	ReportStale ReportVerdict = iota
	// ReportOldSession: the report belongs to an older session than the
	// stored one.
	ReportOldSession
	// ReportBootChanged: same session, but a boot id other than the one
	// the session's earlier reports carried.
	ReportBootChanged
	// ReportInOrder: same session and boot, a higher report_seq.
	ReportInOrder
	// ReportSessionStart: the first report of a newer session, or the
	// session's first report that has a boot id; the sequence starts there.
	ReportSessionStart
	// ReportUnordered: the report has no boot id (a v1 [main] Agent); it is
	// accepted and leaves the sequence unchanged.
	ReportUnordered
)

// Fresh reports whether the Hub should apply a report with verdict v.
func (v ReportVerdict) Fresh() bool {
	return v == ReportInOrder || v == ReportSessionStart || v == ReportUnordered
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
	case ReportSessionStart:
		return "session_start"
	case ReportUnordered:
		return "unordered"
	}
	return "unknown"
}

// CheckReport decides whether a report of registration epoch session,
// carrying bootID and seq, is fresh against the stored cursor, and returns
// the cursor to store (stored itself when the report is not fresh).
func CheckReport(stored ReportCursor, session uint64, bootID string, seq uint64) (ReportVerdict, ReportCursor) {
	switch {
	case session < stored.Session:
		return ReportOldSession, stored
	case session > stored.Session:
		if bootID == "" {
			return ReportUnordered, ReportCursor{Session: session}
		}
		return ReportSessionStart, ReportCursor{Session: session, BootID: bootID, Seq: seq}
	case bootID == "":
		return ReportUnordered, stored
	case stored.BootID == "":
		return ReportSessionStart, ReportCursor{Session: session, BootID: bootID, Seq: seq}
	case bootID != stored.BootID:
		return ReportBootChanged, stored
	case seq <= stored.Seq:
		return ReportStale, stored
	default:
		return ReportInOrder, ReportCursor{Session: session, BootID: bootID, Seq: seq}
	}
}
