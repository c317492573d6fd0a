package walog

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

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
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
	// NoRecycle deletes the segments the cursor has passed instead of
	// keeping up to two for reuse. By default the next segment overwrites
	// a passed one in place (renamed to its new name): writing over
	// blocks a file already has lets fdatasync flush data without the
	// file system's metadata commit that appending needs, which roughly
	// doubles the synced write bandwidth on ext4 (RocksDB's
	// recycle_log_file_num). A recycled file keeps the old records past
	// the new ones until they are overwritten; recovery reads the log up
	// to the first record that does not continue it (DecodeRecycledSegment).
	NoRecycle bool
}

// maxRecycled is how many passed segments are kept for reuse.
const maxRecycled = 2

// recyclePrefix names a passed segment kept for reuse.
const recyclePrefix = "recycle-"

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
	unlock, err := fsutil.Lock(filepath.Join(dir, lockName))
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("wal: %w (only one process may open a WAL directory)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	st := &localStorage{dir: dir, segBytes: opts.SegmentBytes, retain: opts.Retain, recycle: !opts.NoRecycle && !opts.Retain, unlock: unlock}
	return open(st, opts.Options)
}

const (
	lockName    = "LOCK"
	segSuffix   = ".wal"
	cursorMagic = "AFWALCS1"
)

type localStorage struct {
	dir      string
	segBytes int64
	retain   bool
	recycle  bool
	unlock   func() error

	// mu guards the segment list and the active file for writes; syncMu
	// is held by sync and by rotation (lock order: mu, then syncMu).
	mu     sync.Mutex
	syncMu sync.Mutex
	segs   []uint64 // first sequence of each segment, ascending
	active *os.File
	size   int64    // of the active segment's entries: where the next write goes
	pool   []string // passed segments kept for reuse (names in dir), under mu

	cursor cursorSlots // used by recover and saveCursor only
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
	s.cursor.dir = s.dir
	r.cursor, r.meta, err = s.cursor.read()
	if err != nil {
		return r, err
	}
	segs, err := s.listSegments()
	if err != nil {
		return r, err
	}
	if err := s.findPool(); err != nil {
		return r, err
	}
	r.last = r.cursor
	expect, err := s.scanSegments(segs, &r)
	if err != nil {
		return r, err
	}
	s.segs = segs
	if err := s.openActive(segs, max(r.last, r.cursor)+1, expect); err != nil {
		return r, err
	}
	// Segments wholly at or below the cursor may be stored still (kept
	// under Options.Hold, or not deleted yet): the oldest segment starts
	// with the oldest entry stored.
	r.oldest = s.segs[0]
	return r, nil
}

// scanSegments checks the segments (first sequences, in order) against
// the cursor in r and each other: the oldest starts at or before the
// cursor's successor, each starts where the previous one's entries end
// (a gap only where the cursor covers it), and only the newest may be
// torn, whose tail is cut off. Segments wholly acknowledged are not read.
// It raises r.last to the highest sequence stored and returns the first
// sequence a next segment would start with (0 when none was read).
func (s *localStorage) scanSegments(segs []uint64, r *recovered) (expect uint64, err error) {
	var prevTorn *CorruptError // where the previous segment's entries ended early
	for i, first := range segs {
		lastSeg := i == len(segs)-1
		// Segments are deleted only once the persisted cursor covers them,
		// so the oldest one left starts at or before the cursor's successor.
		if i == 0 && first-1 > r.cursor {
			return 0, &CorruptError{Segment: segName(first), Offset: 0,
				Reason: fmt.Sprintf("the oldest segment starts at sequence %d, but the cursor is %d: entries %d..%d are missing", first, r.cursor, r.cursor+1, first-1)}
		}
		// A gap is allowed only where the cursor covers it (acknowledged
		// entries that were never synced before a crash).
		if expect != 0 && first != expect && !(first > expect && first-1 <= r.cursor) {
			if prevTorn != nil {
				prevTorn.Reason += fmt.Sprintf(" in a segment that is not the newest (the next one starts at sequence %d, not %d)", first, expect)
				return 0, prevTorn
			}
			return 0, &CorruptError{Segment: segName(first), Offset: 0,
				Reason: fmt.Sprintf("segment starts at sequence %d, but the previous one ends at %d", first, expect-1)}
		}
		prevTorn = nil
		if !lastSeg && segs[i+1]-1 <= r.cursor {
			// Wholly acknowledged and retained: not replayed, not read.
			expect = segs[i+1]
			continue
		}
		path := filepath.Join(s.dir, segName(first))
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("wal: %w", err)
		}
		seg, err := DecodeRecycledSegment(segName(first), b, first)
		if err != nil {
			return 0, err
		}
		if seg.Torn != "" {
			// A segment other than the newest ends where its entries
			// end; in a recycled file the previous records follow (the
			// next segment must then start right after it: checked
			// above, on the next iteration).
			if !lastSeg {
				prevTorn = &CorruptError{Segment: segName(first), Offset: int64(seg.Intact), Reason: seg.Torn}
				expect = first + uint64(len(seg.Entries))
				if n := len(seg.Entries); n > 0 {
					r.last = max(r.last, seg.Entries[n-1].Seq)
				}
				continue
			}
			// Cut the torn tail so new entries follow whole ones.
			if err := truncateSync(path, int64(seg.Intact)); err != nil {
				return 0, fmt.Errorf("wal: cutting the torn tail of %s: %w", path, err)
			}
		}
		expect = first + uint64(len(seg.Entries))
		if n := len(seg.Entries); n > 0 {
			r.last = max(r.last, seg.Entries[n-1].Seq)
		}
	}
	return expect, nil
}

