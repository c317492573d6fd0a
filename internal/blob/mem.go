package blob

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// ReadRange returns a reader of a copy of the range.
func (m *MemStorage) ReadRange(_ context.Context, name string, off, n int64) (io.ReadCloser, ObjectInfo, error) {
	if n == 0 || off < 0 {
		return nil, ObjectInfo{}, fmt.Errorf("blob: read %s: bad range (%d, %d)", name, off, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[name]
	if !ok {
		return nil, ObjectInfo{}, fmt.Errorf("%s: %w", name, ErrNotExist)
	}
	size := int64(len(b))
	if off > 0 && off >= size {
		return nil, ObjectInfo{}, fmt.Errorf("%s: %w", name, ErrInvalidRange)
	}
	end := size
	if n > 0 && off+n < size {
		end = off + n
	}
	return io.NopCloser(bytes.NewReader(slices.Clone(b[off:end]))), ObjectInfo{ETag: memETag(b), Size: size}, nil
}

// CreateObject returns a writer that keeps the object in memory until
// Close stores it (unless ctx is done by then).
func (m *MemStorage) CreateObject(ctx context.Context, name string) (io.WriteCloser, error) {
	return &memWriter{m: m, ctx: ctx, name: name}, nil
}

type memWriter struct {
	m    *MemStorage
	ctx  context.Context
	name string
	buf  bytes.Buffer
	done bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("blob: write after Close")
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

func (w *memWriter) Close() error {
	if w.done {
		return errors.New("blob: Close called twice")
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		return err
	}
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.objs == nil {
		w.m.objs = map[string][]byte{}
	}
	w.m.objs[w.name] = slices.Clone(w.buf.Bytes())
	return nil
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
