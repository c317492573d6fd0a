package hubstore

// migrations are applied in order, each in its own transaction, and
// recorded in schema_version. Never edit a released migration: append one.
// Times are Unix epoch milliseconds; 0 means "not set".
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE agents (
	node_id             TEXT PRIMARY KEY,
	protocol_version    TEXT NOT NULL DEFAULT '',
	software_version    TEXT NOT NULL DEFAULT '',
	capabilities_json   TEXT NOT NULL DEFAULT '{}',
	boot_id             TEXT NOT NULL,
	session_epoch       INTEGER NOT NULL,
	session_token_hash  BLOB NOT NULL,
	state               TEXT NOT NULL DEFAULT 'online',
	maintenance_state   TEXT NOT NULL DEFAULT 'active',
	lease_expires_at_ms INTEGER NOT NULL,
	last_seen_at_ms     INTEGER NOT NULL,
	report_boot_id      TEXT NOT NULL DEFAULT '',
	last_report_seq     INTEGER NOT NULL DEFAULT -1,
	last_report_json    BLOB,
	last_report_at_ms   INTEGER NOT NULL DEFAULT 0,
	created_at_ms       INTEGER NOT NULL,
	updated_at_ms       INTEGER NOT NULL
);

-- Every registration opens a session; only the newest (agents.session_epoch)
-- is current. Older rows let the Hub tell "late request of an old session"
-- (rejected, never applied) from "wrong token". Only token hashes are kept.
CREATE TABLE agent_sessions (
	node_id       TEXT NOT NULL REFERENCES agents(node_id),
	epoch         INTEGER NOT NULL,
	token_hash    BLOB NOT NULL UNIQUE,
	boot_id       TEXT NOT NULL,
	created_at_ms INTEGER NOT NULL,
	ended_at_ms   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (node_id, epoch)
);

CREATE TABLE jobs (
	job_id          TEXT PRIMARY KEY,
	desired_state   TEXT NOT NULL CHECK (desired_state IN ('running','stopped')),
	generation      INTEGER NOT NULL,
	current_version TEXT NOT NULL,
	action_id       TEXT NOT NULL DEFAULT '',
	created_at_ms   INTEGER NOT NULL,
	updated_at_ms   INTEGER NOT NULL,
	updated_by      TEXT NOT NULL DEFAULT '',
	correlation_id  TEXT NOT NULL DEFAULT ''
);

-- Immutable and content-addressed: version_id is the digest of the
-- canonical spec; number is the per-job sequence ArkFlow v1 shows.
CREATE TABLE job_versions (
	job_id        TEXT NOT NULL REFERENCES jobs(job_id),
	version_id    TEXT NOT NULL,
	number        INTEGER NOT NULL,
	spec_json     BLOB NOT NULL,
	plan_json     BLOB NOT NULL,
	digest        TEXT NOT NULL,
	created_at_ms INTEGER NOT NULL,
	created_by    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (job_id, version_id),
	UNIQUE (job_id, number)
);

CREATE TABLE assignments (
	job_id        TEXT NOT NULL REFERENCES jobs(job_id),
	generation    INTEGER NOT NULL,
	assignment_id TEXT NOT NULL,
	node_id       TEXT NOT NULL,
	version_id    TEXT NOT NULL,
	payload_json  BLOB,
	created_at_ms INTEGER NOT NULL,
	PRIMARY KEY (job_id, generation, assignment_id)
);
CREATE INDEX assignments_node ON assignments(node_id, job_id, generation);

CREATE TABLE intents (
	intent_id          TEXT PRIMARY KEY,
	job_id             TEXT NOT NULL REFERENCES jobs(job_id),
	generation         INTEGER NOT NULL,
	kind               TEXT NOT NULL,
	desired_state      TEXT NOT NULL,
	version_id         TEXT NOT NULL,
	action_id          TEXT NOT NULL DEFAULT '',
	payload_json       BLOB,
	state              TEXT NOT NULL,
	convergence        TEXT NOT NULL,
	retry_count        INTEGER NOT NULL DEFAULT 0,
	superseded_by      TEXT NOT NULL DEFAULT '',
	last_failure_class TEXT NOT NULL DEFAULT '',
	last_error         TEXT NOT NULL DEFAULT '',
	actor              TEXT NOT NULL DEFAULT '',
	correlation_id     TEXT NOT NULL DEFAULT '',
	created_at_ms      INTEGER NOT NULL,
	updated_at_ms      INTEGER NOT NULL,
	converged_at_ms    INTEGER NOT NULL DEFAULT 0,
	UNIQUE (job_id, generation)
);
CREATE INDEX intents_state ON intents(state);

