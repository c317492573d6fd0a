// Package runtime executes a built job in this process.
//
// Each operator chain of the plan runs as one goroutine per subtask. Inside
// a chain, operators call each other directly; between chains, batches
// travel over bounded channels (one per upstream sender), which is where
// backpressure comes from. Keyed edges split every batch column-wise by the
// key group of each row and send each part to the subtask that owns the
// group. Watermarks and end-of-input travel in the same channels as the
// rows.
//
// Lifecycle: Created → Starting (instantiate, connect
// sources then sinks; a failure closes what was connected, in reverse, and
// ends Failed) → Running → Stopping → Stopped, or Failed after an error.
package runtime

// This file holds the Runtime type, its Options, its lifecycle states and
// New. The rest of the package is split by concern: lifecycle.go (Run,
// Stop, Drain, start and close), state.go (the state backend), graph.go
// (chain instances built from the build.Graph), chain.go (the chain
// goroutine and its edges), source.go (source heads), sink.go (sink
// subtasks), metrics.go (counters), barrier.go, checkpoint.go, take.go,
// restore.go, carry.go and rescale.go (checkpoints).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/metrics"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// State is a runtime's lifecycle state.
type State int32

// States, in lifecycle order.
const (
	Created State = iota
	Starting
	Running
	Stopping
	Stopped
	Failed
)

