package fsutil

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	for _, want := range [][]byte{[]byte("first"), []byte("second, longer"), nil} {
		if err := WriteFile(dir, "F", want); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "F"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "F"+TempSuffix)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("temporary file left behind: %v", err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "F"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^FileMode != 0 {
		t.Fatalf("mode %v is wider than %v", perm, FileMode)
	}
}

// TestWriteFileOverwritesLeftoverTemp: a crash between creating the
// temporary file and renaming it leaves one; the next write must not be
// disturbed by it, nor leave it.
func TestWriteFileOverwritesLeftoverTemp(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "F"+TempSuffix), bytes.Repeat([]byte("torn"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "F", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "F")); string(got) != "ok" {
		t.Fatalf("read %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "F"+TempSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// TestWriteFileFailureKeepsOld: when the rename fails (here the target is
// a non-empty directory), the target is unchanged and the temporary file
// is gone.
func TestWriteFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "F")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dir, "F", []byte("new")); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target changed: %v, %v", fi, err)
	}
	if _, err := os.Stat(target + TempSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind after a failure: %v", err)
	}
	if err := WriteFile(filepath.Join(dir, "missing"), "F", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v", err)
	}
}

// TestWriteFileNeverPartial rewrites a file with contents of different
// sizes while readers read it: every read sees one whole version.
func TestWriteFileNeverPartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "F")
	version := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("v%d;", i)), 1+i%7*500) }
	// valid reports whether b is exactly one version: its first unit
	// "v<i>;" names the version, which must then match whole.
	valid := func(b []byte) bool {
		j := bytes.IndexByte(b, ';')
		if j < 0 {
			return false
		}
		var n int
		if _, err := fmt.Sscanf(string(b[:j+1]), "v%d;", &n); err != nil {
			return false
		}
		return bytes.Equal(b, version(n))
	}
	if err := WriteFile(dir, "F", version(0)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(path)
				if err != nil {
					errc <- fmt.Errorf("read: %w", err) // the name must always exist
					return
				}
				if !valid(b) {
					errc <- fmt.Errorf("partial or mixed content: %d bytes, starting %.20q", len(b), b)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := 1; i < 300; i++ {
		if err := WriteFile(dir, "F", version(i)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read happened")
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v", err)
	}
}

func TestMkdirAllSync(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAllSync(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("stat: %v, %v", fi, err)
	}
	if err := MkdirAllSync(dir); err != nil {
		t.Fatalf("again: %v", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllSync(file); err == nil {
		t.Fatal("MkdirAllSync over a file succeeded")
	}
	if err := MkdirAllSync(filepath.Join(file, "sub")); err == nil {
		t.Fatal("MkdirAllSync under a file succeeded")
	}
}
