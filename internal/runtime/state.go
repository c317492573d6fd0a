package runtime

// This file holds the opening of the job's state backend: the spec's state
// block (Badger in a directory, possibly opened in the background while a
// checkpoint is chosen) or an in-memory store, and the job name state keys
// are stored under.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// openState opens the job's state backend: the spec's state block, or an
// in-memory store when it has none (state then lives as long as the run).
// Badger needs a directory: state.path, or the runtime's data directory.
func (r *Runtime) openState() (statestore.Backend, error) { return r.openStateIn(false) }

// openStateIn is openState; background opens a new directory's Badger in
// the background (statestore.Options.OpenInBackground).
func (r *Runtime) openStateIn(background bool) (statestore.Backend, error) {
	s := r.g.Spec.State
	if s == nil || s.Backend == job.BackendMemory {
		return statestore.NewMemory(), nil
	}
	dir, err := r.stateDirPath()
	if err != nil {
		return nil, err
	}
	st, err := statestore.Open(statestore.Options{Backend: s.Backend, Dir: dir, FormatVersion: s.FormatVersion, Logger: r.log, OpenInBackground: background})
	if err != nil {
		return nil, fmt.Errorf("opening state: %w", err)
	}
	r.stateDir = dir
	return st, nil
}

// stateDirPath is the directory of the job's Badger store.
func (r *Runtime) stateDirPath() (string, error) {
	if dir := r.g.Spec.State.Path; dir != "" {
		return dir, nil
	}
	if r.opts.DataDir == "" {
		return "", fmt.Errorf("opening state: the spec's state block has no path and no data directory was given (set state.path, or arkflow.WithDataDir / arkflow run --data-dir)")
	}
	return filepath.Join(r.opts.DataDir, r.g.Spec.ID, "state"), nil
}

// openedState is the outcome of openNewStateAsync.
type openedState struct {
	st  statestore.Backend
	dir string
	err error
}

// openNewStateAsync opens the job's Badger store in the background when
// its directory does not exist, and returns where the outcome will be
// sent; nil (open it later) otherwise.
func (r *Runtime) openNewStateAsync() <-chan openedState {
	s := r.g.Spec.State
	if s == nil || s.Backend == job.BackendMemory {
		return nil
	}
	dir, err := r.stateDirPath()
	if err != nil {
		return nil // openState reports it
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out := make(chan openedState, 1)
	go func() {
		st, err := r.openStateIn(true)
		out <- openedState{st: st, dir: dir, err: err}
	}()
	return out
}

// stateJob is the job name state keys are stored under: the state
// block's namespace when set (so versions of a job can share state), else
// the job ID.
func stateJob(s *job.Spec) string {
	if s.State != nil && s.State.Namespace != "" {
		return s.State.Namespace
	}
	return s.ID
}
