package checkpoint_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// The store's corruption errors are its own type; errors.As still finds
// the public *CorruptError in them, with the same key, reason and text.
func TestCorruptErrorAs(t *testing.T) {
	inner := &ckptstore.CorruptError{Key: "j/checkpoints/1/state/t.snap", Reason: "the object has 3 bytes, its manifest entry says 4"}
	err := fmt.Errorf("restoring: %w", inner)
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As finds no *checkpoint.CorruptError in %v", err)
	}
	if ce.Key != inner.Key || ce.Reason != inner.Reason || ce.Error() != inner.Error() {
		t.Fatalf("got %+v (%q), want the store's %+v (%q)", ce, ce, inner, inner)
	}
	if !errors.Is(err, checkpoint.ErrCorrupt) || !errors.Is(ce, checkpoint.ErrCorrupt) {
		t.Fatal("a corrupt object must match ErrCorrupt")
	}
	_, derr := ckptstore.DecodeManifest([]byte("{"))
	if !errors.As(derr, &ce) || ce.Err == nil {
		t.Fatalf("a manifest that does not decode: %v", derr)
	}
	var other *ckptstore.IncompatibleError
	if errors.As(err, &other) {
		t.Fatal("errors.As filled an unrelated type")
	}
	if !errors.Is(fmt.Errorf("get: %w", ckptstore.ErrNotFound), checkpoint.ErrNotFound) {
		t.Fatal("ErrNotFound must be the store's")
	}
}
