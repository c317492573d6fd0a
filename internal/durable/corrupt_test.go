package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// Unreadable cursor meta and an unreadable parallelism file are
// corruption, under the one marker.
func TestCorruptMetaMatchesErrCorrupt(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"{", "[1"} {
		if _, err := decodeMeta([]byte(b)); !errors.Is(err, walog.ErrCorrupt) {
			t.Errorf("decodeMeta(%q) = %v, want ErrCorrupt", b, err)
		}
	}
	if _, err := decodeMeta([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, parallelismFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := logParallelism(dir); !errors.Is(err, walog.ErrCorrupt) {
		t.Errorf("logParallelism = %v, want ErrCorrupt", err)
	}
}
