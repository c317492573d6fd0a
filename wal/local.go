package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// LocalOptions configure a log in a local directory.
type LocalOptions struct {
	Options
	// SegmentBytes is the size at which the active segment is closed and
	// a new one started (default 32 MiB).
	SegmentBytes int64
	// Retain keeps segments the cursor has passed instead of deleting them
	// (for debugging; the directory then grows without bound).
	Retain bool
}

// OpenDir opens (creating if needed) the log in dir. One process at a time
// may have a directory open: a second opener gets an error naming the lock.
//
// Opening recovers what an earlier run left: a torn tail (a crash in the
// middle of a write) is cut off, keeping the intact prefix; damage anywhere
// else is a *CorruptError naming the segment and offset, and nothing is
// changed on disk.
func OpenDir(dir string, opts LocalOptions) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if err := opts.Options.withDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	unlock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, err
	}
	st := &localStorage{dir: dir, segBytes: opts.SegmentBytes, retain: opts.Retain, unlock: unlock}
	return open(st, opts.Options)
}

const (
	lockName    = "LOCK"
	cursorName  = "CURSOR"
	segSuffix   = ".wal"
	cursorMagic = "AFWALCUR"
)

type localStorage struct {
	dir      string
	segBytes int64
	retain   bool
	unlock   func() error

	// mu guards the segment list and the active file for writes; syncMu
	// is held by sync and by rotation (lock order: mu, then syncMu).
	mu     sync.Mutex
	syncMu sync.Mutex
	segs   []uint64 // first sequence of each segment, ascending
	active *os.File
	size   int64
}

func (s *localStorage) describe() string { return s.dir }

func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

func (s *localStorage) listSegments() ([]uint64, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var segs []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, segSuffix) {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if err != nil || first == 0 || segName(first) != name {
			return nil, fmt.Errorf("wal: %s: unexpected file %s", s.dir, name)
		}
		segs = append(segs, first)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	return segs, nil
}

