package ckptstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

// fileStore keeps objects as files under root.
type fileStore struct {
	root string // absolute, cleaned
	uri  string
}

func openFileStore(uri string, u *url.URL) (*fileStore, error) {
	root, err := fileRoot(uri, u)
	if err != nil {
		return nil, err
	}
	if err := fsutil.MkdirAllSync(root); err != nil {
		return nil, fmt.Errorf("checkpoint: object store %q: creating the directory: %w", uri, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("checkpoint: object store %q: %w", uri, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint: object store %q: %s is not a directory", uri, root)
	}
	return &fileStore{root: root, uri: "file://" + filepath.ToSlash(root)}, nil
}

// fileRoot checks a file:// URI and returns its directory.
func fileRoot(uri string, u *url.URL) (string, error) {
	if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return "", fmt.Errorf("checkpoint: object store URI %q: a file URI needs an absolute path, file:///absolute/dir (the part after file:// is read as a host)", uri)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("checkpoint: object store URI %q: a file URI takes no query or fragment", uri)
	}
	p := u.Path
	if p == "" || !filepath.IsAbs(filepath.FromSlash(p)) {
		return "", fmt.Errorf("checkpoint: object store URI %q: the path must be absolute (file:///absolute/dir)", uri)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("checkpoint: object store URI %q: the path must not contain '..'", uri)
		}
	}
	return filepath.Clean(filepath.FromSlash(p)), nil
}

func (s *fileStore) URI() string { return s.uri }

func (s *fileStore) path(key string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("checkpoint: %s: %w", s.uri, err)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

func (s *fileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, key, r, size, false)
}

func (s *fileStore) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("checkpoint: create %s/%s: the size must be known", s.uri, key)
	}
	return s.write(ctx, key, r, size, true)
}

// write stages the bytes in a temporary file in the target's directory,
// fsyncs it and moves it into place: by rename (replacing) or, for
// exclusive, by link(2), which fails if the target exists. The directory
// is fsynced afterwards, so the new name survives a crash.
//
// It is not fsutil.WriteFile: it streams from a reader, needs the
// exclusive form, and uses a random temporary name (tmpPrefix), since
// unlike a WAL or state directory an object store may have several
// writers of one key at once.
func (s *fileStore) write(ctx context.Context, key string, r io.Reader, size int64, exclusive bool) error {
	target, err := s.path(key)
	if err != nil {
		return err
	}
	op := "put"
	if exclusive {
		op = "create"
	}
	wrap := func(err error) error { return fmt.Errorf("checkpoint: %s %s/%s: %w", op, s.uri, key, err) }
	dir := filepath.Dir(target)
	var f *os.File
	// A concurrent Delete may remove an empty parent directory between
	// creating it and creating the file in it; try again then.
	for attempt := 0; ; attempt++ {
		if err := fsutil.MkdirAllSync(dir); err != nil {
			return wrap(err)
		}
		f, err = os.CreateTemp(dir, tmpPrefix+"*")
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return wrap(err)
		}
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err != nil {
		return wrap(err)
	}
	if size >= 0 && n != size {
		return wrap(fmt.Errorf("the reader gave %d bytes, not the %d announced", n, size))
	}
	if err := f.Sync(); err != nil {
		return wrap(err)
	}
	if err := f.Close(); err != nil {
		return wrap(err)
	}
	if exclusive {
		err = os.Link(tmp, target)
		if errors.Is(err, fs.ErrExist) {
			return wrap(ErrExists)
		}
		if err != nil && !isLinkUnsupported(err) {
			return wrap(err)
		}
		if err == nil {
			os.Remove(tmp)
		} else {
			// No hard links on this file system: check, then rename. Not
			// atomic against another process creating the same key, which
			// the catalog's single-writer rule excludes anyway.
			if _, serr := os.Lstat(target); serr == nil {
				return wrap(ErrExists)
			}
			if err := os.Rename(tmp, target); err != nil {
				return wrap(err)
			}
		}
	} else if err := os.Rename(tmp, target); err != nil {
		return wrap(err)
	}
	done = true
	if err := fsutil.SyncDir(dir); err != nil {
		return wrap(err)
	}
	return nil
}

func isLinkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EMLINK)
}

func (s *fileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: get %s/%s: %w", s.uri, key, err)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("checkpoint: get %s/%s: %w", s.uri, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: get %s/%s: %w", s.uri, key, err)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("checkpoint: get %s/%s: %w (it is a directory)", s.uri, key, ErrNotFound)
	}
	return f, nil
}

func (s *fileStore) List(ctx context.Context, prefix string) ([]string, error) {
	if strings.ContainsAny(prefix, "\x00\\") {
		return nil, fmt.Errorf("checkpoint: list %s/%s: the prefix contains a NUL or a backslash", s.uri, prefix)
	}
	// Walk the deepest directory the prefix names in full, then filter.
	dirKey := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey = prefix[:i]
	}
	for _, seg := range strings.Split(dirKey, "/") {
		if seg == ".." {
			return nil, fmt.Errorf("checkpoint: list %s/%s: the prefix must not contain '..'", s.uri, prefix)
		}
	}
	start := filepath.Join(s.root, filepath.FromSlash(dirKey))
	var keys []string
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil // a write in progress, or left by a crash
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s/%s: %w", s.uri, prefix, err)
	}
	sort.Strings(keys)
	return keys, nil
}

// Delete removes the file, fsyncs its directory, then removes the
// directories the removal left empty (up to the root), so that retention
// leaves no empty directories behind.
func (s *fileStore) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: delete %s/%s: %w", s.uri, key, err)
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: delete %s/%s: %w", s.uri, key, err)
	}
	dir := filepath.Dir(p)
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: delete %s/%s: %w", s.uri, key, err)
	}
	for k := path.Dir(key); k != "."; k = path.Dir(k) {
		d := filepath.Join(s.root, filepath.FromSlash(k))
		if os.Remove(d) != nil {
			break // not empty (or already gone)
		}
		fsutil.SyncDir(filepath.Dir(d))
	}
	return nil
}
