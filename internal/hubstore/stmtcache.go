package hubstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Prepared statements. Without them the driver
// parses every statement again on every call: a fifth of the Hub's CPU
// under 1,000 Agents went to SQLite's parser. Every SQL text of the store
// is a constant, so a statement is prepared once per database handle and
// reused; database/sql prepares it again, lazily, on each pooled
// connection it runs on, and a write transaction borrows the writer's
// copy with Tx.StmtContext (no new parse on the one writer connection).

// maxCachedStmts bounds a cache: the store has fewer distinct statements,
// so past it a text is only run unprepared (as before), never leaked.
const maxCachedStmts = 512

// A cache never prepares while its caller holds a connection: preparing
// on a *sql.DB takes a connection of its own, and the writer has only
// one (held by the transaction), so that would wait forever; the read
// pool could run dry the same way. A text missing inside a transaction
// runs unprepared once and is remembered; prepareMissed prepares it after
// the transaction ends.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	missed map[string]struct{}
	closed bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: make(map[string]*sql.Stmt), missed: make(map[string]struct{})}
}

// lookup returns the statement for q, or nil after noting q as missed.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st
	}
	if !c.closed && len(c.m)+len(c.missed) < maxCachedStmts {
		c.missed[q] = struct{}{}
	}
	return nil
}

// get returns the statement for q, preparing it now if needed; the caller
// must hold no connection of c.db. nil if q cannot be prepared (the caller
// then runs q unprepared and gets the error from there).
func (c *stmtCache) get(q string) *sql.Stmt {
	if st := c.lookup(q); st != nil {
		return st
	}
	c.prepareMissed()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// prepareMissed prepares the texts looked up but not found. The caller
// must hold no connection of c.db.
func (c *stmtCache) prepareMissed() {
	c.mu.Lock()
	if len(c.missed) == 0 {
		c.mu.Unlock()
		return
	}
	todo := make([]string, 0, len(c.missed))
	for q := range c.missed {
		todo = append(todo, q)
	}
	clear(c.missed)
	c.mu.Unlock()
	for _, q := range todo {
		// Not a request's context: the statement outlives the request.
		st, err := c.db.PrepareContext(context.Background(), q)
		if err != nil {
			continue // run unprepared; its error shows there
		}
		c.mu.Lock()
		if _, dup := c.m[q]; dup || c.closed {
			c.mu.Unlock()
			st.Close()
			continue
		}
		c.m[q] = st
		c.mu.Unlock()
	}
}

// close closes every statement; later lookups find none.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.m {
		errs = append(errs, st.Close())
	}
	clear(c.m)
	clear(c.missed)
	c.closed = true
	return errors.Join(errs...)
}

// cachedDB runs statements on the read pool through its cache.
type cachedDB struct {
	db *sql.DB
	c  *stmtCache
}

func (d cachedDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := d.c.get(q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return d.db.QueryContext(ctx, q, args...)
}

func (d cachedDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := d.c.get(q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.db.QueryRowContext(ctx, q, args...)
}

func (d cachedDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := d.c.get(q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return d.db.ExecContext(ctx, q, args...)
}

// cachedTx is a transaction whose statements come from its database's cache.
// Inside a write it is the only handle on the writer connection.
type cachedTx struct {
	tx  *sql.Tx
	c   *stmtCache
	ctx context.Context
	// local holds the statements already bound to this transaction.
	local map[*sql.Stmt]*sql.Stmt
}

func newTx(ctx context.Context, tx *sql.Tx, c *stmtCache) *cachedTx {
	return &cachedTx{tx: tx, c: c, ctx: ctx}
}

// stmt returns q's cached statement bound to the transaction, or nil.
func (t *cachedTx) stmt(q string) *sql.Stmt {
	st := t.c.lookup(q)
	if st == nil {
		return nil
	}
	if ts, ok := t.local[st]; ok {
		return ts
	}
	// The transaction's connection already has st prepared after its
	// first use there, so this only wraps it; closed with the transaction.
	ts := t.tx.StmtContext(t.ctx, st)
	if t.local == nil {
		t.local = make(map[*sql.Stmt]*sql.Stmt, 8)
	}
	t.local[st] = ts
	return ts
}

func (t *cachedTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *cachedTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t *cachedTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}
