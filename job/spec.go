package job

import "encoding/json"

// Spec is a job as a Hub stores it and an Agent receives it: a graph of
// operators and edges with stable IDs, plus the sources and sinks bound to
// operators of kind "source" and "sink".
//
// The field names and JSON shape are ArkFlow v1's JobSpec, so a v1 spec loads
// unchanged. Fields marked "extension" are ours and optional; a v1 reader
// would ignore them.
type Spec struct {
	// ID names the job: 1–128 characters of [A-Za-z0-9_-].
	ID string `json:"id"`
	// Version is the user's version number of this job (ArkFlow v1's
	// JobVersion, a bare number). Default 1. Upgrades require a higher one.
	Version uint64 `json:"version"`
	// MaxParallelism is the number of key groups (default 128, at most
	// 32768). It is fixed for the life of the job's state: state is
	// redistributed by key group.
	MaxParallelism int `json:"max_parallelism"`
	// Parallelism is the default number of subtasks per operator (default 1).
	Parallelism int `json:"parallelism"`

	Operators []Operator `json:"operators"`
	Edges     []Edge     `json:"edges"`
	Sources   []Source   `json:"sources"`
	Sinks     []Sink     `json:"sinks"`

	State *State `json:"state,omitempty"`
	// Durability is the job-wide write-ahead log block (extension), a
	// Durability as JSON: every source gets it, merged with the source's
	// own durability block key by key. Nil: only sources with their own
	// block have a WAL.
	Durability json.RawMessage `json:"durability,omitempty"`
	Checkpoint *Checkpoint     `json:"checkpoint,omitempty"`
	// Recovery says where a restart takes its state from (default
	// latest_checkpoint).
	Recovery Recovery `json:"recovery"`

	// zeros lists the defaulted fields (by spec path) that Parse found
	// written as an explicit 0: ApplyDefaults leaves them 0, so that
	// validation reports them instead of replacing them with the default.
	zeros map[string]bool
	// undecoded are the problems Parse found decoding the spec: unknown
	// fields, and values of the wrong type (their fields are left zero,
	// or get their default). Validation reports them with every other
	// problem, so a spec that did not decode never builds, and validating
	// it shows all its mistakes at once.
	undecoded ValidationErrors
}

// decodeFailed reports whether the value at path could not be decoded.
func (s *Spec) decodeFailed(path string) bool {
	for _, e := range s.undecoded {
		if e.Field == path {
			return true
		}
	}
	return false
}

// Operator kinds. ArkFlow v1 defines all of them; this runtime executes
// each; the package doc lists a join's config.
const (
	KindSource    = "source"
	KindMap       = "map"
	KindFilter    = "filter"
	KindAggregate = "aggregate"
	KindWindow    = "window"
	KindJoin      = "join"
	KindSink      = "sink"
	KindUDF       = "udf"
)

// Operator is one node of the job graph.
type Operator struct {
	// ID is stable across versions: savepoints match state to operators by it.
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Stateful operators keep keyed state and need KeyField.
	Stateful bool `json:"stateful"`
	// KeyField is the column whose value selects the key group of a row
	// arriving on a partitioned edge, and the key of the operator's state.
	KeyField string `json:"key_field,omitempty"`
	// Config is the kind-specific configuration, kept verbatim.
	Config json.RawMessage `json:"config,omitempty"`
	// Parallelism overrides the job's parallelism for this operator
	// (extension; 0 means the job's).
	Parallelism int `json:"parallelism,omitempty"`
}

// Edge connects two operators. A partitioned edge routes every row to the
// downstream subtask that owns the key group of the row's key (the
// downstream operator's key_field); a forward edge keeps rows on the same
// subtask when both sides have the same parallelism and rebalances batches
// round-robin otherwise.
type Edge struct {
	ID          string `json:"id"`
	From        string `json:"from"`
	To          string `json:"to"`
	Partitioned bool   `json:"partitioned"`
}

