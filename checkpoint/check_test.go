package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/job"
)

// startFrom starts spec from the artifact, as arkflow run --from-savepoint
// (or an Agent's recovery, for a checkpoint) would, and returns what the
// start restored, or its error.
func startFrom(t *testing.T, spec *job.Spec, kind checkpoint.Kind, id string) (string, error) {
	t.Helper()
	if kind != checkpoint.KindSavepoint {
		t.Fatal("only savepoints start through the public API")
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithSavepoint(id))
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	for j.Status() < arkflow.Running {
		select {
		case err := <-done:
			return "", err
		case <-time.After(5 * time.Millisecond):
		}
	}
	restored := j.Metrics().Checkpoints.Restored
	if err := j.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return restored, <-done
}

// Check says what a start does: each spec it accepts starts from the
// savepoint, each it refuses fails to start with the reason Check gave.
func TestCheckAgreesWithAStart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ckpt := takeArtifacts(t, specOf(t, dir, variant{}), "v1")
	takeArtifacts(t, specOf(t, dir, variant{version: 2}), "v2")
	st, err := checkpoint.Open(ctx, "file://"+dir, checkpoint.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		v         variant
		savepoint string
		refused   string // "" when a start accepts it
	}{
		{"same spec", variant{}, "v1", ""},
		{"upgrade", variant{version: 2}, "v1", ""},
		{"upgrade with another operator", variant{version: 2, extra: true}, "v1", ""},
		{"rescale", variant{par: 3}, "v1", ""},
		{"other operators at the same version", variant{extra: true}, "v1", "same job version but other operators (operators missing from it: f)"},
		{"state format change", variant{format: 2}, "v1", "a state format change has no migration path"},
		{"max_parallelism change", variant{maxPar: 64}, "v1", "was cut with max_parallelism 128, and this job has max_parallelism 64"},
		{"downgrade", variant{}, "v2", "a downgrade has no migration path"},
		{"missing savepoint", variant{}, "v9", `savepoint "v9" was not found or is not usable`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := specOf(t, dir, c.v)
			err := checkpoint.Check(ctx, st, checkpoint.KindSavepoint, c.savepoint, spec, checkpoint.CheckOptions{})
			restored, serr := startFrom(t, spec, checkpoint.KindSavepoint, c.savepoint)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if serr != nil || restored != "savepoint "+c.savepoint {
					t.Fatalf("the start: restored %q, %v", restored, serr)
				}
				return
			}
			var re *checkpoint.RefusedError
			if !errors.As(err, &re) || !strings.Contains(re.Reason, c.refused) || re.Job != "orders" || re.Kind != checkpoint.KindSavepoint || re.ID != c.savepoint {
				t.Fatalf("Check: %v; want a refusal saying %q", err, c.refused)
			}
			if serr == nil || !strings.Contains(serr.Error(), c.refused) {
				t.Fatalf("the start: %v; Check said %q", serr, re.Reason)
			}
		})
	}

	var re *checkpoint.RefusedError
	// A checkpoint by id; a spec without checkpoints; a spec that does not
	// build; bad arguments.
	if err := checkpoint.Check(ctx, st, checkpoint.KindCheckpoint, strings.TrimLeft(ckpt, "0"), specOf(t, dir, variant{}), checkpoint.CheckOptions{}); err != nil {
		t.Fatalf("checkpoint %s: %v", ckpt, err)
	}
	// A checkpoint that is not usable: a start restoring it by id (an
	// Agent's recovery) falls back to the one before it, which Check
	// reports as a refusal of the one asked for.
	list, err := st.List(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	newest := ""
	for _, in := range list {
		if in.Latest {
			newest = in.ID
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "orders", "checkpoints", newest, "manifest.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = checkpoint.Check(ctx, st, checkpoint.KindCheckpoint, newest, specOf(t, dir, variant{version: 2}), checkpoint.CheckOptions{})
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "a start would restore checkpoint "+ckpt+" instead") || !strings.Contains(re.Reason, "corrupt manifest") {
		t.Fatalf("a corrupt checkpoint: %v", err)
	}

	noCkpt := specOf(t, dir, variant{})
	noCkpt.Checkpoint = nil
	if err := checkpoint.Check(ctx, st, checkpoint.KindSavepoint, "v1", noCkpt, checkpoint.CheckOptions{}); !errors.As(err, &re) || !strings.Contains(re.Reason, "no checkpoint block") {
		t.Fatalf("a spec without checkpoints: %v", err)
	}
	broken := specOf(t, dir, variant{})
	broken.Sinks[0].OutputType = "nope"
	if err := checkpoint.Check(ctx, st, checkpoint.KindSavepoint, "v1", broken, checkpoint.CheckOptions{}); errors.As(err, &re) || len(job.AsValidationErrors(err)) == 0 {
		t.Fatalf("a spec that does not build: %v", err)
	}
	if err := checkpoint.Check(ctx, st, checkpoint.KindSavepoint, "v1", nil, checkpoint.CheckOptions{}); err == nil || !strings.Contains(err.Error(), "spec is nil") {
		t.Fatalf("nil spec: %v", err)
	}
	if err := checkpoint.Check(ctx, st, checkpoint.KindSavepoint, "../x", specOf(t, dir, variant{}), checkpoint.CheckOptions{}); err == nil || !strings.Contains(err.Error(), `savepoint name "../x"`) {
		t.Fatalf("bad name: %v", err)
	}
}
