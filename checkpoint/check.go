package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// CheckOptions configure Check. The zero value works.
type CheckOptions struct {
	// Connectors is where the spec's input and output types are found, as
	// arkflow.WithEnvironment gives a job. Default: the global registry,
	// which holds the built-in types and those of the connector packages
	// the program imports (connectors/kafka registers "kafka").
	Connectors *connectors.Environment
}

// RefusedError is the error Check returns when a start of the spec would
// refuse to restore the artifact, or could not use it. Nothing was
// changed: a start refuses before it touches the state.
type RefusedError struct {
	// Job, Kind and ID name the artifact asked about.
	Job  string
	Kind Kind
	ID   string
	// Reason is why, in the words the start would fail (or warn) with:
	// a downgrade or a state format change (which have no migration
	// path), another max_parallelism, other operators at the same job
	// version, a parallelism change of an operator keyed by its source's
	// partitioning, a savepoint that is missing or not Completed, or (for
	// a checkpoint) one a start would pass over for an older one.
	Reason string
}

// Error names the artifact and gives the reason.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("checkpoint: a start of job %q would not restore %s %q: %s", e.Job, e.Kind, e.ID, e.Reason)
}

// Check reports whether a start of spec restoring the savepoint (kind
// KindSavepoint, id its name: arkflow.WithSavepoint, arkflow run
// --from-savepoint) or the checkpoint (KindCheckpoint, id its id, as an
// Agent's recovery names one) from store would accept it. nil means it
// would; a *RefusedError says why it would not; any other error means
// Check could not tell (the spec does not build — its
// job.ValidationErrors —, or the store could not be read). store stands
// for the spec's own checkpoint.object_store_uri; no state object is read.
// The package doc ("Before an upgrade") says what is checked.
//
// ctx bounds reading the store.
func Check(ctx context.Context, store *Store, kind Kind, id string, spec *job.Spec, opts CheckOptions) error {
	switch {
	case store == nil:
		return errors.New("checkpoint: Check: store is nil")
	case spec == nil:
		return errors.New("checkpoint: Check: spec is nil")
	}
	k, id, err := ref(kind, id)
	if err != nil {
		return err
	}
	// The build decides where state and logs go from a data directory
	// when the spec gives none, and stops there: nothing is created.
	g, err := build.Build(spec, build.Env{DataDir: ".", Connectors: opts.Connectors})
	if err != nil {
		return fmt.Errorf("checkpoint: Check: the spec does not build: %w", err)
	}
	refused := func(reason string) error {
		return &RefusedError{Job: g.Spec.ID, Kind: kind, ID: id, Reason: reason}
	}
	if g.Spec.Checkpoint == nil {
		return refused("the spec has no checkpoint block, so a start restores nothing (add checkpoint: {object_store_uri: ...})")
	}
	ro := runtime.Options{}
	if k == ckptstore.KindSavepoint {
		ro.FromSavepoint = id
	} else {
		ro.FromCheckpoint = id
	}
	m, skipped, err := runtime.New(g, ro).CheckRestore(ctx, store.st)
	var why []string
	for _, s := range skipped {
		why = append(why, s.String())
	}
	withWhy := func(s string) string {
		if len(why) == 0 {
			return s
		}
		return s + " (" + strings.Join(why, "; ") + ")"
	}
	var rerr *runtime.RefusedError
	switch {
	case errors.As(err, &rerr):
		return refused(withWhy(rerr.Err.Error()))
	case err != nil:
		return fmt.Errorf("checkpoint: Check: %w", err)
	case m == nil:
		return refused(withWhy(fmt.Sprintf("%s %s is not usable, and there is no older checkpoint a start would restore instead: it would start without state", kind, id)))
	case string(m.Kind) != string(k) || (k == ckptstore.KindSavepoint && m.Name != id) || (k == ckptstore.KindCheckpoint && m.CheckpointID != id):
		return refused(withWhy(fmt.Sprintf("%s %s is not usable: a start would restore %s %s instead", kind, id, m.Kind, m.CheckpointID)))
	}
	return nil
}
