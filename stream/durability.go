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

// walBackend is the block's backend: local here.
type walBackend struct {
	Type string          `json:"type"`
	Path string          `json:"path"`
	Sync json.RawMessage `json:"sync"`
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
			if be.Type == "object_store" || strings.HasPrefix(p.Path, "type") {
				continue
			}
			ps.Add(config.Join("durability.backend", p.Path), "%s", p.Reason)
		}
		switch be.Type {
		case "local":
			if be.Path != "" {
				d.Path = be.Path
			}
			if len(be.Sync) > 0 {
				sync = be.Sync
			}
		case "object_store":
			ps.Add("durability.backend.type", "the object_store backend is not available in Stream configs yet: keep the log in a local path, or run a Job with a durability block whose backend is s3")
			return nil, ps
		default:
			ps.Add("durability.backend.type", "unknown backend %q (local or object_store)", be.Type)
			return nil, ps
		}
	}
	if err := walSync(d, sync); err != nil {
		ps.Add("durability.sync", "%v", err)
	}
	return d, ps
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
