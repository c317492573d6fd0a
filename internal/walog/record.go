package walog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// Record layout, identical to ArkFlow's object-store segment record:
//
//	seq u64 BE | len u32 BE | payload (len bytes) | crc32-IEEE(payload) u32 BE
const (
	headerSize  = 12
	trailerSize = 4
	// MaxPayload bounds one entry. A length above it is corruption, not a
	// reason to allocate.
	MaxPayload = 1 << 30
)

// AppendRecord appends the encoding of one entry to dst.
func AppendRecord(dst []byte, seq uint64, payload []byte) []byte {
	n := len(dst)
	dst = appendRecordCRC(dst, payload, crc32.ChecksumIEEE(payload))
	binary.BigEndian.PutUint64(dst[n:], seq)
	return dst
}

// appendRecordCRC appends a record's length, payload and checksum (crc,
// of payload) to dst, after a sequence field of zeros that the writer
// fills in with putSeq.
func appendRecordCRC(dst, payload []byte, crc uint32) []byte {
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc)
}

// RecordSize is the encoded size of an entry with an n-byte payload.
func RecordSize(n int) int { return headerSize + n + trailerSize }

// Entry is one decoded record. Payload aliases the decoded buffer.
type Entry struct {
	Seq     uint64
	Payload []byte
}

// Segment is the result of decoding one segment's bytes.
type Segment struct {
	Entries []Entry
	// Intact is the length of the prefix made of whole, valid records.
	Intact int
	// Torn describes an incomplete last record (a crash mid-write), or is
	// empty when the segment ends cleanly. Only the newest segment of a
	// log may be torn.
	Torn string
}

// CorruptError reports damage that is not a torn tail: a bad record
// followed by more data, or a sequence number out of order.
type CorruptError struct {
	Segment string
	Offset  int64
	Reason  string
}

// Error names the segment, the offset and the reason.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: segment %s is corrupt at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Is makes a *CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ErrCorrupt is the module's one corruption marker (the same value as
// checkpoint.ErrCorrupt and arkflow.ErrCorrupt): errors.Is(err, ErrCorrupt)
// is true for a *CorruptError, for a cursor file that fails its checks
// (DecodeCursor, and opening a log whose cursor slots are all damaged),
// and for an object-store manifest that is not valid JSON; false for I/O
// errors and for a manifest of an unsupported version.
var ErrCorrupt = corruption.Err

// DecodeSegment decodes the records in b. first is the sequence number the
// segment must start with (0: any); later records must follow one by one.
//
// A bad record is a torn tail, not an error, when nothing valid can follow
// it: its header or body runs past the end of b; or it fails its checksum,
// or has length 0 (the log writes no empty entries), and is the last record
// in b or is followed only by zero bytes; or every byte from it to the end
// is zero (space a file system allocated but never wrote). Even then, if a
// valid record follows it (one whose header and checksum check out, with
// the sequence the bad record should have had or a later one that fits in
// the bytes between them), the bad record is damage, not a tear: a crash
// leaves no valid record after a torn one. That is what a flipped length
// bit looks like. Anything else, including a length above MaxPayload, is a
// *CorruptError naming the segment and the offset of the bad record.
func DecodeSegment(name string, b []byte, first uint64) (Segment, error) {
	return decodeSegment(name, b, first, false)
}

// DecodeRecycledSegment decodes a local segment that may be a recycled
// file (see LocalOptions): past the entries written into it, it may still
// hold the records of the segment it was before, whose sequences are all
// lower than the new ones. So the log ends at the first record that is
// not the next entry (valid, sequence first, first+1, …) — a stale record,
// stale bytes from the middle of one, zeros, or a torn write — unless a
// valid record with the expected sequence or a later one follows
// somewhere after it: then the bad record is damage inside the log, a
// *CorruptError, as in DecodeSegment. first must be known (> 0).
func DecodeRecycledSegment(name string, b []byte, first uint64) (Segment, error) {
	if first == 0 {
		return Segment{}, fmt.Errorf("wal: decoding a recycled segment needs its first sequence")
	}
	return decodeSegment(name, b, first, true)
}

