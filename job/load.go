package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/internal/jobdecode"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/specpath"
)

func init() {
	jobdecode.Problems = func(spec any) any { return spec.(*Spec).undecoded }
}

// Parse decodes a spec from JSON or YAML (detected from the first
// non-blank character: '{' means JSON). Unknown fields and values of the
// wrong type are errors naming their path, all returned at once as
// ValidationErrors. Absent optional fields get their defaults (see
// ApplyDefaults); explicitly written zeros are kept, so that validation can
// report them.
//
// With such errors Parse still returns the spec as far as it decoded,
// unless the data is not an object at all; the package doc says how to
// validate it for every mistake at once.
func Parse(data []byte) (*Spec, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, ValidationErrors{{Reason: "empty spec"}}
	}
	if data[0] != '{' {
		j, err := yamlToJSON(data)
		if err != nil {
			return nil, ValidationErrors{{Reason: "invalid YAML: " + err.Error()}}
		}
		data = j
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, ValidationErrors{{Reason: "invalid JSON: " + err.Error()}}
	}
	if dec.More() {
		return nil, ValidationErrors{{Reason: "invalid JSON: data after the spec object"}}
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, ValidationErrors{{Reason: "a spec must be an object (got " + config.Describe(raw) + ")"}}
	}
	var spec Spec
	var errs config.Problems
	config.DecodeValue("", obj, &spec, &errs)
	for _, e := range errs {
		spec.undecoded = append(spec.undecoded, &ValidationError{Job: spec.ID, Operator: operatorAt(&spec, e.Path), Field: e.Path, Reason: e.Reason})
	}
	sort.SliceStable(spec.undecoded, func(i, j int) bool { return specpath.Less(spec.undecoded[i].Field, spec.undecoded[j].Field) })
	applyDefaults(&spec, obj)
	if len(spec.undecoded) > 0 {
		return &spec, spec.undecoded
	}
	return &spec, nil
}

// ParseFile reads and parses a JSON or YAML spec file. Like Parse, it
// returns the spec as far as it decoded with its decode errors.
func ParseFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading job spec: %w", err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		j, err := yamlToJSON(data)
		if err != nil {
			return nil, ValidationErrors{{Reason: fmt.Sprintf("%s: invalid YAML: %v", path, err)}}
		}
		data = j
	}
	return Parse(data)
}

// operatorAt returns the ID of the operator a decode error path points into,
// so that errors name it even before validation.
func operatorAt(s *Spec, path string) string {
	var i int
	if _, err := fmt.Sscanf(path, "operators[%d]", &i); err == nil && i < len(s.Operators) {
		return s.Operators[i].ID
	}
	if _, err := fmt.Sscanf(path, "sources[%d]", &i); err == nil && i < len(s.Sources) {
		return s.Sources[i].OperatorID
	}
	if _, err := fmt.Sscanf(path, "sinks[%d]", &i); err == nil && i < len(s.Sinks) {
		return s.Sinks[i].OperatorID
	}
	return ""
}

// ApplyDefaults fills the fields a Go-built spec left at their zero value:
// version 1, max_parallelism 128, parallelism 1, recovery
// latest_checkpoint, state format_version 1, checkpoint interval 30 s and
// retention 3, processing time for sources without a time block. It is what
// Parse does for absent fields, and it is idempotent.
func ApplyDefaults(s *Spec) { applyDefaults(s, nil) }

// applyDefaults fills absent fields. With raw (the decoded JSON object) a
// field counts as absent only when its key is missing; without it, a zero
// value counts as absent.
func applyDefaults(s *Spec, raw map[string]any) {
	// absent reports whether the field at path (its key in obj) is to
	// get its default.
	absent := func(obj map[string]any, path string, zero bool) bool {
		if s.decodeFailed(path) {
			// Reported by Parse; its default keeps the checks of the
			// fields that depend on it meaningful.
			return true
		}
		if obj == nil {
			return zero && !s.zeros[path]
		}
		v, ok := obj[path[strings.LastIndexByte(path, '.')+1:]]
		if ok && v != nil && zero {
			if s.zeros == nil {
				s.zeros = map[string]bool{}
			}
			s.zeros[path] = true
		}
		return !ok || v == nil
	}
	sub := func(key string) map[string]any {
		if raw == nil {
			return nil
		}
		m, _ := raw[key].(map[string]any)
		if m == nil {
			return map[string]any{}
		}
		return m
	}
	if absent(raw, "version", s.Version == 0) {
		s.Version = jobdefaults.Version
	}
	if absent(raw, "max_parallelism", s.MaxParallelism == 0) {
		s.MaxParallelism = jobdefaults.MaxParallelism
	}
	if absent(raw, "parallelism", s.Parallelism == 0) {
		s.Parallelism = 1
	}
	if s.Recovery == "" {
		s.Recovery = RecoverLatestCheckpoint
	}
	if s.Operators == nil {
		s.Operators = []Operator{}
	}
	if s.Edges == nil {
		s.Edges = []Edge{}
	}
	if s.Sources == nil {
		s.Sources = []Source{}
	}
	if s.Sinks == nil {
		s.Sinks = []Sink{}
	}
	if s.State != nil && absent(sub("state"), "state.format_version", s.State.FormatVersion == 0) {
		s.State.FormatVersion = jobdefaults.StateFormatVersion
	}
	if c := s.Checkpoint; c != nil {
		cr := sub("checkpoint")
		if absent(cr, "checkpoint.interval_ms", c.IntervalMS == 0) {
			c.IntervalMS = jobdefaults.CheckpointIntervalMS
		}
		if absent(cr, "checkpoint.retention", c.Retention == 0) {
			c.Retention = jobdefaults.CheckpointRetention
		}
	}
	for i := range s.Sources {
		if s.Sources[i].Time == nil {
			s.Sources[i].Time = &Time{Mode: ProcessingTime}
		}
		t := s.Sources[i].Time
		if t.Mode == EventTime && t.LateEventPolicy == "" {
			t.LateEventPolicy = LateDrop
		}
		if t.Watermark != nil && t.Watermark.Strategy == "" {
			t.Watermark.Strategy = BoundedOutOfOrderness
		}
	}
}

// MarshalJSON-compatible encodings.

// JSON encodes the spec as indented JSON. Parse(JSON(s)) is the same job
// as s: the same Canonical form, version digest and plan. (Not always the
// same bytes: Parse keeps component configs and durability blocks with
// their keys sorted.)
func (s *Spec) JSON() ([]byte, error) {
	return json.MarshalIndent(s, "", "  ")
}

// YAML encodes the spec as YAML. Parse(YAML(s)) is the same job as s, as
// for JSON.
func (s *Spec) YAML() ([]byte, error) {
	j, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}
