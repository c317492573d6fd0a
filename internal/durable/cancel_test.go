package durable

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// cancelOnErr is a context that cancels itself at the n-th call of Err:
// a test can so cancel partway through a loop that checks it, without
// timing.
type cancelOnErr struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int32
}

func cancelAtErr(n int32) *cancelOnErr {
	ctx, cancel := context.WithCancel(context.Background())
	c := &cancelOnErr{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *cancelOnErr) Err() error {
	if c.left.Add(-1) == 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// A cancelled run opens no WAL: Open returns the context's error and
// creates nothing on disk.
func TestOpenWithACancelledContextOpensNothing(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{Sync: "always"}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src, err := Open(ctx, cfg, newFake(), dir, infoOf(0, 1), "src-0", Job{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v, want context.Canceled", err)
	}
	if src != nil {
		t.Fatal("Open with a cancelled context returned a source")
	}
	d, err := Dir(cfg, dir, "j", "src", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the WAL directory was created: %v", err)
	}
}

// A cancelled run stops a redistribution: cancelled before it starts,
// Reshard touches nothing; cancelled between entries, it returns with the
// new logs unmarked, the old ones in place, and the next Reshard redoes
// it whole.
func TestReshardStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 20}
	dir := t.TempDir()
	left := writeLogs(t, cfg, dir, 2, partitionSpans(4, 3, 5), 1)
	walDir := filepath.Join(dir, "j", "wal", "src")
	staging := walDir + "~rescale"
	lg := slog.New(slog.DiscardHandler)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Reshard(ctx, cfg, dir, "j", "src", 3, lg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reshard with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reshard with a cancelled context wrote a staging directory: %v", err)
	}

	// The first Err is Reshard's own check; the third comes once the new
	// logs exist, as the entries move.
	if err := Reshard(cancelAtErr(3), cfg, dir, "j", "src", 3, lg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reshard cancelled partway: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(staging); err != nil {
		t.Fatalf("Reshard cancelled partway left no staging directory (did it stop before moving an entry?): %v", err)
	}
	if _, err := os.Stat(filepath.Join(staging, parallelismFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Reshard cancelled partway marked its new logs whole: %v", err)
	}
	if got, _, _ := logParallelism(walDir); got != 2 {
		t.Fatalf("after a cancelled Reshard the logs are laid out for %d subtasks, want the old 2", got)
	}

	if err := Reshard(context.Background(), cfg, dir, "j", "src", 3, lg); err != nil {
		t.Fatal(err)
	}
	rows, _ := replayAll(t, cfg, dir, 3)
	for p, sps := range left {
		if got, want := rows[int(p)%3][p], offsetsOf(sps); !reflect.DeepEqual(got, want) {
			t.Errorf("partition %d replayed %v after the redone Reshard, want %v", p, got, want)
		}
	}
}
