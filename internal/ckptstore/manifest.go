package ckptstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Kind says whether a manifest is a periodic checkpoint or a named
// savepoint.
type Kind string

// The kinds of manifest.
const (
	KindCheckpoint Kind = "checkpoint"
	KindSavepoint  Kind = "savepoint"
)

func (k Kind) valid() bool { return k == KindCheckpoint || k == KindSavepoint }

// ID is a checkpoint's sequence number. Ids increase and are never reused
// within a job (see Catalog.NextID); 0 is not an id.
type ID uint64

// String renders the id as 20 decimal digits, zero-padded, so that the
// lexical order of ids (and of their keys in a store) is their numeric
// order.
func (id ID) String() string { return fmt.Sprintf("%020d", uint64(id)) }

// ParseID parses the 20-digit form String gives.
func ParseID(s string) (ID, error) {
	if len(s) != 20 {
		return 0, fmt.Errorf("checkpoint: id %q is not 20 decimal digits", s)
	}
	return parseDigits(s, "20 decimal digits")
}

// parseDigits parses an id of decimal digits (form says how many, for the
// error).
func parseDigits(s, form string) (ID, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("checkpoint: id %q is not %s", s, form)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: id %q is out of range", s)
	}
	if n == 0 {
		return 0, fmt.Errorf("checkpoint: id %q: ids start at 1", s)
	}
	return ID(n), nil
}

// Manifest is the document that makes a checkpoint or a savepoint: what
// was captured at one acknowledged boundary — per-task state
// objects, source positions and watermarks — for one job version, plan and
// state format. Its JSON is ArkFlow v1's CheckpointManifest with the same
// field names, plus the extensions marked below, which ArkFlow ignores.
//
// A manifest is immutable once sealed: Seal computes Checksum over every
// other field, and DecodeManifest refuses a manifest whose checksum does
// not match (see the package documentation for the algorithm).
type Manifest struct {
	// CheckpointID is the checkpoint's id (ID.String()) for a checkpoint;
	// for a savepoint, any non-empty id the caller chose (the savepoint is
	// found by Name).
	CheckpointID string `json:"checkpoint_id"`
	// JobID is the job's id: 1–128 characters of [A-Za-z0-9_-].
	JobID string `json:"job_id"`
	// JobVersion is the version of the job that wrote it; a job at an
	// older version refuses to restore it.
	JobVersion uint64 `json:"job_version"`
	// Generation is the deployment generation of the job that wrote it.
	Generation uint64 `json:"generation"`
	// TaskAttempts lists one attempt per planned task.
	TaskAttempts []TaskAttempt `json:"task_attempts"`
	// SourcePositions are the positions to resume reading from.
	SourcePositions []SourcePosition `json:"source_positions"`
	// WatermarksMS maps a task id to its watermark (Unix ms).
	WatermarksMS map[string]int64 `json:"watermarks_ms"`
	// InFlightBarrier is the barrier that cut this checkpoint, if any.
	InFlightBarrier *Barrier `json:"in_flight_barrier,omitempty"`
	// StateSnapshots lists the state objects, at most one per task (tasks
	// without state have none).
	StateSnapshots []StateSnapshot `json:"state_snapshots"`
	// FormatVersion is the state format version of every snapshot;
	// a restoring job must have the same.
	FormatVersion int `json:"format_version"`

	// Kind (extension) is "checkpoint" or "savepoint".
	Kind Kind `json:"kind"`
	// Name (extension) is the savepoint's name; empty for a checkpoint.
	Name string `json:"name,omitempty"`
	// CreatedMS (extension) is when it was committed (Unix ms).
	CreatedMS int64 `json:"created_ms"`
	// PlannedTasks (extension) is the task set of the plan that wrote it,
	// sorted: TaskAttempts must name exactly these tasks.
	PlannedTasks []string `json:"planned_tasks"`
	// PlanDigest (extension) identifies that plan (job.Plan.Digest).
	PlanDigest string `json:"plan_digest"`
	// MaxParallelism (extension) is the job's max_parallelism when the
	// checkpoint was cut: the number of key groups its keyed state is
	// split into. 0 in manifests written before it was recorded.
	MaxParallelism int `json:"max_parallelism,omitempty"`

	// Checksum is 16 lowercase hex digits (see Seal).
	Checksum string `json:"checksum"`
}

// TaskAttempt is the attempt of a task that contributed to a checkpoint.
type TaskAttempt struct {
	TaskID    string `json:"task_id"`
	AttemptID string `json:"attempt_id"`
	NodeID    string `json:"node_id"`
}