func (s *localStorage) recover() (recovered, error) {
	var r recovered
	var err error
	r.cursor, r.meta, err = readCursor(filepath.Join(s.dir, cursorName))
	if err != nil {
		return r, err
	}
	segs, err := s.listSegments()
	if err != nil {
		return r, err
	}
	r.last = r.cursor
	expect := uint64(0) // first sequence the next segment must start with
	for i, first := range segs {
		lastSeg := i == len(segs)-1
		// Segments are deleted only once the persisted cursor covers them,
		// so the oldest one left starts at or before the cursor's successor.
		if i == 0 && first-1 > r.cursor {
			return r, &CorruptError{Segment: segName(first), Offset: 0,
				Reason: fmt.Sprintf("the oldest segment starts at sequence %d, but the cursor is %d: entries %d..%d are missing", first, r.cursor, r.cursor+1, first-1)}
		}
		// A gap is allowed only where the cursor covers it (acknowledged
		// entries that were never synced before a crash).
		if expect != 0 && first != expect && !(first > expect && first-1 <= r.cursor) {
			return r, &CorruptError{Segment: segName(first), Offset: 0,
				Reason: fmt.Sprintf("segment starts at sequence %d, but the previous one ends at %d", first, expect-1)}
		}
		if !lastSeg && segs[i+1]-1 <= r.cursor {
			// Wholly acknowledged and retained: not replayed, not read.
			expect = segs[i+1]
			continue
		}
		path := filepath.Join(s.dir, segName(first))
		b, err := os.ReadFile(path)
		if err != nil {
			return r, fmt.Errorf("wal: %w", err)
		}
		seg, err := DecodeSegment(segName(first), b, first)
		if err != nil {
			return r, err
		}
		if seg.Torn != "" {
			if !lastSeg {
				return r, &CorruptError{Segment: segName(first), Offset: int64(seg.Intact), Reason: seg.Torn + " in a segment that is not the newest"}
			}
			// Cut the torn tail so new entries follow whole ones.
			if err := truncateSync(path, int64(seg.Intact)); err != nil {
				return r, fmt.Errorf("wal: cutting the torn tail of %s: %w", path, err)
			}
		}
		expect = first + uint64(len(seg.Entries))
		if n := len(seg.Entries); n > 0 {
			r.last = max(r.last, seg.Entries[n-1].Seq)
		}
	}
	s.segs = segs
	next := max(r.last, r.cursor) + 1
	if len(segs) == 0 || (expect != 0 && expect < next) {
		// No segment yet, or the cursor is ahead of every stored entry
		// (acknowledged entries that were never synced): start a segment
		// at the next sequence so names keep matching contents.
		if err := s.create(next); err != nil {
			return r, err
		}
	} else {
		last := segs[len(segs)-1]
		f, err := os.OpenFile(filepath.Join(s.dir, segName(last)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return r, fmt.Errorf("wal: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return r, fmt.Errorf("wal: %w", err)
		}
		s.active, s.size = f, fi.Size()
	}
	return r, nil
}

// create starts a new active segment whose first entry is first.
func (s *localStorage) create(first uint64) error {
	path := filepath.Join(s.dir, segName(first))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("wal: %w", err)
	}
	if s.active != nil {
		s.active.Close()
	}
	s.active, s.size = f, 0
	if n := len(s.segs); n == 0 || s.segs[n-1] != first {
		s.segs = append(s.segs, first)
	}
	return nil
}

// write appends records, usually with one write(2). A segment is closed
// before the record that would take it past segBytes (a record larger
// than that gets a segment of its own), so a group of records may span
// two segments: then each part is one write(2).
func (s *localStorage) write(recs []byte, _, _ uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(recs) > 0 {
		n := len(recs)
		if s.size+int64(n) > s.segBytes {
			n = 0
			for n < len(recs) {
				size := RecordSize(int(binary.BigEndian.Uint32(recs[n+8:])))
				if s.size+int64(n+size) > s.segBytes && (s.size > 0 || n > 0) {
					break
				}
				n += size
			}
		}
		if n == 0 {
			// Rotate: the full segment is synced before it stops being
			// the one sync() looks at.
			s.syncMu.Lock()
			err := datasync(s.active)
			if err == nil {
				err = s.create(binary.BigEndian.Uint64(recs))
			}
			s.syncMu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		w, err := s.active.Write(recs[:n])
		s.size += int64(w)
		if err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (s *localStorage) sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.active == nil {
		return os.ErrClosed
	}
	return datasync(s.active)
}

func (s *localStorage) saveCursor(cursor uint64, meta []byte) error {
	if err := writeCursor(s.dir, cursor, meta); err != nil {
		return err
	}
	if s.retain {
		return nil
	}
	s.mu.Lock()
	var drop []uint64
	for len(s.segs) > 1 && s.segs[1]-1 <= cursor {
		drop = append(drop, s.segs[0])
		s.segs = s.segs[1:]
	}
	s.mu.Unlock()
	for _, first := range drop {
		if err := os.Remove(filepath.Join(s.dir, segName(first))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if len(drop) > 0 {
		return syncDir(s.dir)
	}
	return nil
}

func (s *localStorage) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	var err error
	if s.active != nil {
		err = s.active.Close()
		s.active = nil
	}
	return errors.Join(err, s.unlock())
}

func (s *localStorage) replay(after uint64) (iterator, error) {
	s.mu.Lock()
	segs := append([]uint64(nil), s.segs...)
	s.mu.Unlock()
	// Skip segments that end at or before after.
	for len(segs) > 1 && segs[1]-1 <= after {
		segs = segs[1:]
	}
	return &localIter{dir: s.dir, segs: segs, after: after}, nil
}

type localIter struct {
	dir   string
	segs  []uint64
	after uint64
	cur   []Entry
}

func (it *localIter) next() (Entry, error) {
	for len(it.cur) == 0 {
		if len(it.segs) == 0 {
			return Entry{}, io.EOF
		}
		first := it.segs[0]
		it.segs = it.segs[1:]
		b, err := os.ReadFile(filepath.Join(it.dir, segName(first)))
		if err != nil {
			return Entry{}, fmt.Errorf("wal: replay: %w", err)
		}
		seg, err := DecodeSegment(segName(first), b, first)
		if err != nil {
			return Entry{}, err
		}
		for len(seg.Entries) > 0 && seg.Entries[0].Seq <= it.after {
			seg.Entries = seg.Entries[1:]
		}
		it.cur = seg.Entries
	}
	e := it.cur[0]
	it.cur = it.cur[1:]
	return e, nil
}

func (it *localIter) close() error { it.cur, it.segs = nil, nil; return nil }

// Cursor file: magic | cursor u64 BE | meta length u32 BE | meta | crc32
// of everything before it. Replaced atomically (temp file, fsync, rename,
// directory fsync).
func writeCursor(dir string, cursor uint64, meta []byte) error {
	b := append([]byte(cursorMagic), make([]byte, 12)...)
	binary.BigEndian.PutUint64(b[len(cursorMagic):], cursor)
	binary.BigEndian.PutUint32(b[len(cursorMagic)+8:], uint32(len(meta)))
	b = append(b, meta...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	tmp := filepath.Join(dir, cursorName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := datasync(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, cursorName)); err != nil {
		return err
	}
	return syncDir(dir)
}

// DecodeCursor parses a cursor file's bytes.
func DecodeCursor(b []byte) (cursor uint64, meta []byte, err error) {
	const fixed = len(cursorMagic) + 12 + 4
	if len(b) < fixed || string(b[:len(cursorMagic)]) != cursorMagic {
		return 0, nil, errors.New("wal: cursor file has no valid header")
	}
	n := binary.BigEndian.Uint32(b[len(cursorMagic)+8:])
	if int64(n) != int64(len(b)-fixed) {
		return 0, nil, fmt.Errorf("wal: cursor file declares %d bytes of meta but holds %d", n, len(b)-fixed)
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, errors.New("wal: cursor file fails its checksum")
	}
	cursor = binary.BigEndian.Uint64(b[len(cursorMagic):])
	if n > 0 {
		meta = append([]byte(nil), b[len(cursorMagic)+12:len(b)-4]...)
	}
	return cursor, meta, nil
}

func readCursor(path string) (uint64, []byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("wal: %w", err)
	}
	c, meta, err := DecodeCursor(b)
	if err != nil {
		return 0, nil, fmt.Errorf("%w (%s)", err, path)
	}
	return c, meta, nil
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