// Source binds an external input to an operator of kind "source".
type Source struct {
	OperatorID string          `json:"operator_id"`
	InputType  string          `json:"input_type"`
	Config     json.RawMessage `json:"config,omitempty"`
	// Time declares processing or event time for the rows of this source.
	// Required by ArkFlow v1; optional here (extension), meaning
	// processing_time.
	Time *Time `json:"time,omitempty"`
	// Durability turns on the write-ahead log for this source (extension;
	// ArkFlow keeps it on the stream), a Durability as JSON. It is merged
	// over the spec's job-wide block key by key; nil inherits that block
	// unchanged.
	Durability json.RawMessage `json:"durability,omitempty"`
	// KeyedBy (extension) promises that the input is partitioned by this
	// column: every row of one value of it is in one partition of the
	// input (a Kafka topic whose producer keyed its messages by it), so
	// one source subtask reads all rows of its keys. A keyed operator
	// downstream with this key_field then needs no partitioned edge: it
	// runs in the source's subtask (co-partitioned, as Kafka Streams
	// does), through operators of the same parallelism, so its placement
	// units can go to different Agents. Its keyed state stays in its
	// subtask's own key groups, so a restore cannot change its
	// parallelism. A broken promise splits a key's results across
	// subtasks.
	KeyedBy string `json:"keyed_by,omitempty"`
}

// Sink binds an operator of kind "sink" to an external output.
type Sink struct {
	OperatorID string          `json:"operator_id"`
	OutputType string          `json:"output_type"`
	Config     json.RawMessage `json:"config,omitempty"`
}

// Time modes.
const (
	ProcessingTime = "processing_time"
	EventTime      = "event_time"
)

// Time is a source's time semantics (ArkFlow v1's TimeSpec).
type Time struct {
	Mode           string     `json:"mode"`
	TimestampField string     `json:"timestamp_field,omitempty"`
	Watermark      *Watermark `json:"watermark,omitempty"`
	// AllowedLatenessMS keeps fired windows open for late updates.
	AllowedLatenessMS int64 `json:"allowed_lateness_ms"`
	// LateEventPolicy is drop (default), route or update.
	LateEventPolicy string `json:"late_event_policy,omitempty"`
	// LateEventRoute names the sink operator that receives routed rows.
	LateEventRoute string `json:"late_event_route,omitempty"`
}

// Watermark strategies.
const (
	BoundedOutOfOrderness = "bounded_out_of_orderness"
	Monotonous            = "monotonous"
)

// Late event policies.
const (
	LateDrop   = "drop"
	LateRoute  = "route"
	LateUpdate = "update"
)

// Watermark advance modes (Watermark.Advance).
const (
	// AdvanceBatch is ArkFlow's rule: the watermark moves with
	// a whole batch before its rows are classified.
	AdvanceBatch = "batch"
	// AdvancePerRow classifies each row against the watermark in force
	// before it (an arkflow-go extension).
	AdvancePerRow = "per_row"
)

// What the watermark does when every partition of a source is idle
// (Watermark.AllIdle).
const (
	// AllIdleHold keeps the watermark where it is.
	AllIdleHold = "hold"
	// AllIdleAdvance lets it follow the clock (an arkflow-go extension).
	AllIdleAdvance = "advance"
)

// Watermark is how a source derives watermarks from event times.
type Watermark struct {
	Strategy         string `json:"strategy"`
	OutOfOrdernessMS int64  `json:"out_of_orderness_ms"`
	IdleTimeoutMS    *int64 `json:"idle_timeout_ms,omitempty"`
	// Advance is when the watermark moves relative to the rows of a batch
	// (extension): "batch" (empty means batch; ArkFlow's rule:
	// the watermark advances with the batch before its rows are
	// classified, so in a batch [2100, 100] with out_of_orderness_ms 0 the
	// row 100 is late) or "per_row" (each row is classified against the
	// watermark in force before it: the one its partition's earlier rows
	// gave, in this batch and before it, so in-order input is never late
	// whatever its batching). The watermark after the batch is the same in
	// both.
	Advance string `json:"advance,omitempty"`
	// AllIdle is what the watermark does while every partition of the
	// source is idle (extension; needs IdleTimeoutMS): "hold" (empty means
	// hold; it stays where it is) or "advance" (it follows the clock: it
	// becomes max(watermark, now − AllIdleDelayMS − OutOfOrdernessMS), so
	// a quiet source still closes its last windows). Only for event times
	// that are wall-clock Unix milliseconds.
	AllIdle string `json:"all_idle,omitempty"`
	// AllIdleDelayMS is, with AllIdle "advance", the longest an event
	// takes from its timestamp to the source (> 0; extension): an event
	// arriving after a quiet spell is late only if it took longer than
	// that (plus out_of_orderness_ms).
	AllIdleDelayMS int64 `json:"all_idle_delay_ms,omitempty"`
}

