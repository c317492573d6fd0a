package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/config"
	"github.com/arkflow-rs/arkflow-go/job"
)

// walBlock is ArkFlow's durability block (its WalConfig).
type walBlock struct {
	Enabled *bool           `json:"enabled"`
	Path    string          `json:"path"`
	Sync    json.RawMessage `json:"sync"`
	Backend json.RawMessage `json:"backend"`
}

// walBackend is the block's backend: local, or object_store (an
// S3-compatible bucket).
type walBackend struct {
	Type     string          `json:"type"`
	Path     string          `json:"path"`
	Sync     json.RawMessage `json:"sync"`
	NodeID   string          `json:"node_id"`
	StreamID string          `json:"stream_id"`
	Prefix   string          `json:"prefix"`
	S3       *walS3          `json:"s3"`
	// ArkFlow's tuning of its object-store log (segment sizes and flush
	// interval, cursor saves, parallel PUTs, compression): this log is
	// tuned by sync, and Notes says they are not used.
	Segment       json.RawMessage `json:"segment"`
	Cursor        json.RawMessage `json:"cursor"`
	SegmentTuning json.RawMessage `json:"segment_tuning"`
	ParallelPut   json.RawMessage `json:"parallel_put"`
	Compression   json.RawMessage `json:"compression"`
}

// walS3 is the object_store backend's bucket, ArkFlow's keys.
type walS3 struct {
	Bucket          string `json:"bucket"`
	Region          string `json:"region"`
	Endpoint        string `json:"endpoint"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	AllowHTTP       bool   `json:"allow_http"`
}

// tuned says whether the backend sets ArkFlow's object-store tuning keys.
func (b *walBackend) tuned() bool {
	for _, r := range []json.RawMessage{b.Segment, b.Cursor, b.SegmentTuning, b.ParallelPut, b.Compression} {
		if len(r) > 0 && string(r) != "null" {
			return true
		}
	}
	return false
}

// walConfig reads a stream's durability block into this library's
// durability settings: nil when there is none or it is switched off.
func walConfig(raw json.RawMessage) (*job.Durability, error) {
	d, ps := decodeWAL(raw)
	if len(ps) > 0 {
		return nil, problemsToErrors(ps)
	}
	return d, nil
}

// decodeWAL decodes the block, with its problems under "durability".
func decodeWAL(raw json.RawMessage) (*job.Durability, config.Problems) {
	var ps config.Problems
	if d := bytes.TrimSpace(raw); len(d) == 0 || bytes.Equal(d, []byte("null")) {
		return nil, nil
	}
	var b walBlock
	for _, p := range config.Decode(raw, &b) {
		ps.Add(config.Join("durability", p.Path), "%s", p.Reason)
	}
	if len(ps) > 0 {
		return nil, ps
	}
	if b.Enabled != nil && !*b.Enabled {
		return nil, nil
	}
	d := &job.Durability{Path: b.Path}
	sync := b.Sync
	if len(b.Backend) > 0 && string(b.Backend) != "null" {
		var be walBackend
		for _, p := range config.Decode(b.Backend, &be) {
			ps.Add(config.Join("durability.backend", p.Path), "%s", p.Reason)
		}
		if len(ps) > 0 {
			return nil, ps
		}
		if len(be.Sync) > 0 {
			sync = be.Sync
		}
		switch be.Type {
		case "local":
			if be.Path != "" {
				d.Path = be.Path
			}
		case "object_store":
			objectStore(d, &be, &ps)
		default:
			ps.Add("durability.backend.type", "unknown backend %q (local or object_store)", be.Type)
			return nil, ps
		}
	}
	if err := walSync(d, sync); err != nil {
		ps.Add("durability.sync", "%v", err)
	} else if d.Backend != nil && d.Sync == job.SyncAlways {
		ps.Add("durability.sync", "per_entry is not available with the object_store backend (one PUT a batch): use group_commit or {periodic: …}")
	}
	return d, ps
}

// objectStore fills in the object_store backend: node_id and s3.bucket
// are required, as in ArkFlow.
func objectStore(d *job.Durability, be *walBackend, ps *config.Problems) {
	if strings.TrimSpace(be.NodeID) == "" {
		ps.Add("durability.backend.node_id", "is required: it names this process's logs in the bucket and must stay the same across restarts")
	}
	if be.S3 == nil || strings.TrimSpace(be.S3.Bucket) == "" {
		ps.Add("durability.backend.s3.bucket", "is required")
		return
	}
	d.Backend = &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: be.NodeID, StreamID: be.StreamID, Prefix: be.Prefix,
		S3: &job.WALObjectStore{Bucket: be.S3.Bucket, Region: be.S3.Region, Endpoint: be.S3.Endpoint,
			AccessKeyID: be.S3.AccessKeyID, SecretAccessKey: be.S3.SecretAccessKey, AllowHTTP: be.S3.AllowHTTP}}
}

// walSync reads ArkFlow's sync policy: group_commit (the default),
// per_entry, or {periodic: DURATION}.
func walSync(d *job.Durability, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		d.Sync = job.SyncGroupCommit
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "group_commit":
			d.Sync = job.SyncGroupCommit
		case "per_entry":
			d.Sync = job.SyncAlways
		default:
			return fmt.Errorf("unknown sync policy %q (group_commit, per_entry or {periodic: 100ms})", s)
		}
		return nil
	}
	var p struct {
		Periodic *duration `json:"periodic"`
	}
	if ps := config.Decode(raw, &p); len(ps) > 0 || p.Periodic == nil {
		return fmt.Errorf("must be group_commit, per_entry or {periodic: 100ms}")
	}
	if *p.Periodic <= 0 {
		return fmt.Errorf("periodic: must be > 0")
	}
	d.Sync = job.SyncPeriodic
	d.SyncIntervalMS = max(1, p.Periodic.ms())
	return nil
}

// walTuned says whether a durability block's backend sets ArkFlow's
// object-store tuning keys.
func walTuned(raw json.RawMessage) bool {
	var b walBlock
	var be walBackend
	return json.Unmarshal(raw, &b) == nil && len(b.Backend) > 0 && json.Unmarshal(b.Backend, &be) == nil && be.tuned()
}
