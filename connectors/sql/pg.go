package sql

// PostgreSQL through pgx's own interface (not database/sql): a batch of
// statements goes to the server in one round trip, as one implicit
// transaction.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type pgConn struct{ c *pgx.Conn }

// dialPG connects to a postgres DB. The connection string is parsed here,
// not at validation: parsing reads the certificate files it names.
func dialPG(ctx context.Context, d DB) (*pgConn, error) {
	cs, err := pgConnString(d)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(cs)
	if err != nil {
		return nil, fmt.Errorf("sql: the connection string: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sql: connecting to PostgreSQL at %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	return &pgConn{c: c}, nil
}

// columnsSQL lists a table's columns with their types and pg_type's
// category of each (N numeric, S string, B boolean, D date/time, U
// user-defined, …).
const columnsSQL = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typname, t.typcategory
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

func (p *pgConn) columns(ctx context.Context, table string) ([]column, error) {
	rows, err := p.c.Query(ctx, columnsSQL, table)
	if err != nil {
		return nil, err
	}
	var out []column
	for rows.Next() {
		var name, typ, typname, category string
		if err := rows.Scan(&name, &typ, &typname, &category); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, column{name: name, typ: typ, kind: pgKind(typname, category)})
	}
	return out, rows.Err()
}

// pgKind is the kind of a PostgreSQL type.
func pgKind(typname, category string) kind {
	switch {
	case typname == "bytea":
		return kindBinary
	case typname == "timestamp", typname == "timestamptz", typname == "date":
		return kindTime
	}
	switch category {
	case "N":
		return kindNumber
	case "S", "E":
		return kindText
	case "U":
		// json, jsonb, uuid, xml and other types read from text.
		return kindText
	case "B":
		return kindBool
	}
	return kindOther
}

// prepare plans the statement with EXPLAIN (which runs nothing), with
// every parameter NULL: PostgreSQL finds an UPSERT's unique index when it
// plans, not when it parses.
func (p *pgConn) prepare(ctx context.Context, stmt string, params int) error {
	_, err := p.c.Exec(ctx, "EXPLAIN "+stmt, make([]any, params)...)
	return err
}

func (p *pgConn) execBatch(ctx context.Context, stmt string, rows [][]any) (int, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(rows))}
	for _, r := range rows {
		b.Queue(stmt, r...)
	}
	br := p.c.SendBatch(ctx, b)
	for i := range rows {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				return i, err
			}
			return -1, err
		}
	}
	// Close reads the end of the batch: the implicit transaction
	// commits there.
	return -1, br.Close()
}

func (p *pgConn) query(ctx context.Context, q string, args []any, cols func([]string) error, row func([]any) error) error {
	rows, err := p.c.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	// The columns are checked before the first row, or after the last
	// when there is none and no error: a query that failed (pgx reports
	// it at Next) has no columns to check.
	checked := false
	check := func() error {
		checked = true
		fds := rows.FieldDescriptions()
		names := make([]string, len(fds))
		for i, fd := range fds {
			names[i] = fd.Name
		}
		return cols(names)
	}
	for rows.Next() {
		if !checked {
			if err := check(); err != nil {
				return err
			}
		}
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		if err := row(vals); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil || checked {
		return err
	}
	return check()
}

func (p *pgConn) broken() bool { return p.c.IsClosed() }

func (p *pgConn) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return p.c.Close(ctx)
}

// pgRetryable reports whether a PostgreSQL error may pass: SQLSTATE
// 40001 (serialization failure), 40P01 (deadlock), 55P03 (lock not
// available), class 08 (connection exception), 57P01–57P03 (the server
// shuts down or starts), 53300 (too many connections), and connections
// lost or refused. A certificate the client rejects never passes.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	var (
		unknownCA   x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalidCert x509.CertificateInvalidError
		verify      *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalidCert) || errors.As(err, &verify) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// isNoConflictTarget reports whether err says that the keys of an UPSERT
// match no primary key or unique index of the table.
func isNoConflictTarget(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P10"
	}
	return err != nil && strings.Contains(err.Error(), "ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint")
}