// openActive makes the newest segment the active one, open for appending;
// with no segment yet, or when next (the sequence after everything stored
// or acknowledged) is past the end of the stored entries (expect), it
// starts a segment at next instead.
func (s *localStorage) openActive(segs []uint64, next, expect uint64) error {
	if len(segs) == 0 || (expect != 0 && expect < next) {
		// No segment yet, or the cursor is ahead of every stored entry
		// (acknowledged entries that were never synced): start a segment
		// at the next sequence so names keep matching contents.
		return s.create(next)
	}
	last := segs[len(segs)-1]
	f, err := os.OpenFile(filepath.Join(s.dir, segName(last)), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: %w", err)
	}
	s.active, s.size = f, fi.Size()
	return nil
}

// create starts a new active segment whose first entry is first.
// findPool lists the passed segments kept for reuse, removing any beyond
// maxRecycled (or all, when recycling is off).
func (s *localStorage) findPool() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	s.pool = nil
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), recyclePrefix) {
			continue
		}
		if s.recycle && len(s.pool) < maxRecycled {
			s.pool = append(s.pool, e.Name())
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: %w", err)
		}
	}
	return nil
}

func (s *localStorage) create(first uint64) error {
	path := filepath.Join(s.dir, segName(first))
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if n := len(s.pool); n > 0 {
		// Reuse a passed segment: written over from its start, its old
		// records are stale past the new ones (DecodeRecycledSegment).
		old := s.pool[n-1]
		s.pool = s.pool[:n-1]
		if err := os.Rename(filepath.Join(s.dir, old), path); err == nil {
			flags = os.O_WRONLY
		}
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := fsutil.SyncDir(s.dir); err != nil {
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
			if err := s.rotate(binary.BigEndian.Uint64(recs)); err != nil {
				return err
			}
			continue
		}
		w, err := s.active.WriteAt(recs[:n], s.size)
		s.size += int64(w)
		if err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// rotate closes the full active segment and starts one at first. The full
// segment is synced before it stops being the one sync() looks at.
// Callers hold s.mu.
func (s *localStorage) rotate(first uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err := datasync(s.active); err != nil {
		return err
	}
	return s.create(first)
}

// writeParts is write for records given in parts, three per record
// (header, payload, checksum), written with pwritev(2) rather than copied
// into one buffer first. It may modify parts.
func (s *localStorage) writeParts(parts [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(parts) > 0 {
		k, n := 0, int64(0) // parts and bytes that fit in the active segment
		for k < len(parts) {
			size := int64(len(parts[k]) + len(parts[k+1]) + len(parts[k+2]))
			if s.size+n+size > s.segBytes && (s.size > 0 || k > 0) {
				break
			}
			n += size
			k += 3
		}
		if k == 0 {
			if err := s.rotate(binary.BigEndian.Uint64(parts[0])); err != nil {
				return err
			}
			continue
		}
		w, err := pwritev(s.active, parts[:k], s.size)
		s.size += int64(w)
		if err != nil {
			return err
		}
		parts = parts[k:]
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

func (s *localStorage) saveCursor(cursor uint64, meta []byte, release uint64) error {
	if err := s.cursor.write(cursor, meta); err != nil {
		return err
	}
	if s.retain {
		return nil
	}
	s.mu.Lock()
	var drop []uint64
	for len(s.segs) > 1 && s.segs[1]-1 <= release {
		drop = append(drop, s.segs[0])
		s.segs = s.segs[1:]
	}
	s.mu.Unlock()
	for _, first := range drop {
		path := filepath.Join(s.dir, segName(first))
		s.mu.Lock()
		keep := s.recycle && len(s.pool) < maxRecycled
		if keep {
			name := fmt.Sprintf("%s%020d", recyclePrefix, first)
			if err := os.Rename(path, filepath.Join(s.dir, name)); err == nil {
				s.pool = append(s.pool, name)
				s.mu.Unlock()
				continue
			}
		}
		s.mu.Unlock()
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// The removals are not synced: a segment that comes back after a
	// crash lies wholly below the durable cursor, so recovery skips it
	// and the next save removes it again. Syncing the directory here
	// forced a journal commit that the appenders' fdatasyncs then waited
	// behind.
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
	return errors.Join(err, s.cursor.close(), s.unlock())
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
		seg, err := DecodeRecycledSegment(segName(first), b, first)
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

// Cursor slots. The cursor is kept in two files, CURSOR.0 and CURSOR.1,
// written in turn: generation g goes to CURSOR.(g%2). Each holds one
// record:
//
//	magic "AFWALCS1" | generation u64 BE | cursor u64 BE | meta length u32 BE | meta | crc32-IEEE u32 BE
//
// (the checksum covers everything before it), followed by whatever a longer
// earlier record left behind, which is ignored. A slot file is created
// atomically (temp file, fsync, rename, directory fsync), so it always held
// one whole record; after that it is overwritten in place and made durable
// with one fdatasync, which on a file whose size does not change needs no
// journal commit. A crash in the middle of an overwrite damages at most the
// slot being written; the other one holds the previous generation, which
// was durable before this write began, and segments are deleted only after
// the write that covers them is. Recovery takes the valid slot with the
// highest generation.
var cursorSlotNames = [2]string{"CURSOR.0", "CURSOR.1"}

const cursorSlotFixed = len(cursorMagic) + 8 + 8 + 4 + 4

func encodeCursorSlot(b []byte, gen, cursor uint64, meta []byte) []byte {
	b = append(b, cursorMagic...)
	b = binary.BigEndian.AppendUint64(b, gen)
	b = binary.BigEndian.AppendUint64(b, cursor)
	b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// DecodeCursor parses the record at the start of a cursor slot file's
// bytes; n is the record's length (bytes after it are ignored). A record
// that fails its checks is an error matching ErrCorrupt.
func DecodeCursor(b []byte) (gen, cursor uint64, meta []byte, n int, err error) {
	if len(b) < cursorSlotFixed || string(b[:len(cursorMagic)]) != cursorMagic {
		return 0, 0, nil, 0, corruption.Mark(errors.New("wal: cursor file has no valid header"))
	}
	m := binary.BigEndian.Uint32(b[len(cursorMagic)+16:])
	if int64(m) > int64(len(b)-cursorSlotFixed) {
		return 0, 0, nil, 0, corruption.Mark(fmt.Errorf("wal: cursor file declares %d bytes of meta but holds %d", m, len(b)-cursorSlotFixed))
	}
	n = cursorSlotFixed + int(m)
	if crc32.ChecksumIEEE(b[:n-4]) != binary.BigEndian.Uint32(b[n-4:]) {
		return 0, 0, nil, 0, corruption.Mark(errors.New("wal: cursor file fails its checksum"))
	}
	gen = binary.BigEndian.Uint64(b[len(cursorMagic):])
	cursor = binary.BigEndian.Uint64(b[len(cursorMagic)+8:])
	if m > 0 {
		meta = append([]byte(nil), b[len(cursorMagic)+20:n-4]...)
	}
	return gen, cursor, meta, n, nil
}

// cursorSlots writes the cursor into the two slot files in turn.
type cursorSlots struct {
	dir   string
	gen   uint64 // of the newest valid slot (0: none)
	files [2]*os.File
	buf   []byte
}

// read loads the newest valid slot. One damaged slot beside a valid one is
// what a crash in the middle of an overwrite leaves: the valid slot is then
// the newest durable cursor. Both damaged, or the only one, is an error.
func (c *cursorSlots) read() (cursor uint64, meta []byte, err error) {
	var damaged []string
	for _, name := range cursorSlotNames {
		path := filepath.Join(c.dir, name)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("wal: %w", err)
		}
		g, cur, m, _, err := DecodeCursor(b)
		if err != nil {
			damaged = append(damaged, fmt.Sprintf("%v (%s)", err, path))
			continue
		}
		if g > c.gen {
			c.gen, cursor, meta = g, cur, m
		}
	}
	switch {
	case len(damaged) == 2, len(damaged) == 1 && c.gen == 0:
		// Both slots damaged, or the only one: slot files are created
		// whole, so this is not a torn write.
		return 0, nil, corruption.Mark(errors.New(strings.Join(damaged, "; ")))
	}
	return cursor, meta, nil
}

// write persists generation gen+1 into its slot.
func (c *cursorSlots) write(cursor uint64, meta []byte) error {
	gen := c.gen + 1
	i := gen % 2
	c.buf = encodeCursorSlot(c.buf[:0], gen, cursor, meta)
	if c.files[i] == nil {
		path := filepath.Join(c.dir, cursorSlotNames[i])
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			if err := fsutil.WriteFile(c.dir, cursorSlotNames[i], c.buf); err != nil {
				return err
			}
			c.gen = gen
			return nil
		}
		if err != nil {
			return err
		}
		c.files[i] = f
	}
	f := c.files[i]
	if _, err := f.WriteAt(c.buf, 0); err != nil {
		return err
	}
	// fdatasync also makes a grown size durable.
	if err := datasync(f); err != nil {
		return err
	}
	c.gen = gen
	return nil
}

func (c *cursorSlots) close() error {
	var errs []error
	for i, f := range c.files {
		if f != nil {
			errs = append(errs, f.Close())
			c.files[i] = nil
		}
	}
	return errors.Join(errs...)
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
