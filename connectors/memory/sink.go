package memory

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// SinkConfig is the memory output's spec config.
type SinkConfig struct {
	// KeepMeta keeps __meta_* columns (default false: they are dropped).
	KeepMeta bool `json:"keep_meta,omitempty"`
}

// Sink captures the batches a job writes, in the order its subtasks wrote
// them. It is safe for concurrent use; all subtasks of a sink operator
// write into the same Sink.
type Sink struct {
	// KeepMeta keeps __meta_* columns in captured batches.
	KeepMeta bool
	// OnWrite, when set, is called before each batch is captured; an error
	// fails the write (and is returned to the runtime). Tests use it to
	// inject failures.
	OnWrite func(ctx context.Context, rec arrow.RecordBatch) error

	mu   sync.Mutex
	recs []arrow.RecordBatch
	rows int64
}

// NewSink returns an empty capturing sink.
func NewSink() *Sink { return &Sink{} }

// OutputType implements the builder's sink component.
func (s *Sink) OutputType() string { return "memory" }

// MarshalJSON writes the sink's spec config.
func (s *Sink) MarshalJSON() ([]byte, error) {
	return json.Marshal(SinkConfig{KeepMeta: s.KeepMeta})
}

// Records returns the captured batches. They stay valid until Reset.
func (s *Sink) Records() []arrow.RecordBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrow.RecordBatch(nil), s.recs...)
}

// NumRows returns the number of captured rows.
func (s *Sink) NumRows() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows
}

// Reset forgets (and releases) the captured batches.
func (s *Sink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		r.Release()
	}
	s.recs, s.rows = nil, 0
}

func (s *Sink) write(ctx context.Context, rec arrow.RecordBatch) error {
	if s.OnWrite != nil {
		if err := s.OnWrite(ctx, rec); err != nil {
			return err
		}
	}
	var keep arrow.RecordBatch
	if s.KeepMeta {
		rec.Retain()
		keep = rec
	} else {
		keep = connectors.StripMeta(rec)
	}
	s.mu.Lock()
	s.recs = append(s.recs, keep)
	s.rows += keep.NumRows()
	s.mu.Unlock()
	return nil
}

type output struct{ sink *Sink }

func (o *output) NewSink(connectors.TaskInfo) (connectors.Sink, error) { return &sinkTask{o.sink}, nil }

type sinkTask struct{ s *Sink }

func (t *sinkTask) Connect(context.Context) error { return nil }
func (t *sinkTask) Write(ctx context.Context, rec arrow.RecordBatch) error {
	return t.s.write(ctx, rec)
}
func (t *sinkTask) Close(context.Context) error { return nil }

func buildOutput(bc connectors.BuildContext, _ *arrow.Schema) (connectors.Output, error) {
	var cfg SinkConfig
	if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
		return nil, err
	}
	if s, ok := bc.Bound.(*Sink); ok {
		return &output{sink: s}, nil
	}
	return &output{sink: &Sink{KeepMeta: cfg.KeepMeta}}, nil
}
