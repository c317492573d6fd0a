//go:build unix

package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockExcludesSecondOpener: a second Lock of the same file fails at
// once, within one process too, with an error naming the file; after
// release it succeeds.
func TestLockExcludesSecondOpener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("lock file not created: %v", err)
	}
	_, err = Lock(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "another writer") {
		t.Fatalf("second Lock's error %q does not name the file and the holder", msg)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = Lock(path)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

// TestLockExistingReadOnlyFile: Lock needs no write access to an existing
// file (state locks its FORMAT file).
func TestLockExistingReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "FORMAT")
	if err := os.WriteFile(path, []byte("{}\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if b, _ := os.ReadFile(path); string(b) != "{}\n" {
		t.Fatalf("Lock changed the file: %q", b)
	}
}

func TestLockMissingDir(t *testing.T) {
	_, err := Lock(filepath.Join(t.TempDir(), "missing", "LOCK"))
	if err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("Lock in a missing directory: %v", err)
	}
}
