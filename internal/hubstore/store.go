package hubstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

// Options tune a Store. The zero value is usable.
type Options struct {
	// Clock returns the current time. Leases, deadlines and record
	// timestamps all come from it, so tests can move time without sleeping.
	// Default: time.Now.
	Clock func() time.Time
	// LeaseTTL is how long a registration or heartbeat keeps an Agent
	// online. Default 15 s (ArkFlow's lease_ttl_ms).
	LeaseTTL time.Duration
	// BusyTimeout is SQLite's busy timeout for readers (the writer never
	// waits on itself). Default 5 s.
	BusyTimeout time.Duration
	// MaxReaders bounds the read pool. Default 8.
	MaxReaders int
	// OnWrite, if set, is called after every write transaction (a single
	// write or a group commit's batch, committed or not) with how long it
	// took from BEGIN to COMMIT, the fsync included: the Hub's store
	// write latency metric. It is called with the writer's lock held, so
	// it must be quick and must not call the store.
	OnWrite func(time.Duration)
}

// Store is the Hub's durable store. All methods are safe for concurrent use.
type Store struct {
	opts Options
	now  func() time.Time

	wmu    sync.Mutex // serialises every write transaction
	w      *sql.DB    // one connection: the only writer
	r      *sql.DB    // read pool (query_only)
	wc, rc *stmtCache // prepared statements of w and r
	ckpt   *sql.DB    // one connection: WAL checkpoints beside the writer
	stop   func()     // ends the checkpointer
	ckDone chan struct{}
	group  groupCommit  // heartbeats and reports waiting to be committed together
	rq     cachedDB     // r through rc: what reads use
	unlock func() error // releases path.lock
}

// Open opens (creating if needed) the store in the SQLite file at path and
// applies any pending migrations.
func Open(path string, opts Options) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("hubstore: a file path is required (an in-memory Hub would lose acknowledged writes)")
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 15 * time.Second
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.MaxReaders <= 0 {
		opts.MaxReaders = 8
	}
	// One Hub per file: a second process (or Store) on the same file would
	// be a second writer. The flock dies with the process.
	unlock, err := fsutil.Lock(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("hubstore: %s is in use by another Hub: %w", path, err)
	}
	s, err := open(path, opts)
	if err != nil {
		_ = unlock()
		return nil, err
	}
	s.unlock = unlock
	return s, nil
}

func open(path string, opts Options) (*Store, error) {
	busy := opts.BusyTimeout.Milliseconds()
	// synchronous(FULL): in WAL mode NORMAL may lose the last commits on a
	// power failure or OS crash (it only survives process crashes). The
	// store acknowledges intents, commands and results to clients, so a
	// commit must be on stable storage before we return: FULL syncs the
	// WAL on every commit.
	wq := url.Values{}
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous(FULL)")
	// No checkpoint inside a commit: it would copy the WAL into the
	// database and sync it while every queued write waits (a 0.2-0.3 s
	// stall on this disk under the Hub's load test); checkpointer does it
	// beside the writer.
	wq.Add("_pragma", "wal_autocheckpoint(0)")
	wq.Add("_pragma", "foreign_keys(1)")
	wq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy))
	wq.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", "file:"+path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("hubstore: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{opts: opts, now: opts.Clock, w: w}
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("hubstore: open %s: %w", path, err)
	}
	var mode string
	if err := w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		w.Close()
		return nil, fmt.Errorf("hubstore: %s: journal mode %q, want wal (%v)", path, mode, err)
	}
	if err := s.migrate(context.Background()); err != nil {
		w.Close()
		return nil, err
	}
	rq := url.Values{}
	rq.Add("_pragma", "query_only(1)")
	rq.Add("_pragma", "foreign_keys(1)")
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy))
	r, err := sql.Open("sqlite", "file:"+path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("hubstore: open readers %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.MaxReaders)
	// Keep every reader open: a new connection costs its pragmas, and its
	// prepared statements would be parsed again.
	r.SetMaxIdleConns(opts.MaxReaders)
	s.r = r
	s.wc, s.rc = newStmtCache(w), newStmtCache(r)
	s.rq = cachedDB{db: r, c: s.rc}
	cq := url.Values{}
	cq.Add("_pragma", "synchronous(FULL)")
	cq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy))
	ck, err := sql.Open("sqlite", "file:"+path+"?"+cq.Encode())
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("hubstore: open checkpointer %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	ck.SetConnMaxLifetime(0)
	ck.SetConnMaxIdleTime(0)
	s.ckpt = ck
	cctx, stop := context.WithCancel(context.Background())
	s.stop, s.ckDone = stop, make(chan struct{})
	go s.checkpointer(cctx)
	return s, nil
}

// Close closes the store. Every acknowledged write is already durable.
func (s *Store) Close() error {
	// The checkpointer first, outside wmu: it may be waiting for wmu.
	s.stop()
	<-s.ckDone
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return errors.Join(s.rc.close(), s.wc.close(), s.ckpt.Close(), s.r.Close(), s.w.Close(), s.unlock())
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

// write runs fn in one BEGIN IMMEDIATE transaction on the single writer
// connection. The mutex makes write transactions strictly sequential in
// the process; the commit returns only once SQLite has synced the WAL.
func (s *Store) write(ctx context.Context, fn func(tx *cachedTx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeLocked(ctx, fn)
}

// writeLocked is write for a caller holding wmu.
func (s *Store) writeLocked(ctx context.Context, fn func(tx *cachedTx) error) error {
	defer s.timeWrite(time.Now())
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("hubstore: begin: %w", err)
	}
	// The writer connection is free again once the transaction ends:
	// prepare the statements it ran unprepared for the next ones.
	defer s.wc.prepareMissed()
	if err := fn(newTx(ctx, tx, s.wc)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("hubstore: commit: %w", err)
	}
	return nil
}

// timeWrite reports the duration of a write transaction begun at start
// to Options.OnWrite.
func (s *Store) timeWrite(start time.Time) {
	if s.opts.OnWrite != nil {
		s.opts.OnWrite(time.Since(start))
	}
}

// queryer is what both reads (cachedDB) and transactions (cachedTx) offer.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// SchemaVersion reports the highest migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.rq.QueryRowContext(ctx, "SELECT COALESCE(MAX(version),0) FROM schema_version").Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY,
		applied_at_ms INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("hubstore: schema_version: %w", err)
	}
	var cur int
	if err := s.w.QueryRowContext(ctx, "SELECT COALESCE(MAX(version),0) FROM schema_version").Scan(&cur); err != nil {
		return fmt.Errorf("hubstore: schema_version: %w", err)
	}
	if cur > len(migrations) {
		return fmt.Errorf("hubstore: database schema version %d is newer than this Hub (%d)", cur, len(migrations))
	}
	for i := cur; i < len(migrations); i++ {
		v := i + 1
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("hubstore: migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("hubstore: migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_version(version, applied_at_ms) VALUES (?, ?)", v, s.nowMS()); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("hubstore: migration %d: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("hubstore: migration %d: %w", v, err)
		}
	}
	return nil
}

// queryAll runs q on db and scans every row with scan.
func queryAll[T any](ctx context.Context, db queryer, scan func(interface{ Scan(...any) error }) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
