package hub

import (
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
)

// TestCheckpointHealth: the detail's checkpoint health counts the failed
// checkpoints since the last completed one, ignores savepoints and pending
// rounds, and is absent before the first finished checkpoint.
func TestCheckpointHealth(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_700_000_000_000)
	cp := func(id, kind, status, err string) hubstore.Checkpoint {
		return hubstore.Checkpoint{CheckpointID: id, Kind: kind, Status: status, Error: err, UpdatedAt: at}
	}
	if h := checkpointHealth(nil); h != nil {
		t.Fatalf("no checkpoints: %+v", h)
	}
	if h := checkpointHealth([]hubstore.Checkpoint{cp("p", "checkpoint", "pending", "")}); h != nil {
		t.Fatalf("only a pending one: %+v", h)
	}
	h := checkpointHealth([]hubstore.Checkpoint{
		cp("c5", "checkpoint", "pending", ""),
		cp("c4", "checkpoint", "failed", "upload refused"),
		cp("s1", "savepoint", "failed", "savepoint error"),
		cp("c3", "checkpoint", "failed", "older error"),
		cp("c2", "checkpoint", "completed", ""),
		cp("c1", "checkpoint", "failed", "before the last success"),
	})
	if h.State != "degraded" || h.ConsecutiveFailures != 2 || h.LastError != "upload refused" ||
		h.LastCompletedCheckpointID != "c2" || h.LastCompletedAtMs != 1_700_000_000_000 {
		t.Fatalf("health: %+v", h)
	}
	h = checkpointHealth([]hubstore.Checkpoint{cp("c2", "checkpoint", "completed", ""), cp("c1", "checkpoint", "failed", "x")})
	if h.State != "healthy" || h.ConsecutiveFailures != 0 || h.LastError != "" || h.LastCompletedCheckpointID != "c2" {
		t.Fatalf("health: %+v", h)
	}
}
