package arkflowtest

import (
	"encoding/json"
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
)

// isolate points a copy of a job's spec at the harness's own places: its
// checkpoints go to store (a fresh temporary directory, or for Restore the
// snapshot's), and its state and write-ahead logs to their defaults under
// the harness's data directory (a fresh temporary one), whatever the spec
// names. So a harness never reads what another run of the job left (a
// checkpoint to restore, state, WAL entries to replay) and never writes
// where production would. A spec without a checkpoint block gets one,
// with no periodic checkpoints, and then, without a state block, memory
// state.
func isolate(s *job.Spec, store string) {
	if s.Checkpoint == nil {
		if s.State == nil {
			s.State = &job.State{Backend: job.BackendMemory}
		}
		s.Checkpoint = &job.Checkpoint{ObjectStoreURI: store, IntervalMS: int64(365 * 24 * time.Hour / time.Millisecond), Retention: 1}
	} else {
		s.Checkpoint.ObjectStoreURI = store
	}
	if s.State != nil {
		s.State.Path = ""
	}
	s.Durability = localWAL(s.Durability)
	for i := range s.Sources {
		s.Sources[i].Durability = localWAL(s.Sources[i].Durability)
	}
}

// localWAL returns a durability block (a spec's JSON) without the keys
// that say where the log is kept, path and backend: the log is then a
// local directory under the data directory. A block that does not decode
// is returned as it is, for the build to report with its field.
func localWAL(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return raw
	}
	_, p := keys["path"]
	_, b := keys["backend"]
	if !p && !b {
		return raw
	}
	delete(keys, "path")
	delete(keys, "backend")
	out, err := json.Marshal(keys)
	if err != nil {
		return raw
	}
	return out
}
