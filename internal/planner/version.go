package planner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Version is an immutable, content-addressed version of a job: its number
// (the spec's version field) and the digest of the spec's canonical form.
// The same spec always gives the same digest, whatever the field order in
// its file and whether it was written as JSON or YAML; any semantic change
// gives another digest.
type Version struct {
	JobID  string `json:"job_id"`
	Number uint64 `json:"version"`
	// Digest is "sha256:" and the hex SHA-256 of Canonical().
	Digest    string `json:"digest"`
	canonical []byte
	spec      *job.Spec
}

// NewVersion computes the version of a spec. The spec is not modified.
func NewVersion(s *job.Spec) (Version, error) {
	c, err := Canonical(s)
	if err != nil {
		return Version{}, err
	}
	var spec job.Spec
	if err := json.Unmarshal(c, &spec); err != nil {
		return Version{}, fmt.Errorf("job %q: canonical spec does not decode: %w", s.ID, err)
	}
	sum := sha256.Sum256(c)
	return Version{JobID: s.ID, Number: spec.Version, Digest: "sha256:" + hex.EncodeToString(sum[:]), canonical: c, spec: &spec}, nil
}

// Spec returns a copy of the canonical spec of this version.
func (v Version) Spec() *job.Spec { return v.spec.Clone() }

// Canonical returns the canonical JSON of this version's spec.
func (v Version) Canonical() []byte { return append([]byte(nil), v.canonical...) }

// Canonical returns the canonical JSON form of a spec: defaults applied;
// operators and edges sorted by ID, sources and sinks by operator ID (their
// order carries no meaning); every object's keys sorted; numbers in their
// shortest form; empty configs dropped. Two specs have the same canonical
// form exactly when they describe the same job.
func Canonical(s *job.Spec) ([]byte, error) {
	c := s.Clone()
	job.ApplyDefaults(c)
	sort.SliceStable(c.Operators, func(i, j int) bool { return c.Operators[i].ID < c.Operators[j].ID })
	sort.SliceStable(c.Edges, func(i, j int) bool { return c.Edges[i].ID < c.Edges[j].ID })
	sort.SliceStable(c.Sources, func(i, j int) bool { return c.Sources[i].OperatorID < c.Sources[j].OperatorID })
	sort.SliceStable(c.Sinks, func(i, j int) bool { return c.Sinks[i].OperatorID < c.Sinks[j].OperatorID })
	var err error
	canon := func(raw json.RawMessage, what string) json.RawMessage {
		if err != nil {
			return raw
		}
		var out json.RawMessage
		out, err = canonicalJSON(raw)
		if err != nil {
			err = fmt.Errorf("job %q: %s: %w", s.ID, what, err)
		}
		return out
	}
	for i := range c.Operators {
		c.Operators[i].Config = canon(c.Operators[i].Config, "operator "+c.Operators[i].ID+" config")
	}
	for i := range c.Sources {
		// An extension field written with its default is the same job as
		// one that leaves it out.
		if t := c.Sources[i].Time; t != nil && t.Watermark != nil {
			if t.Watermark.Advance == job.AdvanceBatch {
				t.Watermark.Advance = ""
			}
			if t.Watermark.AllIdle == job.AllIdleHold {
				t.Watermark.AllIdle = ""
			}
		}
		c.Sources[i].Config = canon(c.Sources[i].Config, "source "+c.Sources[i].OperatorID+" config")
		c.Sources[i].Durability = canon(c.Sources[i].Durability, "source "+c.Sources[i].OperatorID+" durability")
	}
	c.Durability = canon(c.Durability, "durability")
	for i := range c.Sinks {
		c.Sinks[i].Config = canon(c.Sinks[i].Config, "sink "+c.Sinks[i].OperatorID+" config")
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("job %q: encoding spec: %w", s.ID, err)
	}
	// One more pass sorts the keys of the spec's own objects too.
	return canonicalJSON(b)
}

// canonicalJSON re-encodes a JSON value with sorted keys and normalised
// numbers. Empty input, null and {} become nil.
func canonicalJSON(raw []byte) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	writeCanonical(&b, v)
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(normalizeNumber(string(x)))
	default:
		eb, _ := json.Marshal(x)
		b.Write(eb)
	}
}

// normalizeNumber writes integers without fraction or exponent and other
// numbers in Go's shortest float form, so 1, 1.0 and 1e0 are one number.
func normalizeNumber(n string) string {
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if u, err := strconv.ParseUint(n, 10, 64); err == nil {
		return strconv.FormatUint(u, 10)
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
