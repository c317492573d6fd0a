package runtime

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// restoreCorrupt asks the one corruption marker, except for the local
// state directory, whose damage is not the checkpoint's fault; a snapshot
// a newer build wrote is not corrupt either (falling back past it would
// start the job on older state).
func TestRestoreCorruptUsesTheMarker(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("op-0: %w", statestore.ErrCorruptSnapshot), true},
		{fmt.Errorf("get: %w", &ckptstore.CorruptError{Key: "k", Reason: "size"}), true},
		{fmt.Errorf("get: %w", ckptstore.ErrNotFound), true},
		{fmt.Errorf("%w: dir: file x is missing", statestore.ErrCorrupt), false},
		{fmt.Errorf("op-0: %w", &statestore.RestoreError{Index: 1, Err: statestore.ErrSnapshotVersion}), false},
		{fmt.Errorf("get: %w", os.ErrPermission), false},
		{errors.New("boom"), false},
	}
	for _, c := range cases {
		if got := restoreCorrupt(c.err); got != c.want {
			t.Errorf("restoreCorrupt(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