// State backends. "embedded_kv" is ArkFlow v1's generic name for the
// embedded store; it selects the default backend (Badger).
const (
	BackendBadger     = "badger"
	BackendMemory     = "memory"
	BackendEmbeddedKV = "embedded_kv"
)

// State configures keyed state (ArkFlow v1's StateSpec).
type State struct {
	Backend   string `json:"backend"`
	Namespace string `json:"namespace,omitempty"`
	TTLMS     *int64 `json:"ttl_ms,omitempty"`
	// FormatVersion is the state format (default 1); restores refuse
	// artifacts of another format.
	FormatVersion int `json:"format_version"`
	// Path is the directory of the embedded store (extension; default a
	// directory under the runtime's data dir).
	Path string `json:"path,omitempty"`
}

// Checkpoint configures periodic checkpoints (ArkFlow v1's CheckpointSpec).
type Checkpoint struct {
	// IntervalMS is the time between periodic checkpoints (default
	// 30000).
	IntervalMS int64 `json:"interval_ms"`
	// Retention is how many completed checkpoints are kept (default 3).
	Retention      int    `json:"retention"`
	ObjectStoreURI string `json:"object_store_uri"`
}

// Recovery is where a restarting job takes its state from.
type Recovery string

// Recovery policies.
const (
	RecoverLatestCheckpoint Recovery = "latest_checkpoint"
	RecoverLatestSavepoint  Recovery = "latest_savepoint"
	RecoverFail             Recovery = "fail"
)

// Operator returns the operator with the given ID and its index, or -1.
func (s *Spec) Operator(id string) (*Operator, int) {
	for i := range s.Operators {
		if s.Operators[i].ID == id {
			return &s.Operators[i], i
		}
	}
	return nil, -1
}

// Source returns the source bound to the operator ID and its index, or -1.
func (s *Spec) Source(operatorID string) (*Source, int) {
	for i := range s.Sources {
		if s.Sources[i].OperatorID == operatorID {
			return &s.Sources[i], i
		}
	}
	return nil, -1
}

// Sink returns the sink bound to the operator ID and its index, or -1.
func (s *Spec) Sink(operatorID string) (*Sink, int) {
	for i := range s.Sinks {
		if s.Sinks[i].OperatorID == operatorID {
			return &s.Sinks[i], i
		}
	}
	return nil, -1
}

// Clone returns a deep copy of the spec.
func (s *Spec) Clone() *Spec {
	c := *s
	raw := func(m []byte) []byte {
		if m == nil {
			return nil
		}
		return append([]byte(nil), m...)
	}
	c.Operators = make([]Operator, len(s.Operators))
	for i, op := range s.Operators {
		op.Config = raw(op.Config)
		c.Operators[i] = op
	}
	c.Edges = append(make([]Edge, 0, len(s.Edges)), s.Edges...)
	c.Sources = make([]Source, len(s.Sources))
	for i, src := range s.Sources {
		src.Config = raw(src.Config)
		src.Durability = raw(src.Durability)
		if src.Time != nil {
			t := *src.Time
			if t.Watermark != nil {
				w := *t.Watermark
				if w.IdleTimeoutMS != nil {
					v := *w.IdleTimeoutMS
					w.IdleTimeoutMS = &v
				}
				t.Watermark = &w
			}
			src.Time = &t
		}
		c.Sources[i] = src
	}
	c.Durability = raw(s.Durability)
	c.Sinks = make([]Sink, len(s.Sinks))
	for i, snk := range s.Sinks {
		snk.Config = raw(snk.Config)
		c.Sinks[i] = snk
	}
	if s.State != nil {
		st := *s.State
		if st.TTLMS != nil {
			v := *st.TTLMS
			st.TTLMS = &v
		}
		c.State = &st
	}
	if s.Checkpoint != nil {
		cp := *s.Checkpoint
		c.Checkpoint = &cp
	}
	return &c
}

// Aggregate is one aggregate of an aggregate or window operator's config:
// function (count, sum, min, max, avg, first or last) over field (count
// needs none), output as column As (default function_field, or "count").
type Aggregate struct {
	Function string `json:"function"`
	Field    string `json:"field,omitempty"`
	As       string `json:"as,omitempty"`
}

// OutputName is the aggregate's output column: As, or function_field
// (function alone when there is no field).
func (a Aggregate) OutputName() string {
	if a.As != "" {
		return a.As
	}
	if a.Field == "" {
		return a.Function
	}
	return a.Function + "_" + a.Field
}
