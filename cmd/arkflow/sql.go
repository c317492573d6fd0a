package main

// The SQL connector (PostgreSQL through pgx, SQLite through
// modernc.org/sqlite) is pure Go: every build of the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/sql"
