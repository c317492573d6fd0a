package statestore

// Reading a snapshot stream (the format is in snapshot.go): snapshotRestore
// restores one into a backend's scope, snapshotRead checks one record at a
// time as it arrives and hands the entries to a restoreSink (a backend's
// writes, a bulk stream writer, a layer's indexer).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
	"github.com/arkflow-rs/arkflow-go/internal/objsum"
)

// restoreSink receives the entries of a restore.
type restoreSink interface {
	// put writes (or buffers) one entry; key and value are only valid
	// during the call.
	put(key, value []byte, expiresAt int64) error
	// flush makes every put entry visible.
	flush() error
	// abort drops buffered entries.
	abort()
}

// recordObserver is implemented by sinks that want the byte offset and
// key of every record of the stream (entries in scope or not; key is
// valid only during the call) and the offset of its trailer.
type recordObserver interface {
	record(off int64, key []byte)
	end(off int64)
}

// scopeEmptyFn reports whether the scope has no live entry at now;
// scopeDropFn deletes every entry of the scope.
type (
	scopeEmptyFn func(scope Scope, now int64) (bool, error)
	scopeDropFn  func(scope Scope) error
)

// snapReader reads a snapshot stream, counting and hashing the bytes.
type snapReader struct {
	br  *bufio.Reader
	h   hash.Hash // the trailer's checksum of the bytes before it, or nil
	obj hash.Hash // the object's checksum, when not h's algorithm, or nil
	off int64
}

// hash adds p to the stream's checksums.
func (r *snapReader) hash(p []byte) {
	if r.h != nil {
		r.h.Write(p)
		if r.obj != nil {
			r.obj.Write(p)
		}
	}
}

// read fills p, hashing it when hashed; a short stream is an error naming
// what was being read.
func (r *snapReader) read(p []byte, hashed bool, what string) error {
	n, err := io.ReadFull(r.br, p)
	if hashed {
		r.hash(p[:n])
	}
	start := r.off
	r.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated stream: %s at byte offset %d needs %d bytes, got %d", what, start, len(p), n)
		}
		return &snapIOError{fmt.Errorf("reading %s at byte offset %d: %w", what, start, err)}
	}
	return nil
}

// snapIOError is a failure of the reader under a snapshot stream (the
// store, the network) or of the store written to, as opposed to a
// problem with the stream's bytes.
type snapIOError struct{ err error }

func (e *snapIOError) Error() string { return e.err.Error() }

func (e *snapIOError) Unwrap() error { return e.err }

// ErrCorruptSnapshot is wrapped by the errors of Restore (and
// RestoreEmpty) that come from the snapshot's bytes: bad magic, header,
// CRC, order, scope, trailer, checksum, or a stream cut short. A failure
// of the reader itself wraps the reader's error instead. It matches the
// module's one corruption marker too (checkpoint.ErrCorrupt,
// wal.ErrCorrupt and arkflow.ErrCorrupt are that marker).
var ErrCorruptSnapshot = corruption.Sentinel("state: corrupt snapshot")

// corruptSnapError marks an error as ErrCorruptSnapshot (and so as
// corruption) without changing its message.
type corruptSnapError struct{ err error }

func (e *corruptSnapError) Error() string { return e.err.Error() }

func (e *corruptSnapError) Unwrap() error { return e.err }

func (e *corruptSnapError) Is(target error) bool { return errors.Is(ErrCorruptSnapshot, target) }

// ErrSnapshotVersion is wrapped by the error of a restore whose snapshot
// has a format version newer than this program reads: a newer build wrote
// it. It is not corruption, so a recovery does not fall back past it to
// an older checkpoint (which would start the job on older state, or on
// none); the restore fails until a build that reads the version runs it.
var ErrSnapshotVersion = errors.New("state: snapshot format version not supported")

// snapVersionError is a snapshot of a format version this program does
// not read.
type snapVersionError struct{ version int }

func (e *snapVersionError) Error() string {
	return fmt.Sprintf("snapshot format version %d, this program reads 1 to %d: a newer build wrote it", e.version, SnapshotFormatVersion)
}

