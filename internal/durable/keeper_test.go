package durable

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/job"
)

// keeperFake is a fake source that is also a Keeper: it records what the
// durable source tells it, and how many of the fake's Connects had
// happened at each Logged.
type keeperFake struct {
	*fakeSource

	mu     sync.Mutex
	path   string
	logged []int64 // the first offset of each batch, in call order
	early  []bool  // Logged came before the wrapped source connected
	saves  int
}

func (k *keeperFake) OpenKeeper(path string, _ *slog.Logger) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.path = path
	return nil
}

func (k *keeperFake) Logged(rec arrow.RecordBatch) {
	k.fakeSource.mu.Lock()
	connected := k.connects > 0
	k.fakeSource.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.logged = append(k.logged, firstOffset(rec))
	k.early = append(k.early, !connected)
}

func (k *keeperFake) SaveKept() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.saves++
}

// A Keeper learns of every entry the WAL holds after a restart, before
// the wrapped source connects; it saves before every cursor save (which
// may delete entries); its file is in the directory of the source's logs.
func TestKeeperSeesEveryEntryTheWALHolds(t *testing.T) {
	t.Parallel()
	data := uniform(4, 2) // offsets 0-1, 2-3, 4-5, 6-7
	cfg := &job.Durability{DrainTimeoutMS: 50}
	dir := t.TempDir()

	k := &keeperFake{fakeSource: newFake(data...)}
	s := openSource(t, cfg, k, dir)
	if want := filepath.Join(dir, "j", "wal", "src", keysFile); k.path != want {
		t.Fatalf("OpenKeeper path %q, want %q", k.path, want)
	}
	connect(t, s)
	if len(k.logged) != 0 {
		t.Fatalf("a new WAL's Connect logged %v", k.logged)
	}
	// Two acknowledged, two not: the cursor passes the first two.
	for i, sp := range data {
		b := read(t, s, sp)
		if i < 2 {
			b.Ack(nil)
		}
	}
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	saves := k.saves
	k.mu.Unlock()
	if saves == 0 {
		t.Fatal("the cursor was saved without SaveKept")
	}
	closeAll(t, s, nil) // as a crash would leave it: two entries unacknowledged

	k2 := &keeperFake{fakeSource: newFake(data...)}
	s2 := openSource(t, cfg, k2, dir)
	connect(t, s2)
	if !slices.Equal(k2.logged, []int64{4, 6}) || slices.Contains(k2.early, false) {
		t.Fatalf("after the restart Logged the entries at %v (before connecting: %v), want 4 and 6, before", k2.logged, k2.early)
	}
	closeAll(t, s2, nil)
}

// unrewindableKeeper is a keeperFake whose input cannot be read again.
type unrewindableKeeper struct{ *keeperFake }

func (unrewindableKeeper) Unrewindable() {}

// A held log (checkpoints of an unrewindable source) hands the Keeper its
// entries from the floor, below the cursor too.
func TestKeeperSeesHeldEntries(t *testing.T) {
	t.Parallel()
	data := uniform(3, 2)
	cfg := &job.Durability{DrainTimeoutMS: 50}
	dir := t.TempDir()
	open := func(k *keeperFake) *Source {
		s, err := Open(context.Background(), cfg, unrewindableKeeper{k}, dir, info(), "src-0", Job{Checkpoints: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	k := &keeperFake{fakeSource: newFake(data...)}
	s := open(k)
	connect(t, s)
	for _, sp := range data {
		read(t, s, sp).Ack(nil)
	}
	if err := s.Log().Flush(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, s, nil)

	k2 := &keeperFake{fakeSource: newFake(data...)}
	s2 := open(k2)
	connect(t, s2)
	if !slices.Equal(k2.logged, []int64{0, 2, 4}) {
		t.Fatalf("a held log Logged the entries at %v, want every entry it keeps: 0, 2, 4", k2.logged)
	}
	closeAll(t, s2, nil)
}

// Only the local backend keeps a Keeper's file: the object store is
// refused, naming why.
func TestKeeperRefusesTheObjectStore(t *testing.T) {
	cfg := &job.Durability{Backend: &job.WALBackend{Type: job.WALBackendObjectStore}}
	_, err := Open(context.Background(), cfg, &keeperFake{fakeSource: newFake()}, t.TempDir(), info(), "src-0", Job{})
	if !errors.Is(err, errKeeperObjectStore) || !strings.Contains(err.Error(), "src-0") {
		t.Fatalf("Open of a Keeper on the object store: %v", err)
	}
}

// A redistribution to another parallelism keeps the Keeper's file.
func TestReshardCarriesTheKeysFile(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{DrainTimeoutMS: 50}
	dir := t.TempDir()
	s := openSource(t, cfg, newFake(uniform(2, 2)...), dir)
	connect(t, s)
	read(t, s, span{0, 0, 2})
	closeAll(t, s, nil)
	src := filepath.Dir(walDir(dir))
	if err := writeParallelism(src, 1); err != nil {
		t.Fatal(err)
	}
	want := []byte("the keeper's bytes")
	if err := os.WriteFile(filepath.Join(src, keysFile), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Reshard(context.Background(), cfg, dir, "j", "src", 3, nil); err != nil {
		t.Fatal(err)
	}
	if n, _, err := logParallelism(src); err != nil || n != 3 {
		t.Fatalf("after the redistribution: %d logs, %v; want 3", n, err)
	}
	got, err := os.ReadFile(filepath.Join(src, keysFile))
	if err != nil || string(got) != string(want) {
		t.Fatalf("the keys file after the redistribution: %q, %v; want %q", got, err, want)
	}
}