CREATE TABLE outbox (
	outbox_id        INTEGER PRIMARY KEY AUTOINCREMENT,
	event_key        TEXT NOT NULL UNIQUE,
	event_type       TEXT NOT NULL,
	job_id           TEXT NOT NULL DEFAULT '',
	intent_id        TEXT NOT NULL DEFAULT '',
	payload_json     BLOB,
	available_at_ms  INTEGER NOT NULL,
	claimed_by       TEXT NOT NULL DEFAULT '',
	claimed_until_ms INTEGER NOT NULL DEFAULT 0,
	claim_count      INTEGER NOT NULL DEFAULT 0,
	processed_at_ms  INTEGER NOT NULL DEFAULT 0,
	created_at_ms    INTEGER NOT NULL
);
CREATE INDEX outbox_pending ON outbox(processed_at_ms, available_at_ms, outbox_id);

CREATE TABLE commands (
	seq                INTEGER PRIMARY KEY AUTOINCREMENT,
	command_id         TEXT NOT NULL UNIQUE,
	node_id            TEXT NOT NULL,
	operation          TEXT NOT NULL,
	job_id             TEXT NOT NULL DEFAULT '',
	generation         INTEGER NOT NULL DEFAULT 0,
	assignment_id      TEXT NOT NULL DEFAULT '',
	intent_id          TEXT NOT NULL DEFAULT '',
	checkpoint_id      TEXT NOT NULL DEFAULT '',
	action_id          TEXT NOT NULL DEFAULT '',
	correlation_id     TEXT NOT NULL DEFAULT '',
	payload_json       BLOB,
	state              TEXT NOT NULL,
	expires_at_ms      INTEGER NOT NULL DEFAULT 0,
	claimed_until_ms   INTEGER NOT NULL DEFAULT 0,
	claim_epoch        INTEGER NOT NULL DEFAULT 0,
	delivery_count     INTEGER NOT NULL DEFAULT 0,
	created_at_ms      INTEGER NOT NULL,
	delivered_at_ms    INTEGER NOT NULL DEFAULT 0,
	acknowledged_at_ms INTEGER NOT NULL DEFAULT 0,
	finished_at_ms     INTEGER NOT NULL DEFAULT 0,
	updated_at_ms      INTEGER NOT NULL
);
CREATE INDEX commands_node ON commands(node_id, state, seq);
CREATE INDEX commands_job ON commands(job_id, generation, operation);

-- Every result an Agent posted (progress and terminal); the terminal one is
-- the answer to every later duplicate.
CREATE TABLE command_results (
	command_id          TEXT NOT NULL REFERENCES commands(command_id),
	n                   INTEGER NOT NULL,
	state               TEXT NOT NULL,
	progress            INTEGER NOT NULL DEFAULT 0,
	failure_class       TEXT NOT NULL DEFAULT '',
	error               TEXT NOT NULL DEFAULT '',
	observed_generation INTEGER NOT NULL DEFAULT 0,
	details_json        BLOB,
	received_at_ms      INTEGER NOT NULL,
	PRIMARY KEY (command_id, n)
);

CREATE TABLE job_observations (
	job_id         TEXT NOT NULL,
	node_id        TEXT NOT NULL,
	generation     INTEGER NOT NULL,
	state          TEXT NOT NULL,
	error          TEXT NOT NULL DEFAULT '',
	boot_id        TEXT NOT NULL DEFAULT '',
	session_epoch  INTEGER NOT NULL DEFAULT 0,
	report_seq     INTEGER NOT NULL DEFAULT -1,
	snapshot_json  BLOB,
	observed_at_ms INTEGER NOT NULL,
	PRIMARY KEY (job_id, node_id)
);

CREATE TABLE checkpoints (
	job_id         TEXT NOT NULL REFERENCES jobs(job_id),
	checkpoint_id  TEXT NOT NULL,
	kind           TEXT NOT NULL CHECK (kind IN ('checkpoint','savepoint')),
	generation     INTEGER NOT NULL,
	version_id     TEXT NOT NULL,
	status         TEXT NOT NULL CHECK (status IN ('pending','completed','failed')),
	manifest_uri   TEXT NOT NULL DEFAULT '',
	format_version INTEGER NOT NULL,
	error          TEXT NOT NULL DEFAULT '',
	created_at_ms  INTEGER NOT NULL,
	updated_at_ms  INTEGER NOT NULL,
	PRIMARY KEY (job_id, checkpoint_id)
);

CREATE TABLE idempotency_keys (
	scope         TEXT NOT NULL,
	principal     TEXT NOT NULL,
	key           TEXT NOT NULL,
	request_hash  TEXT NOT NULL,
	response_json BLOB NOT NULL,
	created_at_ms INTEGER NOT NULL,
	PRIMARY KEY (scope, principal, key)
);

CREATE TABLE audit_log (
	audit_id       INTEGER PRIMARY KEY AUTOINCREMENT,
	actor          TEXT NOT NULL,
	action         TEXT NOT NULL,
	resource_type  TEXT NOT NULL DEFAULT '',
	resource_id    TEXT NOT NULL DEFAULT '',
	outcome        TEXT NOT NULL,
	failure_code   TEXT NOT NULL DEFAULT '',
	message        TEXT NOT NULL DEFAULT '',
	correlation_id TEXT NOT NULL DEFAULT '',
	occurred_at_ms INTEGER NOT NULL
);
CREATE INDEX audit_resource ON audit_log(resource_id, audit_id);
`,
}