func (e *snapVersionError) Unwrap() error { return ErrSnapshotVersion }

// markCorrupt wraps an error of snapshotRead that is neither the reader's
// own failure nor a newer format version as ErrCorruptSnapshot.
func markCorrupt(err error) error {
	var re *snapIOError
	if err == nil || errors.As(err, &re) || errors.Is(err, ErrSnapshotVersion) {
		return err
	}
	return &corruptSnapError{err}
}

// readN reads n bytes into buf (grown as the data arrives, so a huge
// declared length with little data behind it allocates little).
func (r *snapReader) readN(buf []byte, n int, what string) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), 1<<20)
		if cap(buf)-len(buf) < chunk {
			nb := make([]byte, len(buf), len(buf)+chunk+len(buf)/2)
			copy(nb, buf)
			buf = nb
		}
		part := buf[len(buf) : len(buf)+chunk]
		if err := r.read(part, true, what); err != nil {
			return buf, err
		}
		buf = buf[:len(buf)+chunk]
	}
	return buf, nil
}

// snapshotRestore restores a snapshot stream into a backend.
func snapshotRestore(r io.Reader, scope Scope, now int64, empty scopeEmptyFn, sink restoreSink, drop scopeDropFn) (RestoreInfo, error) {
	jobPrefix, err := keyJobPrefix(scope.Job)
	if err != nil {
		return RestoreInfo{}, err
	}
	if scope.Operator != "" {
		if _, err := keyOperatorPrefix(scope.Job, scope.Operator); err != nil {
			return RestoreInfo{}, err
		}
	}
	ok, err := empty(scope, now)
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("state: restore: %w", err)
	}
	if !ok {
		return RestoreInfo{}, fmt.Errorf("state: restore into job %q operator %q groups %v: the scope already has entries", scope.Job, scope.Operator, scope.Groups)
	}
	info, err := snapshotRead(r, scope, now, jobPrefix, "", sink)
	if err == nil {
		if err = sink.flush(); err != nil {
			err = fmt.Errorf("writing restored entries: %w", err)
		}
	}
	if err != nil {
		sink.abort()
		err = fmt.Errorf("state: restore of job %q: %w", scope.Job, err)
		if derr := drop(scope); derr != nil {
			err = errors.Join(err, fmt.Errorf("state: restore: deleting the partly restored entries: %w", derr))
		}
		return RestoreInfo{Bytes: info.Bytes}, err
	}
	return info, nil
}

// snapshotRead parses a snapshot stream and puts its entries in scope
// live at now into sink. wantObject, if not empty, is the checksum of the
// whole stream, trailer included, as internal/objsum formats it (a
// manifest's): when it is the trailer's algorithm, the one pass that
// checks the trailer checks it too. A failure that is not the reader's
// own wraps ErrCorruptSnapshot.
func snapshotRead(r io.Reader, scope Scope, now int64, jobPrefix []byte, wantObject string, sink restoreSink) (info RestoreInfo, err error) {
	return snapshotReadHash(r, scope, now, jobPrefix, wantObject, sink, true)
}

// snapshotReadHash is snapshotRead; without withHash it computes no
// checksum and checks neither the trailer's nor wantObject: the caller
// hashes the stream itself (in a stage of its own) and compares the
// object's checksum, which covers every byte the trailer's does.
func snapshotReadHash(r io.Reader, scope Scope, now int64, jobPrefix []byte, wantObject string, sink restoreSink, withHash bool) (info RestoreInfo, err error) {
	sr := &snapReader{br: bufio.NewReaderSize(r, 256<<10)}
	defer func() {
		info.Bytes = sr.off
		err = markCorrupt(err)
	}()

	p := &snapParse{sr: sr, info: &info, scope: scope, now: now, jobPrefix: jobPrefix, wantObject: wantObject, withHash: withHash, sink: sink}
	if err := p.readHeader(); err != nil {
		return info, err
	}
	for {
		recOff := sr.off
		if err := sr.read(p.fixed[:1], false, "record kind"); err != nil {
			return info, err
		}
		switch p.fixed[0] {
		case snapKindEntry:
			if err := p.entry(recOff); err != nil {
				return info, err
			}
		case snapKindEnd:
			err := p.trailer(recOff)
			return info, err
		default:
			return info, fmt.Errorf("unknown record kind %d at byte offset %d", p.fixed[0], recOff)
		}
	}
}