func (s State) String() string {
	switch s {
	case Created:
		return "created"
	case Starting:
		return "starting"
	case Running:
		return "running"
	case Stopping:
		return "stopping"
	case Stopped:
		return "stopped"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// Errors returned by Run and Stop.
var (
	ErrAlreadyRunning = errors.New("arkflow: job already started (a job runs once)")
	ErrNotRunning     = errors.New("arkflow: job is not running")
)

// Options tune a runtime.
type Options struct {
	// Logger receives lifecycle and error logs. Default: discard. The
	// runtime adds the job key itself, and operator and subtask on what
	// a subtask logs (the keys are listed in the root package doc).
	Logger *slog.Logger
	// ChannelCapacity is the number of messages each channel between
	// chains buffers before its sender blocks (default 16).
	ChannelCapacity int
	// Clock gives the time for idle partitions and processing time
	// (default: the system clock). Tests inject a fake one.
	Clock Clock
	// ProcessingTimeInterval is how often a processing-time source feeding
	// a window advances its watermark to the clock (default 200ms).
	ProcessingTimeInterval time.Duration
	// DataDir is where jobs keep state whose spec gives no state.path:
	// DataDir/<job>/state.
	DataDir string
	// CheckpointStore configures an s3:// checkpoint store (endpoint,
	// credentials); empty fields come from the environment.
	CheckpointStore ckptstore.StoreOptions
	// FromSavepoint starts the job from this savepoint instead of
	// following spec.recovery.
	FromSavepoint string
	// NodeID names this process in checkpoint manifests (default local).
	NodeID string
	// WrapStore, if set, wraps the checkpoint store (fault injection in
	// tests, with ckpttest.FaultStore).
	WrapStore func(ckptstore.Store) ckptstore.Store
	// StartPositions makes source subtasks (by task ID) resume from these
	// positions instead of their configured start (restores, restarts).
	StartPositions map[string][]connectors.Position

	// Tasks is the set of plan tasks this process runs (for a job
	// whose placement units run on several nodes); empty runs them all.
	// It must be a union of whole placement units (job.Plan's
	// PlacementUnits), or Run fails naming the unit it splits
	// (ValidateTasks). A run of a subset restores only its tasks' state,
	// positions and watermarks, and its checkpoints are parts
	// (CheckpointPart) that a commit merges (CommitParts).
	Tasks []string
	// HubCheckpoints turns the periodic checkpoint loop (and a drain's
	// final checkpoint) off: checkpoints are cut only when asked
	// (CheckpointPart, or Checkpoint/Savepoint of a run of every task).
	// A run of a subset needs it: its rounds are the Hub's.
	HubCheckpoints bool
	// FromCheckpoint restores this checkpoint id (a Hub's recovery); if
	// it is not usable (never committed, corrupt), the restore falls
	// back as spec.recovery's latest_checkpoint would, past it.
	FromCheckpoint string
	// Generation is the deployment generation the manifests record (see
	// SetGeneration).
	Generation uint64
}

// Runtime runs one built job once.
type Runtime struct {
	g    *build.Graph
	opts Options
	log  *slog.Logger
	// run identifies this run in the attempt ids of the checkpoints it
	// cuts (see carriedMarks).
	run string

	mu       sync.Mutex
	state    State
	err      error
	stopOnce sync.Once
	stopping chan struct{} // closed by Stop: sources stop reading
	// draining is closed by Drain: sources end their input, every open
	// window fires, and (with checkpoints) a final checkpoint is taken.
	drainOnce sync.Once
	draining  chan struct{}
	// finalCut lets the final checkpoint of a drain cut while Stopping.
	finalCut bool
	done     chan struct{} // closed when Run has finished
	running  chan struct{} // closed when the state turns Running (runningCh)
	cancel   context.CancelFunc
	runCtx   context.Context // Run's: cancelled when the job fails

	tasks          []*taskMetrics
	sources        []*sourceHead
	sinkTasks      []string
	barriers       *barriers
	startPositions map[string][]connectors.Position
	// restoredWatermarks are the source watermarks of the restored
	// checkpoint, by source task.
	restoredWatermarks map[string]int64
	cutMu              sync.Mutex
	cutID              uint64
	ckpt               ckptState
	store              statestore.Backend
	stateDir           string // a Badger store's directory ("": memory)
	lastStateSizes     map[string]StateSize
	// journals are the state journals of tasks with user-visible keyed
	// state (ops.Journaled), by task, for Journal.
	journals map[string]*statestore.Journal
	// queries are the instances that answer queries, by operator (see
	// query.go); qmu guards them, and is held by a query while it runs.
	recovered     chan struct{} // see Recovered
	qmu           sync.RWMutex
	queries       map[string]*opQuery
	queriesClosed bool

	// local is Options.Tasks as a set; nil when every task runs here.
	local      map[string]bool
	generation atomic.Uint64
	// parts are the artifacts (of the restart kind) this run wrote parts
	// of whose commit it has not seen yet, oldest first (see
	// releaseCommitted); guarded by ckpt.mu.
	parts []string
	// partitions are the input partitions each local source task held
	// positions for at the last cut ("topic/partition"); guarded by
	// ckpt.mu (see SourcePartitions).
	partitions map[string][]string
}

// New returns a runtime for a built graph.
func New(g *build.Graph, opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ChannelCapacity <= 0 {
		opts.ChannelCapacity = 16
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.ProcessingTimeInterval <= 0 {
		opts.ProcessingTimeInterval = 200 * time.Millisecond
	}
	r := &Runtime{g: g, opts: opts, log: opts.Logger.With("job", g.Spec.ID), run: uuid.NewString(), stopping: make(chan struct{}), draining: make(chan struct{}), done: make(chan struct{}), barriers: newBarriers()}
	if len(opts.Tasks) > 0 {
		r.local = map[string]bool{}
		for _, t := range opts.Tasks {
			r.local[t] = true
		}
		if len(r.local) == len(g.Plan.Tasks) && ValidateTasks(g.Plan, opts.Tasks) == nil {
			r.local = nil // every task: a whole run
		}
	}
	r.generation.Store(opts.Generation)
	if g.Spec.Checkpoint == nil {
		// Without checkpoints there is never anything to restore.
		r.ckpt.status.Recovery.Done = true
	}
	r.ckpt.duration = metrics.NewDurationHistogram(metrics.DurationBuckets)
	r.ckpt.pause = metrics.NewDurationHistogram(metrics.LatencyBuckets)
	r.ckpt.size = metrics.NewHistogram(metrics.SizeBuckets, 1)
	return r
}
