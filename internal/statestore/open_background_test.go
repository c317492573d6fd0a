package statestore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// setBeforeBackgroundOpen installs the background open's test hook for
// the test's duration. The hook is package-level and every background
// open calls it, so a test that sets it is not parallel.
func setBeforeBackgroundOpen(t *testing.T, fn func(dir string)) {
	t.Helper()
	testBeforeBackgroundOpen = fn
	t.Cleanup(func() { testBeforeBackgroundOpen = nil })
}

// A store opened with OpenInBackground on a new directory returns before
// Badger is open, and RestoreLayers downloads while Badger opens: the
// hook holds the open until a source has been opened, so a restore that
// waited for the open first would never finish. The restored store reads
// back what the source held, before and after a plain reopen.
func TestOpenInBackgroundRestoreOverlapsOpen(t *testing.T) {
	now, src, sc, data := layerFixture(t)
	want := kvScan(t, src, sc, now)
	downloading := make(chan struct{})
	var held bool
	setBeforeBackgroundOpen(t, func(string) {
		select {
		case <-downloading:
			held = true
		case <-time.After(30 * time.Second): // a deadlock guard, not a timing
		}
	})
	dir := filepath.Join(t.TempDir(), "state")
	b, err := Open(Options{Dir: dir, OpenInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	s := bytesSource(sc, data, objectCRC64(data))
	open := s.Open
	s.Open = func() (io.ReadCloser, error) {
		close(downloading)
		return open()
	}
	infos, err := b.(LayerRestorer).RestoreLayers([]RestoreSource{s}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("the restore did not open its source while Badger was opening")
	}
	if err := Ready(b); err != nil {
		t.Fatal(err)
	}
	if infos[0].Entries != int64(len(want)) || infos[0].Bytes != int64(len(data)) {
		t.Fatalf("restore info %+v, want %d entries of %d bytes", infos[0], len(want), len(data))
	}
	if got := kvScan(t, b, sc, now); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored\n%v\nwant\n%v", got, want)
	}
	if st, ok := BadgerStatsOf(b); !ok || st.Open <= 0 {
		t.Fatalf("open stats %+v", st)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDir(t, dir)
	defer b.Close()
	if got := kvScan(t, b, sc, now); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopening\n%v\nwant\n%v", got, want)
	}
}

// Every call waits for a background open: writes made right after Open
// are read back and survive Close and a reopen.
func TestOpenInBackgroundCallsWait(t *testing.T) {
	release := make(chan struct{})
	setBeforeBackgroundOpen(t, func(string) {
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
	})
	dir := t.TempDir() // exists, empty: new as well
	b, err := Open(Options{Dir: dir, OpenInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.(*badgerBackend).opened == nil {
		t.Fatal("an empty directory did not open in the background")
	}
	now := kvNow()
	k := Key{Job: "j", Operator: "a", Namespace: "ns", KeyGroup: 1, User: []byte("k")}
	done := make(chan error, 1)
	go func() { done <- b.Apply([]Mutation{kvPut(k, "v", 0)}) }()
	select {
	case err := <-done:
		t.Fatalf("Apply returned before Badger was open: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _, ok := kvGet(t, b, k, now); !ok || v != "v" {
		t.Fatalf("get: %q %v", v, ok)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDir(t, dir)
	defer b.Close()
	if v, _, ok := kvGet(t, b, k, now); !ok || v != "v" {
		t.Fatalf("after reopening: %q %v", v, ok)
	}
}

// A directory that holds a store opens before Open returns, whatever the
// option: its layers must be loaded (and strays removed) before a restore
// writes new ones.
func TestOpenInBackgroundExistingDirOpensAtOnce(t *testing.T) {
	setBeforeBackgroundOpen(t, func(string) { t.Error("an existing store opened in the background") })
	dir := t.TempDir()
	b := openDir(t, dir)
	now := kvNow()
	k := Key{Job: "j", Operator: "a", Namespace: "ns", KeyGroup: 1, User: []byte("k")}
	kvApply(t, b, kvPut(k, "v", 0))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{Dir: dir, OpenInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.(*badgerBackend).opened != nil {
		t.Fatal("opened in the background")
	}
	if v, _, ok := kvGet(t, b, k, now); !ok || v != "v" {
		t.Fatalf("get: %q %v", v, ok)
	}
}

// A background open that fails (here Badger finds a directory where its
// MANIFEST goes) fails every call, Ready and Close with its error, and
// releases the directory; a restore leaves no layer file behind.
func TestOpenInBackgroundFailure(t *testing.T) {
	now, _, sc, data := layerFixture(t)
	setBeforeBackgroundOpen(t, func(dir string) {
		if err := os.Mkdir(filepath.Join(dir, "MANIFEST"), 0o755); err != nil {
			t.Error(err)
		}
	})
	dir := filepath.Join(t.TempDir(), "state")
	b, err := Open(Options{Dir: dir, OpenInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	isOpenErr := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "opening badger in "+dir) {
			t.Fatalf("%s: %v, want the open's error", what, err)
		}
	}
	_, err = b.(LayerRestorer).RestoreLayers([]RestoreSource{bytesSource(sc, data, objectCRC64(data))}, now, nil)
	isOpenErr("RestoreLayers", err)
	if files := layerFiles(t, dir); len(files) != 0 {
		t.Fatalf("layer files left: %v", files)
	}
	isOpenErr("Ready", Ready(b))
	_, _, _, err = b.Get(Key{Job: "j", Operator: "a", Namespace: "ns", User: []byte("k")}, now)
	isOpenErr("Get", err)
	isOpenErr("Apply", b.Apply([]Mutation{kvPut(Key{Job: "j", Operator: "a", Namespace: "ns", User: []byte("k")}, "v", 0)}))
	isOpenErr("Close", b.Close())
	if err := b.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	release, err := lockDir(filepath.Join(dir, formatFileName))
	if err != nil {
		t.Fatalf("the directory is still locked: %v", err)
	}
	release()
}