// snapParse is one read of a snapshot stream by snapshotReadHash: what it
// checks records against and what it has read so far. Records are checked
// in stream order: each must lie in the header's scope and follow the one
// before in key order; only those in the read's own scope and live at now
// go to the sink.
type snapParse struct {
	sr         *snapReader
	info       *RestoreInfo // the read's result, filled as it goes
	scope      Scope
	now        int64
	jobPrefix  []byte
	wantObject string
	withHash   bool
	objAlg     string // the algorithm of sr.obj
	sink       restoreSink
	obs        recordObserver // the sink's, or nil

	// Set from the header.
	hdr           snapHeader
	hdrOpPrefix   []byte // the header's operator's key prefix, or nil
	scopeOpPrefix []byte // the read scope's operator's key prefix, or nil
	gStart, gEnd  int
	gOK           bool // the read scope has key groups
	wallSec       int64

	fixed [12]byte
	rec   []byte // the last record copied out of the stream
	prev  []byte // the last record's key
	count int64  // records read
}

// readHeader reads the magic and the header, checks the format version
// and that the header's job and operator are the read scope's, and sets
// what the records are checked against and, when the read hashes, the
// checksums of the header's version.
func (p *snapParse) readHeader() error {
	sr, scope := p.sr, p.scope
	fixed := p.fixed[:]
	if err := sr.read(fixed[:8], true, "magic"); err != nil {
		return err
	}
	if string(fixed[:8]) != SnapshotMagic {
		return fmt.Errorf("wrong magic %q at byte offset 0, want %q", fixed[:8], SnapshotMagic)
	}
	if err := sr.read(fixed[:4], true, "header length"); err != nil {
		return err
	}
	hlen := binary.BigEndian.Uint32(fixed[:4])
	if hlen > snapMaxHeader {
		return fmt.Errorf("header length %d at byte offset 8 exceeds %d", hlen, snapMaxHeader)
	}
	hbuf, err := sr.readN(nil, int(hlen), "header")
	if err != nil {
		return err
	}
	hdr := &p.hdr
	dec := json.NewDecoder(bytes.NewReader(hbuf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(hdr); err != nil {
		return fmt.Errorf("bad header at byte offset 12: %v", err)
	}
	if dec.More() {
		return errors.New("bad header at byte offset 12: trailing data")
	}
	if hdr.FormatVersion > SnapshotFormatVersion {
		return &snapVersionError{hdr.FormatVersion}
	}
	if hdr.FormatVersion < 1 {
		return fmt.Errorf("snapshot format version %d at byte offset 12 is not one any build writes", hdr.FormatVersion)
	}
	if p.withHash {
		if err := p.startHashes(); err != nil {
			return err
		}
		sr.hash([]byte(SnapshotMagic))
		sr.hash(binary.BigEndian.AppendUint32(nil, hlen))
		sr.hash(hbuf)
	}
	if hdr.Scope.Job != scope.Job {
		return fmt.Errorf("the snapshot is of job %q, not %q", hdr.Scope.Job, scope.Job)
	}
	if scope.Operator != "" && hdr.Scope.Operator != "" && hdr.Scope.Operator != scope.Operator {
		return fmt.Errorf("the snapshot is of operator %q, not %q", hdr.Scope.Operator, scope.Operator)
	}
	if hdr.Scope.Operator != "" {
		if p.hdrOpPrefix, err = keyOperatorPrefix(hdr.Scope.Job, hdr.Scope.Operator); err != nil {
			return fmt.Errorf("bad header: %v", err)
		}
	}
	if scope.Operator != "" {
		p.scopeOpPrefix, _ = keyOperatorPrefix(scope.Job, scope.Operator)
	}
	p.gStart, p.gEnd, p.gOK = scopeGroups(scope.Groups)
	p.wallSec = wallSeconds()
	p.obs, _ = p.sink.(recordObserver)
	return nil
}

// startHashes sets the reader's checksums for the header's format
// version and the object checksum wanted.
func (p *snapParse) startHashes() error {
	sr := p.sr
	alg := trailerSum(p.hdr.FormatVersion)
	sr.h = newTrailerHash(p.hdr.FormatVersion)
	if p.wantObject == "" {
		return nil
	}
	h, prefix, ok := objsum.New(p.wantObject)
	if !ok {
		return fmt.Errorf("the object checksum %q names no known algorithm", p.wantObject)
	}
	if prefix != alg {
		sr.obj, p.objAlg = h, prefix
	}
	return nil
}

// entry reads the entry record whose kind byte at recOff was just read,
// checks it and puts it into the sink when it is in the read's scope and
// live.
func (p *snapParse) entry(recOff int64) error {
	sr := p.sr
	sr.hash(p.fixed[:1])
	rec, consumed, err := p.readRecord(recOff)
	if err != nil {
		return err
	}
	if err := p.take(rec, recOff); err != nil {
		return err
	}
	if consumed > 0 {
		sr.br.Discard(consumed) // peeked: cannot fail
		sr.off += int64(consumed)
	}
	return nil
}

// readRecord reads an entry's length, record and CRC32C, and returns the
// record once its CRC matches. A record that fits the read buffer is
// parsed where it lies (Peek) and consumed is its length with the CRC's,
// for the caller to skip over once done with it; a larger one is copied
// out, and consumed is 0.
func (p *snapParse) readRecord(recOff int64) (rec []byte, consumed int, err error) {
	sr := p.sr
	fixed := p.fixed[:]
	if err := sr.read(fixed[:4], true, "record length"); err != nil {
		return nil, 0, err
	}
	recLen := binary.BigEndian.Uint32(fixed[:4])
	if recLen < 16 || recLen > snapMaxRecord {
		return nil, 0, fmt.Errorf("record %d at byte offset %d: bad length %d", p.count, recOff, recLen)
	}
	crc := crc32.Update(0, crc32c, []byte{snapKindEntry})
	crc = crc32.Update(crc, crc32c, fixed[:4])
	var stored uint32
	if n := int(recLen) + 4; n <= sr.br.Size() {
		if b, perr := sr.br.Peek(n); perr == nil {
			sr.hash(b)
			rec, stored, consumed = b[:recLen], binary.BigEndian.Uint32(b[recLen:]), n
		}
	}
	if consumed == 0 {
		if p.rec, err = sr.readN(p.rec[:0:0], int(recLen), "record"); err != nil {
			return nil, 0, fmt.Errorf("record %d: %w", p.count, err)
		}
		rec = p.rec
		if err := sr.read(fixed[:4], true, "record CRC"); err != nil {
			return nil, 0, fmt.Errorf("record %d: %w", p.count, err)
		}
		stored = binary.BigEndian.Uint32(fixed[:4])
	}
	crc = crc32.Update(crc, crc32c, rec)
	if got := stored; got != crc {
		return nil, 0, fmt.Errorf("record %d at byte offset %d: CRC32C mismatch (stored %08x, computed %08x)", p.count, recOff, got, crc)
	}
	return rec, consumed, nil
}

// take parses a checked record, checks its key (of the job, in the
// header's scope, after the previous key) and puts the entry into the
// sink, or counts it skipped when it lies outside the read's scope or has
// expired.
func (p *snapParse) take(rec []byte, recOff int64) error {
	count := p.count
	key, value, expiresAt, perr := snapParseRecord(rec)
	if perr != nil {
		return fmt.Errorf("record %d at byte offset %d: %v", count, recOff, perr)
	}
	opLen, group, kerr := keySplit(key)
	if kerr != nil || !bytes.HasPrefix(key, p.jobPrefix) || opLen == len(p.jobPrefix)+2 {
		return fmt.Errorf("record %d at byte offset %d: malformed key or key of another job", count, recOff)
	}
	if (p.hdrOpPrefix != nil && !bytes.Equal(key[:opLen], p.hdrOpPrefix)) || !p.hdr.Scope.Groups.Contains(group) {
		return fmt.Errorf("record %d at byte offset %d: key outside the snapshot's scope", count, recOff)
	}
	if p.prev != nil && bytes.Compare(p.prev, key) >= 0 {
		return fmt.Errorf("record %d at byte offset %d: keys out of order", count, recOff)
	}
	p.prev = append(p.prev[:0], key...)
	p.count++
	if p.obs != nil {
		p.obs.record(recOff, key)
	}
	if !p.gOK || group < p.gStart || group > p.gEnd ||
		(p.scopeOpPrefix != nil && !bytes.Equal(key[:opLen], p.scopeOpPrefix)) ||
		!liveAt(expiresAt, p.now, p.wallSec) {
		p.info.Skipped++
		return nil
	}
	if err := p.sink.put(key, value, expiresAt); err != nil {
		return &snapIOError{fmt.Errorf("writing record %d: %w", p.count-1, err)}
	}
	p.info.Entries++
	return nil
}

// trailer reads the trailer whose kind byte at recOff was just read and
// checks the entry count, that the stream ends after it, and, when the
// read hashes, the trailer's checksum and the object checksum the caller
// wants. It records the stream's checksum.
func (p *snapParse) trailer(recOff int64) error {
	sr := p.sr
	if p.obs != nil {
		p.obs.end(recOff)
	}
	var buf [trailerLenV1 - 1]byte
	tr := buf[:trailerLen(p.hdr.FormatVersion)-1]
	if err := sr.read(tr, false, "trailer"); err != nil {
		return err
	}
	if n := int64(binary.BigEndian.Uint64(tr[:8])); n != p.count {
		return fmt.Errorf("trailer at byte offset %d counts %d entries, the stream has %d", recOff, n, p.count)
	}
	alg := trailerSum(p.hdr.FormatVersion)
	stored := objsum.Format(alg, tr[8:])
	if sr.h == nil {
		if err := sr.atEnd(); err != nil {
			return err
		}
		p.info.Checksum = stored
		return nil
	}
	if sum := objsum.Format(alg, sr.h.Sum(nil)); sum != stored {
		return fmt.Errorf("checksum mismatch: trailer at byte offset %d has %s, the stream hashes to %s", recOff, stored, sum)
	}
	if err := sr.atEnd(); err != nil {
		return err
	}
	p.info.Checksum = stored
	if p.wantObject == "" {
		return nil
	}
	sr.hash([]byte{snapKindEnd})
	sr.hash(tr)
	var got string
	if sr.obj != nil {
		got = objsum.Format(p.objAlg, sr.obj.Sum(nil))
	} else {
		got = objsum.Format(alg, sr.h.Sum(nil))
	}
	if got != p.wantObject {
		return fmt.Errorf("checksum mismatch: the stream (trailer included) hashes to %s, its manifest entry says %s", got, p.wantObject)
	}
	return nil
}

// atEnd checks that the stream ends here.
func (r *snapReader) atEnd() error {
	if _, err := r.br.ReadByte(); err != io.EOF {
		if err != nil {
			return &snapIOError{fmt.Errorf("reading after the trailer at byte offset %d: %w", r.off, err)}
		}
		return fmt.Errorf("unexpected data after the trailer at byte offset %d", r.off)
	}
	return nil
}

func snapParseRecord(rec []byte) (key, value []byte, expiresAt int64, err error) {
	bad := errors.New("malformed record")
	if len(rec) < 4 {
		return nil, nil, 0, bad
	}
	kl := int(binary.BigEndian.Uint32(rec))
	if kl > len(rec)-4-4-8 {
		return nil, nil, 0, bad
	}
	key = rec[4 : 4+kl]
	rest := rec[4+kl:]
	vl := int(binary.BigEndian.Uint32(rest))
	if vl != len(rest)-4-8 {
		return nil, nil, 0, bad
	}
	value = rest[4 : 4+vl]
	expiresAt = int64(binary.BigEndian.Uint64(rest[4+vl:]))
	if expiresAt < 0 {
		return nil, nil, 0, errors.New("negative expiry")
	}
	return key, value, expiresAt, nil
}
