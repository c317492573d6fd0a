// Package hubstore is the Hub's durable store: agents and their sessions,
// jobs, immutable content-addressed job versions, assignments per job
// generation, intents and the reconciler outbox, per-agent commands and
// their results, job observations, checkpoint and savepoint records,
// idempotency keys and the audit log, in one SQLite file
// (modernc.org/sqlite, no cgo).
//
// One writer: every mutation is one BEGIN IMMEDIATE transaction on a
// single connection, serialised by a mutex, so writes never race each
// other or see SQLITE_BUSY from this process; an flock on <file>.lock
// keeps a second process off the file. Heartbeats and reports of
// concurrent Agents share a transaction and its commit (group commit,
// each in its own savepoint, group.go). Reads use a separate query-only
// pool and see the last committed state (WAL); a poll with nothing to
// claim is answered there. Statements are prepared once per connection
// (stmtcache.go), and WAL checkpoints run beside the writer, not inside
// a commit (checkpoint.go). Schema changes are numbered migrations, each
// in its own transaction, recorded in schema_version.
//
// Guarantees:
//   - Nothing acknowledged lives only in memory. A method returns nil only
//     after the transaction holding its write committed with
//     synchronous=FULL, so intents,
//     outbox entries, commands, results and sessions survive a Hub crash,
//     restart or power loss.
//   - Work is claimed, never popped: outbox entries and commands are
//     claimed for a lease and become claimable again when the lease ends
//     without completion (outbox) or acknowledgement (command).
//   - Command results are idempotent by command id: after a terminal
//     result, a repeat changes nothing and returns the stored result.
//   - Desired-state changes are generation CAS writes with Idempotency-Key
//     replay; a new generation supersedes older intents and undelivered
//     commands, and stale-generation results and observations are refused.
//   - Session tokens are 128 random bits; only their SHA-256 is stored.
//     Every registration starts a session whose report sequence restarts;
//     reports are accepted only from the current session with a higher
//     sequence (or a new boot id), so a late report of an old session
//     never rolls back a newer one.
//   - A checkpoint is completed only with a succeeded result for every
//     expected assignment.
//
// Time comes from Options.Clock, so leases are tested without sleeping.
// Errors are sentinels (ErrNotFound, ErrStaleSession, ...) and
// *GenerationConflictError, for the HTTP layer to map with errors.Is.
package hubstore
