package ckpttest_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore/ckpttest"
)

// A FaultStore must stay usable wherever a ckptstore.Store is: this fails
// to compile if ckptstore.Store gains a method Store lacks.
var _ ckptstore.Store = (*ckpttest.FaultStore)(nil)

func openFile(t *testing.T) ckptstore.Store {
	t.Helper()
	s, err := ckptstore.OpenStore(context.Background(), "file://"+t.TempDir(), ckptstore.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s ckptstore.Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFaultStore checks the fault injector the checkpoint and runtime
// tests use: faults by operation and key, OpAny, Heal, call counts, and
// that a failed call does not reach the inner store.
func TestFaultStore(t *testing.T) {
	inner := openFile(t)
	f := ckpttest.NewFaultStore(inner)
	ctx := context.Background()
	if err := f.Put(ctx, "a/manifest.json", strings.NewReader("m"), 1); err != nil {
		t.Fatal(err)
	}
	f.FailKey(ckpttest.OpGet, "manifest.json", nil)
	_, err := f.Get(ctx, "a/manifest.json")
	if !errors.Is(err, ckpttest.ErrInjected) || !strings.Contains(err.Error(), "get "+inner.URI()+"/a/manifest.json") {
		t.Fatalf("Get = %v, want ErrInjected naming the key", err)
	}
	if _, err := f.List(ctx, ""); err != nil {
		t.Fatalf("List failed: %v", err)
	}
	boom := errors.New("boom")
	f.Fail(ckpttest.OpAny, boom)
	if _, err := f.List(ctx, ""); !errors.Is(err, boom) {
		t.Fatalf("List = %v, want boom", err)
	}
	if err := f.Put(ctx, "a/other", strings.NewReader("x"), 1); !errors.Is(err, boom) {
		t.Fatalf("Put = %v, want boom", err)
	}
	if _, err := inner.Get(ctx, "a/other"); !errors.Is(err, ckptstore.ErrNotFound) {
		t.Fatalf("a failed Put reached the inner store: %v", err)
	}
	f.Heal()
	if got := get(t, f, "a/manifest.json"); got != "m" {
		t.Fatalf("after Heal, Get = %q", got)
	}
	if n := f.Calls(ckpttest.OpGet); n != 2 {
		t.Fatalf("Calls(get) = %d, want 2", n)
	}
	if n := f.Calls(ckpttest.OpPut); n != 2 {
		t.Fatalf("Calls(put) = %d, want 2", n)
	}
	if f.URI() != inner.URI() {
		t.Fatalf("URI = %q, want %q", f.URI(), inner.URI())
	}
}
