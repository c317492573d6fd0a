package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(payload))
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

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: segment %s is corrupt at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// DecodeSegment decodes the records in b. first is the sequence number the
// segment must start with (0: any); later records must follow one by one.
//
// A bad record is a torn tail, not an error, when nothing valid can follow
// it: its header or body runs past the end of b, it fails its checksum and
// is the last record in b or is followed only by zero bytes, or every byte
// from it to the end is zero (space a file system allocated but never
// wrote). Anything else, including a length above MaxPayload, is a
// *CorruptError naming the segment and the offset of the bad record.
func DecodeSegment(name string, b []byte, first uint64) (Segment, error) {
	var s Segment
	off := 0
	next := first
	for off < len(b) {
		rest := b[off:]
		torn := func(reason string) (Segment, error) {
			s.Intact, s.Torn = off, reason
			return s, nil
		}
		corrupt := func(reason string) (Segment, error) {
			s.Intact = off
			return s, &CorruptError{Segment: name, Offset: int64(off), Reason: reason}
		}
		if allZero(rest) {
			return torn(fmt.Sprintf("%d zero bytes at offset %d", len(rest), off))
		}
		if len(rest) < headerSize {
			return torn(fmt.Sprintf("short header at offset %d", off))
		}
		seq := binary.BigEndian.Uint64(rest)
		n := binary.BigEndian.Uint32(rest[8:])
		if n > MaxPayload {
			return corrupt(fmt.Sprintf("entry length %d exceeds the limit %d", n, MaxPayload))
		}
		end := headerSize + int(n) + trailerSize
		if end > len(rest) {
			return torn(fmt.Sprintf("entry at offset %d needs %d bytes, %d remain", off, end, len(rest)))
		}
		payload := rest[headerSize : headerSize+int(n)]
		if crc32.ChecksumIEEE(payload) != binary.BigEndian.Uint32(rest[headerSize+int(n):]) {
			if allZero(rest[end:]) {
				// The last record, or the last one before space the file
				// system extended the file by but never wrote.
				return torn(fmt.Sprintf("last entry at offset %d fails its checksum", off))
			}
			return corrupt(fmt.Sprintf("entry checksum mismatch (sequence field %d)", seq))
		}
		if next != 0 && seq != next {
			return corrupt(fmt.Sprintf("sequence %d where %d was expected", seq, next))
		}
		if seq == 0 {
			return corrupt("sequence 0 (sequences start at 1)")
		}
		s.Entries = append(s.Entries, Entry{Seq: seq, Payload: payload})
		next = seq + 1
		off += end
	}
	s.Intact = off
	return s, nil
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
