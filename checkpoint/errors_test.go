package checkpoint_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// The store's corruption errors match the public ErrCorrupt, and its
// not-found errors the public ErrNotFound.
func TestStoreErrorsMatchThePublicMarkers(t *testing.T) {
	inner := &ckptstore.CorruptError{Key: "j/checkpoints/1/state/t.snap", Reason: "the object has 3 bytes, its manifest entry says 4"}
	err := fmt.Errorf("restoring: %w", inner)
	if !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatal("a corrupt object must match ErrCorrupt")
	}
	if _, derr := ckptstore.DecodeManifest([]byte("{")); !errors.Is(derr, checkpoint.ErrCorrupt) {
		t.Fatalf("a manifest that does not decode: %v", derr)
	}
	if errors.Is(fmt.Errorf("get: %w", ckptstore.ErrNotFound), checkpoint.ErrCorrupt) {
		t.Fatal("a missing object is not corruption")
	}
	if !errors.Is(fmt.Errorf("get: %w", ckptstore.ErrNotFound), checkpoint.ErrNotFound) {
		t.Fatal("ErrNotFound must be the store's")
	}
}
