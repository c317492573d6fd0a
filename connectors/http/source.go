package httpconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	queue "github.com/arkflow-rs/arkflow-go/internal/push"
	"github.com/arkflow-rs/arkflow-go/job"
)

func init() {
	connectors.RegisterInput(Type, func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg SourceConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		zero := explicitZero(bc.Config, "max_body_bytes", "partitions", "max_pending", "busy_wait_ms", "max_in_flight", "idempotency.retention")
		return newInput(cfg, zero, bc.Time, bc.Logger)
	})
	connectors.RegisterOutput(Type, func(bc connectors.BuildContext, schema *arrow.Schema) (connectors.Output, error) {
		var cfg SinkConfig
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return newOutput(cfg, explicitZero(bc.Config, "timeout_ms"), schema)
	})
	// The seen keys of an idempotent input live beside its WAL.
	connectors.RegisterJobCheck(func(v connectors.JobView) []connectors.JobProblem {
		var out []connectors.JobProblem
		for _, in := range v.Inputs {
			if h, ok := in.Input.(*input); ok && h.cfg.Idempotency != nil && !in.Durable {
				out = append(out, connectors.JobProblem{OperatorID: in.OperatorID, Field: in.Path + ".config.idempotency", Reason: errNeedsDurability})
			}
		}
		return out
	})
}

const errNeedsDurability = "needs a durability block on the source (a write-ahead log on a local path): " +
	"the idempotency keys seen live beside the WAL, and without one a retry after a crash of a request the job had taken would count twice"

// input is a validated HTTP input: one server for all its subtasks,
// started by the first to connect and stopped by the last to close.
type input struct {
	cfg      SourceConfig
	declared *arrow.Schema
	q        *queue.Queue
	qin      connectors.Input
	et       *queue.EventTime
	lg       *slog.Logger
	decoders sync.Pool
	turn     atomic.Uint64
	m        serverMetrics
	slots    chan struct{} // a token per request in flight (max_in_flight)

	mu   sync.Mutex
	refs int
	srv  *http.Server
	addr string // the address listened on, once started
}

func newInput(cfg SourceConfig, zero map[string]bool, t *job.Time, lg *slog.Logger) (*input, error) {
	if err := checkSource(&cfg, zero); err != nil {
		return nil, err
	}
	declared := arrow.NewSchema([]arrow.Field{{Name: RawValueColumn, Type: arrow.BinaryTypes.Binary}}, nil)
	if cfg.Format != FormatRaw {
		s, err := cfg.Schema.Arrow("schema")
		if err != nil {
			return nil, err
		}
		declared = s
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	in := &input{cfg: cfg, declared: declared, lg: lg.With("connector", Type), slots: make(chan struct{}, cfg.MaxInFlight)}
	var seen *queue.Seen
	if cfg.Idempotency != nil {
		seen = queue.NewSeen(cfg.Idempotency.Retention)
	}
	in.q = queue.New(declared, cfg.Partitions, cfg.MaxPending, seen)
	if t != nil && t.Mode == job.EventTime {
		// An unknown column is the build's to report.
		if idx := declared.FieldIndices(t.TimestampField); len(idx) == 1 {
			in.et = &queue.EventTime{Col: idx[0], Field: t.TimestampField, Column: t.TimestampField, Route: t.LateEventPolicy == job.LateRoute}
		}
	}
	in.qin = in.q.Input(in.et)
	if _, err := newBodyDecoder(cfg.Format, declared); err != nil {
		return nil, connectors.FieldError("schema", "%v", err)
	}
	return in, nil
}

// Schema is the value columns (the declared schema, or the binary "value"
// column of format raw) followed by __meta_source, __meta_partition,
// __meta_offset and, with idempotency, __meta_key.
func (in *input) Schema() *arrow.Schema { return in.qin.Schema() }

// Partitions is the partitions key (default 1).
func (in *input) Partitions() int { return in.cfg.Partitions }

// NewSource returns the source of one subtask. It does no I/O.
func (in *input) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	inner, err := in.qin.NewSource(info)
	if err != nil {
		return nil, err
	}
	s := &source{in: in, inner: inner, reports: info.Subtask == 0}
	if in.cfg.Idempotency != nil {
		return &keptSource{s}, nil
	}
	return s, nil
}

// start starts the server once, for the first subtask to connect.
func (in *input) start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.refs++
	if in.refs > 1 {
		return nil
	}
	ln, err := net.Listen("tcp", in.cfg.Address)
	if err != nil {
		in.refs--
		return fmt.Errorf("http input: listening on %s: %w", in.cfg.Address, err)
	}
	mux := http.NewServeMux()
	mux.Handle(in.cfg.Path, http.HandlerFunc(in.serve))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(in.lg.Handler(), slog.LevelWarn)}
	if t := in.cfg.TLS; t != nil {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			ln.Close()
			in.refs--
			return fmt.Errorf("http input: tls: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	in.srv, in.addr = srv, ln.Addr().String()
	in.lg.Info("http: input listening", "address", in.addr, "path", in.cfg.Path, "tls", in.cfg.TLS != nil)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			in.lg.Error("http: input server failed", "err", err)
		}
	}()
	return nil
}

// stop stops the server when the last subtask closes: requests in flight
// get their answer (the queue refused their rows) within a bounded time.
func (in *input) stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.refs--; in.refs > 0 || in.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := in.srv.Shutdown(ctx); err != nil {
		in.srv.Close()
	}
	in.srv = nil
}

// boundAddr returns the address the server listened on last ("" before).
func (in *input) boundAddr() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.addr
}

// source is one subtask's source: the push queue's reader, with the
// server's life tied to it.
type source struct {
	in        *input
	inner     connectors.Source
	reports   bool // subtask 0 reports the server's metrics
	connected bool
}

func (s *source) Connect(ctx context.Context) error {
	if err := s.inner.Connect(ctx); err != nil {
		return err
	}
	if err := s.in.start(); err != nil {
		s.inner.Close(ctx)
		return err
	}
	s.connected = true
	return nil
}

func (s *source) Read(ctx context.Context) (connectors.Batch, error) { return s.inner.Read(ctx) }

func (s *source) Close(ctx context.Context) error {
	err := s.inner.Close(ctx) // refuses the rows still queued
	if s.connected {
		s.connected = false
		s.in.stop()
	}
	return err
}

// Unrewindable: rows posted cannot be read again.
func (s *source) Unrewindable() {}

func (s *source) Positions() []connectors.Position {
	return s.inner.(connectors.Positioner).Positions()
}

func (s *source) Seek(ps []connectors.Position) error {
	return s.inner.(connectors.Positioner).Seek(ps)
}

// keeper is what the WAL needs of an idempotent source (the push reader
// implements it).
type keeper interface {
	OpenKeeper(path string, lg *slog.Logger) error
	Logged(rec arrow.RecordBatch)
	SaveKept()
}

// keptSource is the source of an idempotent input: its keys seen are kept
// beside the WAL.
type keptSource struct{ *source }

func (k *keptSource) OpenKeeper(path string, lg *slog.Logger) error {
	return k.inner.(keeper).OpenKeeper(path, lg)
}
func (k *keptSource) Logged(rec arrow.RecordBatch) { k.inner.(keeper).Logged(rec) }
func (k *keptSource) SaveKept()                    { k.inner.(keeper).SaveKept() }

var (
	_ connectors.Input        = (*input)(nil)
	_ connectors.Positioner   = (*source)(nil)
	_ connectors.Unrewindable = (*source)(nil)
	_ keeper                  = (*keptSource)(nil)
)
