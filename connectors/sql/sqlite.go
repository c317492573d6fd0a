package sql

// SQLite through database/sql and modernc.org/sqlite (pure Go: no cgo).

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

type sqliteConn struct {
	db *dbsql.DB
	// stmts caches prepared statements by text.
	stmts map[string]*dbsql.Stmt
}

// openSQLite opens an SQLite file with one connection (a sink or source
// subtask's writes and reads are serial anyway). The file must exist: a
// typo in the path is an error, not a new empty database.
func openSQLite(ctx context.Context, path string) (*sqliteConn, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sql: SQLite file %s: %w (the sql connector creates no database)", path, err)
	}
	db, err := dbsql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, fmt.Errorf("sql: opening SQLite file %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sql: opening SQLite file %s: %w", path, err)
	}
	return &sqliteConn{db: db, stmts: map[string]*dbsql.Stmt{}}, nil
}

func (s *sqliteConn) columns(ctx context.Context, table string) ([]column, error) {
	q := "PRAGMA table_info(" + table + ")"
	if i := strings.Index(table, `"."`); i >= 0 {
		// "schema"."table": the schema qualifies the pragma.
		q = "PRAGMA " + table[:i+1] + ".table_info(" + table[i+2:] + ")"
	}
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var (
			cid, notnull, pk int
			name, typ        string
			dflt             any
		)
		if err := rows.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
			return nil, err
		}
		out = append(out, column{name: name, typ: typ, kind: sqliteKind(typ)})
	}
	return out, rows.Err()
}

// sqliteKind is the kind of a declared SQLite column type, by SQLite's
// affinity rules, except that a type naming a date or time holds text.
func sqliteKind(typ string) kind {
	t := strings.ToUpper(typ)
	switch {
	case t == "":
		return kindAny
	case strings.Contains(t, "INT"):
		return kindNumber
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"),
		strings.Contains(t, "DATE"), strings.Contains(t, "TIME"):
		return kindText
	case strings.Contains(t, "BLOB"):
		return kindBinary
	}
	return kindNumber // REAL and NUMERIC affinity
}

func (s *sqliteConn) stmt(ctx context.Context, q string) (*dbsql.Stmt, error) {
	if st, ok := s.stmts[q]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.stmts[q] = st
	return st, nil
}

// prepare compiles the statement, which in SQLite includes finding an
// UPSERT's unique index.
func (s *sqliteConn) prepare(ctx context.Context, q string, _ int) error {
	_, err := s.stmt(ctx, q)
	return err
}

func (s *sqliteConn) execBatch(ctx context.Context, q string, rows [][]any) (int, error) {
	st, err := s.stmt(ctx, q)
	if err != nil {
		return -1, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return -1, err
	}
	txst := tx.StmtContext(ctx, st)
	for i, r := range rows {
		if _, err := txst.ExecContext(ctx, r...); err != nil {
			_ = tx.Rollback()
			if sqliteRetryable(err) {
				return -1, err
			}
			return i, err
		}
	}
	return -1, tx.Commit()
}

func (s *sqliteConn) query(ctx context.Context, q string, args []any, cols func([]string) error, row func([]any) error) error {
	st, err := s.stmt(ctx, q)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return err
	}
	if err := cols(names); err != nil {
		return err
	}
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if err := row(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (s *sqliteConn) broken() bool { return false }

func (s *sqliteConn) close() error {
	for _, st := range s.stmts {
		_ = st.Close()
	}
	return s.db.Close()
}

// sqliteRetryable reports whether an SQLite error may pass: the file is
// busy or a table locked by another connection.
func sqliteRetryable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
