package blob

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MemStorage is a Storage in memory, for tests: it honours PutObject's
// conditions the way S3 does, and its ETags are the contents' MD5 (as
// S3's are for single-request PUTs). The zero value is empty and ready.
type MemStorage struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func memETag(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// ReadObject returns a copy of the object, or an error wrapping
// ErrNotExist.
func (m *MemStorage) ReadObject(_ context.Context, name string) ([]byte, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[name]
	if !ok {
		return nil, "", fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	return slices.Clone(b), memETag(b), nil
}

// PutObject stores a copy of data if opts' conditions hold, and otherwise
// returns an error wrapping ErrPreconditionFailed.
func (m *MemStorage) PutObject(_ context.Context, name string, data []byte, opts PutOptions) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.objs[name]
	if (opts.IfNoneMatch && ok) || (opts.IfMatch != "" && (!ok || memETag(cur) != opts.IfMatch)) {
		return "", fmt.Errorf("%s: %w", name, ErrPreconditionFailed)
	}
	if m.objs == nil {
		m.objs = map[string][]byte{}
	}
	m.objs[name] = slices.Clone(data)
	return memETag(data), nil
}

// List returns the names under prefix in ascending order.
func (m *MemStorage) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Delete removes the object; a missing one is not an error, as in S3.
func (m *MemStorage) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, name)
	return nil
}

// IsNotExist is the package's IsNotExist.
func (m *MemStorage) IsNotExist(err error) bool { return IsNotExist(err) }

var _ Storage = (*MemStorage)(nil)