func decodeSegment(name string, b []byte, first uint64, recycled bool) (Segment, error) {
	var s Segment
	off := 0
	next := first
	for off < len(b) {
		rest := b[off:]
		corrupt := func(reason string) (Segment, error) {
			s.Intact = off
			return s, &CorruptError{Segment: name, Offset: int64(off), Reason: reason}
		}
		if allZero(rest) {
			s.Intact, s.Torn = off, fmt.Sprintf("%d zero bytes at offset %d", len(rest), off)
			return s, nil
		}
		var bad string // why the record at off cannot be read, if it may be torn
		if len(rest) < headerSize {
			bad = fmt.Sprintf("short header at offset %d", off)
		} else {
			seq := binary.BigEndian.Uint64(rest)
			n := binary.BigEndian.Uint32(rest[8:])
			end := headerSize + int(n) + trailerSize
			switch {
			case n > MaxPayload:
				if !recycled {
					return corrupt(fmt.Sprintf("entry length %d exceeds the limit %d", n, MaxPayload))
				}
				bad = fmt.Sprintf("stale bytes at offset %d (length field %d)", off, n)
			case end > len(rest):
				bad = fmt.Sprintf("entry at offset %d needs %d bytes, %d remain", off, end, len(rest))
			case n == 0:
				if !recycled && !allZero(rest[end:]) {
					return corrupt(fmt.Sprintf("entry of length 0 (sequence field %d); the log writes no empty entries", seq))
				}
				bad = fmt.Sprintf("last entry at offset %d has length 0", off)
			case crc32.ChecksumIEEE(rest[headerSize:headerSize+int(n)]) != binary.BigEndian.Uint32(rest[headerSize+int(n):]):
				if !recycled && !allZero(rest[end:]) {
					return corrupt(fmt.Sprintf("entry checksum mismatch (sequence field %d)", seq))
				}
				// The last record, or the last one before space the file
				// system extended the file by but never wrote (or, in a
				// recycled file, before the previous segment's records).
				bad = fmt.Sprintf("last entry at offset %d fails its checksum", off)
			case recycled && seq < next:
				bad = fmt.Sprintf("stale entry (sequence %d) at offset %d of a recycled segment", seq, off)
			case next != 0 && seq != next:
				return corrupt(fmt.Sprintf("sequence %d where %d was expected", seq, next))
			case seq == 0:
				return corrupt("sequence 0 (sequences start at 1)")
			default:
				s.Entries = append(s.Entries, Entry{Seq: seq, Payload: rest[headerSize : headerSize+int(n)]})
				next = seq + 1
				off += end
				continue
			}
		}
		if at, seq, ok := validRecordAfter(b, off, next); ok {
			return corrupt(fmt.Sprintf("%s, but a valid entry (sequence %d) follows at offset %d", bad, seq, at))
		}
		s.Intact, s.Torn = off, bad
		return s, nil
	}
	s.Intact = off
	return s, nil
}

// validRecordAfter looks for a valid record in b after the bad one at off,
// which should have held sequence next (0: unknown): one whose length is
// 1..MaxPayload and fits in b, whose checksum matches, and whose sequence
// is at least next (at least 1) and, when next is known, at most next plus
// the number of records the bytes from off could hold.
func validRecordAfter(b []byte, off int, next uint64) (at int, seq uint64, ok bool) {
	lo := max(next, 1)
	for p := off + 1; p+RecordSize(1) <= len(b); p++ {
		seq := binary.BigEndian.Uint64(b[p:])
		if seq < lo || (next != 0 && seq-next > uint64((p-off)/RecordSize(1))) {
			continue
		}
		n := int64(binary.BigEndian.Uint32(b[p+8:]))
		if n == 0 || n > MaxPayload || n > int64(len(b)-p-headerSize-trailerSize) {
			continue
		}
		end := p + headerSize + int(n)
		if crc32.ChecksumIEEE(b[p+headerSize:end]) == binary.BigEndian.Uint32(b[end:]) {
			return p, seq, true
		}
	}
	return 0, 0, false
}

func allZero(b []byte) bool {
	const chunk = 4096
	var zeros [chunk]byte
	for len(b) > 0 {
		n := min(len(b), chunk)
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
