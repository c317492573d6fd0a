package ckpttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Operations a FaultStore can fail.
const (
	OpPut    = "put"
	OpCreate = "create"
	OpGet    = "get"
	OpList   = "list"
	OpDelete = "delete"
	// OpAny matches every operation.
	OpAny = "*"
)

// ErrInjected is the error a FaultStore returns for a fault armed with a
// nil error.
var ErrInjected = errors.New("ckpttest: injected fault (store unavailable)")

// Store is the method set of ckptstore.Store, repeated here so that this
// package need not import checkpoint (whose own tests use it). Every
// ckptstore.Store is a Store, and a *FaultStore is a ckptstore.Store.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	Create(ctx context.Context, key string, r io.Reader, size int64) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	List(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, key string) error
	URI() string
}

// FaultStore wraps a store and fails chosen operations on demand, to
// simulate an unavailable or misbehaving object store in tests (of
// checkpoint and of the runtime that drives checkpoints). A failed
// operation does not reach the inner store and returns an error shaped
// like the store's own ("checkpoint: put <uri>/<key>: …") that wraps the
// armed error. It is safe for concurrent use.
type FaultStore struct {
	inner Store

	mu     sync.Mutex
	faults []fault
	calls  map[string]int
}

type fault struct {
	op, keyContains string
	err             error
}

// NewFaultStore wraps inner, usually a ckptstore.Store; no fault is armed.
func NewFaultStore(inner Store) *FaultStore {
	return &FaultStore{inner: inner, calls: map[string]int{}}
}

// Fail makes every later call of op (OpPut, OpCreate, OpGet, OpList,
// OpDelete or OpAny) fail with err (ErrInjected if nil), until Heal.
func (f *FaultStore) Fail(op string, err error) { f.FailKey(op, "", err) }

// FailKey is Fail restricted to keys (or, for List, prefixes) containing
// keyContains, e.g. "manifest.json" or "/LATEST".
func (f *FaultStore) FailKey(op, keyContains string, err error) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	f.faults = append(f.faults, fault{op: op, keyContains: keyContains, err: err})
	f.mu.Unlock()
}

// Heal disarms every fault.
func (f *FaultStore) Heal() {
	f.mu.Lock()
	f.faults = nil
	f.mu.Unlock()
}

// Calls returns how many calls of op were made (failed ones included).
func (f *FaultStore) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *FaultStore) check(op, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	for _, x := range f.faults {
		if (x.op == op || x.op == OpAny) && strings.Contains(key, x.keyContains) {
			return fmt.Errorf("checkpoint: %s %s/%s: %w", op, f.inner.URI(), key, x.err)
		}
	}
	return nil
}

// Put fails with an armed OpPut fault or calls the inner Put.
func (f *FaultStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := f.check(OpPut, key); err != nil {
		return err
	}
	return f.inner.Put(ctx, key, r, size)
}

// Create fails with an armed OpCreate fault or calls the inner Create.
func (f *FaultStore) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := f.check(OpCreate, key); err != nil {
		return err
	}
	return f.inner.Create(ctx, key, r, size)
}

// Get fails with an armed OpGet fault or calls the inner Get.
func (f *FaultStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := f.check(OpGet, key); err != nil {
		return nil, err
	}
	return f.inner.Get(ctx, key)
}

// List fails with an armed OpList fault (matched against prefix) or calls
// the inner List.
func (f *FaultStore) List(ctx context.Context, prefix string) ([]string, error) {
	if err := f.check(OpList, prefix); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}

// Delete fails with an armed OpDelete fault or calls the inner Delete.
func (f *FaultStore) Delete(ctx context.Context, key string) error {
	if err := f.check(OpDelete, key); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

// URI is the inner store's.
func (f *FaultStore) URI() string { return f.inner.URI() }
