package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// Option configures Run.
type Option func(*options)

type options struct {
	dataDir string
	logger  *slog.Logger
	drain   time.Duration
	stdout  io.Writer
}

// WithDataDir sets the directory a stream's durability block keeps its
// write-ahead log in when the block gives no path: DIR/<stream id>/wal.
// The default is ./arkflow-data.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithLogger sends the streams' logs to l (default, and with nil:
// discarded; never slog.Default): processor failures, output errors and
// the like, every record carrying stream=<its id>. The logger is borrowed,
// never closed.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDrainTimeout bounds how long a stop (ctx done) waits for the rows
// already read to go through the pipeline and out; rows still inside
// then are not acknowledged, so an input that can read them again (or a
// durability block) gives them again after a restart. The default is 30s.
func WithDrainTimeout(d time.Duration) Option { return func(o *options) { o.drain = d } }

// WithStdout sets where stdout outputs write (os.Stdout by default).
func WithStdout(w io.Writer) Option { return func(o *options) { o.stdout = w } }

// Run validates cfg (as Validate does) and runs every stream until its
// input ends or ctx is done, then returns: nil when every stream ended
// cleanly, else the streams' errors joined. A stop drains: reading stops,
// the buffer emits what it holds, and what was read goes through the
// pipeline and out before Run returns (bounded by WithDrainTimeout).
//
// Each stream runs input → (durability WAL) → buffer → processors on
// pipeline.thread_num workers → output, and acknowledges its input's rows
// once the output has written them: at-least-once. Output order is input
// order (after the buffer), whatever thread_num is. A processor's error
// sends the batch it got to error_output (or drops it with an error log
// when there is none); an output error is logged and the rows are left
// unacknowledged, for the input (or the WAL, after a restart) to give
// again. Unlike ArkFlow, Run returns once every input has ended.
func Run(ctx context.Context, cfg *Config, opts ...Option) error {
	o := options{dataDir: "arkflow-data", drain: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err := Validate(cfg); err != nil {
		return err
	}
	runners := make([]*runner, len(cfg.Streams))
	for i := range cfg.Streams {
		r, err := newRunner(&cfg.Streams[i], i, &o)
		if err != nil {
			for _, r := range runners[:i] {
				r.abort()
			}
			return fmt.Errorf("stream %s: %w", streamName(&cfg.Streams[i], i), err)
		}
		runners[i] = r
	}
	if cfg.HealthCheck.serves() {
		stop, err := serveHealth(ctx, &cfg.HealthCheck, runners, o.logger)
		if err != nil {
			for _, r := range runners {
				r.abort()
			}
			return err
		}
		defer stop()
	}
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Go(func() {
			if err := r.run(ctx); err != nil {
				errs[i] = fmt.Errorf("stream %s: %w", r.id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// streamName is a stream's id, or ArkFlow's stream-<index> without one.
func streamName(s *Stream, i int) string {
	if s.ID != "" {
		return s.ID
	}
	return fmt.Sprintf("stream-%d", i)
}

// threads is a pipeline's worker count.
func threads(p *Pipeline) int {
	if p.ThreadNum > 0 {
		return p.ThreadNum
	}
	return runtime.NumCPU()
}
