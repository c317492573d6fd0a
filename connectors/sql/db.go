package sql

// This file holds what the input and output need of a database, and the
// retries around it. Each has two implementations: PostgreSQL through
// pgx's own interface (pg.go) and SQLite through database/sql and
// modernc.org/sqlite (sqlite.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// conn is one connection to a database. Its methods are called from one
// goroutine at a time.
type conn interface {
	// columns returns the columns of a table (quoted as quoteTable does
	// it), in order; none when the table does not exist.
	columns(ctx context.Context, table string) ([]column, error)
	// prepare checks a statement of the given number of parameters, to
	// find its mistakes before any row.
	prepare(ctx context.Context, stmt string, params int) error
	// execBatch runs stmt once per row, all in one transaction, which is
	// committed only when every row went in. On an error it returns the
	// index of the row at fault, or -1 when no row is (the transaction
	// itself failed).
	execBatch(ctx context.Context, stmt string, rows [][]any) (int, error)
	// query runs q and calls row with the values of every result row, in
	// order; cols gets the result's column names first.
	query(ctx context.Context, q string, args []any, cols func([]string) error, row func([]any) error) error
	// broken reports whether the connection is lost (a retry must dial
	// again).
	broken() bool
	close() error
}

// dial opens a connection to d.
func dial(ctx context.Context, d DB) (conn, error) {
	switch d.Type {
	case Postgres:
		return dialPG(ctx, d)
	case SQLite:
		return openSQLite(ctx, d.Path)
	}
	return nil, fmt.Errorf("sql: unknown database type %q", d.Type)
}

// retryable reports whether an error of a database of type dbType may pass
// when the same work is done again: a serialization failure, a deadlock,
// a lost or refused connection, a busy SQLite file.
func retryable(dbType string, err error) bool {
	if dbType == SQLite {
		return sqliteRetryable(err)
	}
	return pgRetryable(err)
}

// Backoff between attempts.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// retrier runs work on a connection it dials (again) as needed, trying
// again after errors that may pass.
type retrier struct {
	db         DB
	maxRetries int
	log        *slog.Logger
	what       string // "write", "query": for the log
	c          conn
	retries    atomic.Int64
	// backoff is the wait before attempt n (1-based) after a failure;
	// tests shorten it.
	backoff func(n int) time.Duration
}

func defaultBackoff(n int) time.Duration {
	d := firstBackoff << min(n-1, 10)
	return min(d, maxBackoff)
}

// conn returns the open connection, dialling one when there is none.
func (r *retrier) conn(ctx context.Context) (conn, error) {
	if r.c != nil && r.c.broken() {
		_ = r.c.close()
		r.c = nil
	}
	if r.c == nil {
		c, err := dial(ctx, r.db)
		if err != nil {
			return nil, err
		}
		r.c = c
	}
	return r.c, nil
}

// do runs work until it succeeds, fails with an error that cannot pass,
// has failed maxRetries+1 times, or ctx ends.
func (r *retrier) do(ctx context.Context, work func(c conn) error) error {
	for attempt := 1; ; attempt++ {
		c, err := r.conn(ctx)
		if err == nil {
			err = work(c)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		if !retryable(r.db.Type, err) || attempt > r.maxRetries {
			if attempt > 1 {
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		r.retries.Add(1)
		wait := r.backoff(attempt)
		r.log.Warn("sql: "+r.what+" failed; trying again", "attempt", attempt, "of", r.maxRetries+1, "wait", wait, "err", err)
		if r.c != nil && r.c.broken() {
			_ = r.c.close()
			r.c = nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

func (r *retrier) close() error {
	if r.c == nil {
		return nil
	}
	err := r.c.close()
	r.c = nil
	return err
}