// SourcePosition is where a source resumes: an offset in a partition.
type SourcePosition struct {
	// TaskID (extension) is the source subtask that owns the position, so
	// that positions are per subtask; empty in ArkFlow's manifests.
	TaskID    string `json:"task_id,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Barrier identifies a checkpoint barrier.
type Barrier struct {
	CheckpointID string `json:"checkpoint_id"`
	Generation   uint64 `json:"generation"`
}

// StateSnapshot is a task's state object.
type StateSnapshot struct {
	TaskID string `json:"task_id"`
	NodeID string `json:"node_id,omitempty"`
	// URI is the object's key in the catalog's store (relative to the
	// store's root, e.g. "orders/checkpoints/00000000000000000007/state/map-0.snap"),
	// so that a store can be moved or mirrored without rewriting manifests.
	URI string `json:"uri"`
	// Checksum is "crc64nvme:" and the hex CRC-64/NVME of the object's
	// bytes, or "sha256:" and their hex SHA-256 (internal/objsum).
	Checksum string `json:"checksum"`
	// Bytes is the object's size.
	Bytes int64 `json:"bytes"`
}

// manifestExt is the 11th element of the checksummed array: our extension
// fields, in this order.
type manifestExt struct {
	Kind           Kind     `json:"kind"`
	Name           string   `json:"name,omitempty"`
	CreatedMS      int64    `json:"created_ms"`
	PlannedTasks   []string `json:"planned_tasks"`
	PlanDigest     string   `json:"plan_digest"`
	MaxParallelism int      `json:"max_parallelism,omitempty"`
}

// checksumInput returns the bytes the checksum covers: the compact JSON of
// [checkpoint_id, job_id, job_version, generation, task_attempts,
// source_positions, watermarks_ms, in_flight_barrier, state_snapshots,
// format_version, {kind, name, created_ms, planned_tasks, plan_digest,
// max_parallelism}] (max_parallelism omitted when 0, so manifests written
// before it existed keep their checksum).
// Absent lists and maps count as empty ([] and {}), as serde writes them.
func (m *Manifest) checksumInput() ([]byte, error) {
	arr := []any{
		m.CheckpointID, m.JobID, m.JobVersion, m.Generation,
		orEmpty(m.TaskAttempts), orEmpty(m.SourcePositions), orEmptyMap(m.WatermarksMS),
		m.InFlightBarrier, orEmpty(m.StateSnapshots), m.FormatVersion,
		manifestExt{m.Kind, m.Name, m.CreatedMS, orEmpty(m.PlannedTasks), m.PlanDigest, m.MaxParallelism},
	}
	return compactJSON(arr)
}

// compactJSON is encoding/json without HTML escaping (serde_json does not
// escape '<', '>' or '&') and without the trailing newline.
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orEmptyMap(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// ComputeChecksum returns the checksum the manifest's fields give (FNV-1
// 64 over checksumInput, as 16 lowercase hex digits), whatever Checksum
// holds.
func (m *Manifest) ComputeChecksum() (string, error) {
	in, err := m.checksumInput()
	if err != nil {
		return "", fmt.Errorf("checkpoint: manifest %q: encoding: %w", m.CheckpointID, err)
	}
	h := fnv.New64() // FNV-1: h = h*prime ^ byte, as ArkFlow
	h.Write(in)
	return fmt.Sprintf("%016x", h.Sum64()), nil
}

// Seal sorts PlannedTasks, replaces absent lists and maps by empty ones,
// and sets Checksum. It does not check the task set (CheckTasks does).
func (m *Manifest) Seal() error {
	m.normalize()
	sort.Strings(m.PlannedTasks)
	sum, err := m.ComputeChecksum()
	if err != nil {
		return err
	}
	m.Checksum = sum
	return nil
}

// Verify returns a *CorruptError if Checksum is not the one the fields
// give.
func (m *Manifest) Verify() error {
	sum, err := m.ComputeChecksum()
	if err != nil {
		return &CorruptError{Reason: "the manifest does not encode", Err: err}
	}
	if m.Checksum != sum {
		return &CorruptError{Reason: fmt.Sprintf("manifest %q: checksum %q does not match its contents (%s)", m.CheckpointID, m.Checksum, sum)}
	}
	return nil
}

// Encode returns the manifest's JSON document (indented, one trailing
// newline). The manifest must be sealed.
func (m *Manifest) Encode() ([]byte, error) {
	if m.Checksum == "" {
		return nil, fmt.Errorf("checkpoint: manifest %q is not sealed (call Seal first)", m.CheckpointID)
	}
	c := *m
	c.normalize()
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: manifest %q: encoding: %w", m.CheckpointID, err)
	}
	return append(b, '\n'), nil
}

// normalize replaces absent lists and maps by empty ones, so a decoded
// manifest compares equal to the one that was encoded.
func (m *Manifest) normalize() {
	m.TaskAttempts = orEmpty(m.TaskAttempts)
	m.SourcePositions = orEmpty(m.SourcePositions)
	m.WatermarksMS = orEmptyMap(m.WatermarksMS)
	m.StateSnapshots = orEmpty(m.StateSnapshots)
	m.PlannedTasks = orEmpty(m.PlannedTasks)
}

// DecodeManifest parses a manifest document and verifies it: one JSON
// object (unknown fields are ignored, for forward compatibility; they are
// not covered by the checksum), well-formed fields (see validate) and a
// matching checksum. Every failure is a *CorruptError. It does not check
// the task set (CheckTasks) nor compatibility (Catalog.Select).
func DecodeManifest(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, &CorruptError{Reason: "the manifest is not valid JSON", Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &CorruptError{Reason: "the manifest has data after its JSON object"}
	}
	m.normalize()
	if err := m.validate(); err != nil {
		return nil, &CorruptError{Reason: "invalid manifest", Err: err}
	}
	if !isHex(m.Checksum, 16) {
		return nil, &CorruptError{Reason: fmt.Sprintf("manifest %q: checksum %q is not 16 lowercase hex digits", m.CheckpointID, m.Checksum)}
	}
	if err := m.Verify(); err != nil {
		return nil, err
	}
	return &m, nil
}

// validate checks the fields one by one (not the task set, not the
// checksum).
func (m *Manifest) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch m.Kind {
	case KindCheckpoint:
		if _, err := ParseID(m.CheckpointID); err != nil {
			bad("checkpoint_id: %v", err)
		}
		if m.Name != "" {
			bad("name %q: only a savepoint has a name", m.Name)
		}
	case KindSavepoint:
		if m.CheckpointID == "" {
			bad("checkpoint_id is empty")
		}
		if err := validName("name", m.Name); err != nil {
			bad("%v", err)
		}
	default:
		bad("kind %q is neither %q nor %q", m.Kind, KindCheckpoint, KindSavepoint)
	}
	if err := validJobID(m.JobID); err != nil {
		bad("%v", err)
	}
	if m.FormatVersion <= 0 {
		bad("format_version %d must be positive", m.FormatVersion)
	}
	if m.MaxParallelism < 0 {
		bad("max_parallelism %d must not be negative", m.MaxParallelism)
	}
	if m.CreatedMS < 0 {
		bad("created_ms %d is negative", m.CreatedMS)
	}
	for i, a := range m.TaskAttempts {
		if err := validName("task_id", a.TaskID); err != nil {
			bad("task_attempts[%d]: %v", i, err)
		}
	}
	for i, s := range m.StateSnapshots {
		if err := validName("task_id", s.TaskID); err != nil {
			bad("state_snapshots[%d]: %v", i, err)
		}
		if err := ValidKey(s.URI); err != nil {
			bad("state_snapshots[%d]: uri: %v", i, err)
		}
		if !objsum.Valid(s.Checksum) {
			bad("state_snapshots[%d]: checksum %q is neither \"crc64nvme:\" and 16 nor \"sha256:\" and 64 lowercase hex digits", i, s.Checksum)
		}
		if s.Bytes < 0 {
			bad("state_snapshots[%d]: bytes %d is negative", i, s.Bytes)
		}
	}
	for i, t := range m.PlannedTasks {
		if err := validName("planned_tasks", t); err != nil {
			bad("planned_tasks[%d]: %v", i, err)
		}
	}
	if !sort.StringsAreSorted(m.PlannedTasks) {
		bad("planned_tasks is not sorted")
	}
	// JSON carries only valid UTF-8: a string that is not would be
	// changed by encoding, and then differ from what was sealed.
	text := []string{m.CheckpointID, m.PlanDigest}
	for _, a := range m.TaskAttempts {
		text = append(text, a.AttemptID, a.NodeID)
	}
	for _, p := range m.SourcePositions {
		text = append(text, p.TaskID, p.Topic)
	}
	for t := range m.WatermarksMS {
		text = append(text, t)
	}
	if m.InFlightBarrier != nil {
		text = append(text, m.InFlightBarrier.CheckpointID)
	}
	for _, s := range m.StateSnapshots {
		text = append(text, s.NodeID)
	}
	for _, s := range text {
		if !utf8.ValidString(s) {
			bad("%q is not valid UTF-8", s)
		}
	}
	return errors.Join(errs...)
}

// CheckTasks enforces the task-set rule: TaskAttempts names exactly PlannedTasks,
// each once; StateSnapshots and WatermarksMS name only planned tasks, each
// at most once; SourcePositions name only planned tasks, and no partition
// twice for one task. It returns every violation, each a *TaskSetError
// (errors.Is(err, ErrMissingTask), ErrDuplicateTask, ErrExtraTask),
// joined.
func (m *Manifest) CheckTasks() error {
	var errs []error
	add := func(field, task string, err error, detail string) {
		errs = append(errs, &TaskSetError{CheckpointID: m.CheckpointID, Field: field, TaskID: task, Err: err, Detail: detail})
	}
	if len(m.PlannedTasks) == 0 {
		return fmt.Errorf("checkpoint: manifest %q: planned_tasks is empty", m.CheckpointID)
	}
	planned := make(map[string]bool, len(m.PlannedTasks))
	for _, t := range m.PlannedTasks {
		if planned[t] {
			add("planned_tasks", t, ErrDuplicateTask, "")
		}
		planned[t] = true
	}
	seen := make(map[string]bool, len(m.TaskAttempts))
	for _, a := range m.TaskAttempts {
		switch {
		case !planned[a.TaskID]:
			add("task_attempts", a.TaskID, ErrExtraTask, "")
		case seen[a.TaskID]:
			add("task_attempts", a.TaskID, ErrDuplicateTask, "")
		}
		seen[a.TaskID] = true
	}
	for _, t := range m.PlannedTasks {
		if !seen[t] {
			add("task_attempts", t, ErrMissingTask, "")
			seen[t] = true // report a duplicated planned task once
		}
	}
	clear(seen)
	for _, s := range m.StateSnapshots {
		switch {
		case !planned[s.TaskID]:
			add("state_snapshots", s.TaskID, ErrExtraTask, "")
		case seen[s.TaskID]:
			add("state_snapshots", s.TaskID, ErrDuplicateTask, "")
		}
		seen[s.TaskID] = true
	}
	wm := make([]string, 0, len(m.WatermarksMS))
	for t := range m.WatermarksMS {
		wm = append(wm, t)
	}
	sort.Strings(wm)
	for _, t := range wm {
		if !planned[t] {
			add("watermarks_ms", t, ErrExtraTask, "")
		}
	}
	type part struct {
		task, topic string
		partition   int32
	}
	parts := map[part]bool{}
	for _, p := range m.SourcePositions {
		if p.TaskID != "" && !planned[p.TaskID] {
			add("source_positions", p.TaskID, ErrExtraTask, "")
			continue
		}
		k := part{p.TaskID, p.Topic, p.Partition}
		if parts[k] {
			add("source_positions", p.TaskID, ErrDuplicateTask, fmt.Sprintf("topic %q partition %d appears twice", p.Topic, p.Partition))
		}
		parts[k] = true
	}
	return errors.Join(errs...)
}

// ValidSavepointName says whether name can name a savepoint (validName's
// rule); the error names the rule broken. The Hub checks a requested
// name with it before any Agent cuts the savepoint.
func ValidSavepointName(name string) error { return validName("savepoint name", name) }

// validName checks a path segment the layout uses: a task id, a savepoint
// name. It is 1–255 characters of [A-Za-z0-9_.-], not "." or "..", and does
// not start with ".arkflow-tmp-".
func validName(field, s string) error {
	if s == "" || len(s) > 255 {
		return fmt.Errorf("%s %q must be 1-255 characters", field, s)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("%s %q is not a valid name", field, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%s %q may hold only letters, digits, '-', '_' and '.'", field, s)
		}
	}
	if len(s) >= len(tmpPrefix) && s[:len(tmpPrefix)] == tmpPrefix {
		return fmt.Errorf("%s %q begins with the reserved %q", field, s, tmpPrefix)
	}
	return nil
}

// validJobID checks ArkFlow's job id rule: 1–128 of [A-Za-z0-9_-].
func validJobID(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("job_id %q must be 1-128 characters", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("job_id %q may hold only letters, digits, '-' and '_'", s)
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
