package statestore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/arkflow-rs/arkflow-go/internal/objsum"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Snapshot format (both backends write and read the same bytes):
//
//	"ARKSNAP1"
//	u32 header length | header JSON
//	    {"format_version":2,"created_at_ms":now,
//	     "scope":{"job":...,"operator":...,"groups":{"start":s,"end":e}}}
//	then per entry, in encoded-key order:
//	    u8 kind (1 = entry) | u32 record length | record | u32 CRC32C
//	    record = u32 len(key) | key | u32 len(value) | value | i64 expiresAt
//	    (key is the encoding of key.go; the CRC32C, Castagnoli, covers the
//	    kind byte, the length and the record)
//	trailer:
//	    u8 kind (2 = end) | u64 entry count | CRC-64/NVME of every byte
//	    before the trailer (u64)
//
// Format version 1, which this program still reads, differs only in the
// trailer's checksum: the SHA-256 of every byte before the trailer (32
// bytes). Version 2 carries the CRC-64 because a checkpoint's manifest
// records the object's CRC-64/NVME anyway: one checksum pass while the
// snapshot is written instead of two, the SHA-256 having been a tenth of a
// checkpoint round's CPU.
//
// All integers are big-endian. created_at_ms is the now the snapshot was
// taken at (the caller's clock, so equal states give equal bytes). Only
// entries live at that now are written; each keeps its expiry. Operator ""
// in the scope means every operator of the job.
//
// Restore reads the stream once, front to back, with a bounded buffer: each
// record's CRC is checked as it arrives, records must lie inside the
// header's scope and come in strictly increasing key order, and at the end
// the entry count and the checksum are compared with the trailer, which
// must be followed by end of stream. Entries are written as they are read,
// so a failure at any point (the trailer included) deletes again every
// entry of the restore scope — which was empty when the restore began —
// before the error is returned. Restore assumes nothing else writes to
// that scope while it runs.

// SnapshotMagic opens every snapshot stream.
const SnapshotMagic = "ARKSNAP1"

// SnapshotFormatVersion is the version of the snapshot format written;
// every version from 1 up to it is read.
const SnapshotFormatVersion = 2

const (
	snapKindEntry byte = 1
	snapKindEnd   byte = 2

	snapMaxHeader = 1 << 20
	// snapMaxRecord bounds a record: a 1 GiB value plus a maximal key.
	snapMaxRecord = 1<<30 + 4*(maxKeyField+4) + 64
	trailerLenV1  = 1 + 8 + sha256.Size
	trailerLenV2  = 1 + 8 + 8
)

// trailerLen is the length of a trailer of format version v.
func trailerLen(v int) int {
	if v == 1 {
		return trailerLenV1
	}
	return trailerLenV2
}

// newTrailerHash returns the hash of a version-v trailer's checksum.
func newTrailerHash(v int) hash.Hash {
	if v == 1 {
		return sha256.New()
	}
	return objsum.NewCRC64()
}

// trailerSum is the algorithm of a version-v trailer's checksum, as
// internal/objsum names it.
func trailerSum(v int) string {
	if v == 1 {
		return objsum.SHA256
	}
	return objsum.CRC64NVME
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

type snapHeader struct {
	FormatVersion int       `json:"format_version"`
	CreatedAtMS   int64     `json:"created_at_ms"`
	Scope         snapScope `json:"scope"`
}

type snapScope struct {
	Job      string            `json:"job"`
	Operator string            `json:"operator"`
	Groups   job.KeyGroupRange `json:"groups"`
}

// rawScanner calls fn for every entry of the scope live at now, in
// encoded-key order; key and value are valid only during the call.
type rawScanner func(scope Scope, now int64, fn func(key, value []byte, expiresAt int64) error) error

// snapHashWriter writes to a bufio.Writer and computes the CRC-64/NVME
// of what it writes.
type snapHashWriter struct {
	bw  *bufio.Writer
	crc hash.Hash
	n   int64
}

func (w *snapHashWriter) write(p []byte) error {
	w.crc.Write(p)
	w.n += int64(len(p))
	_, err := w.bw.Write(p)
	return err
}

// snapshotWrite writes the snapshot of scope at now to w.
func snapshotWrite(w io.Writer, scope Scope, now int64, scan rawScanner) (SnapshotInfo, error) {
	if _, err := keyJobPrefix(scope.Job); err != nil {
		return SnapshotInfo{}, err
	}
	hw := &snapHashWriter{bw: bufio.NewWriterSize(w, 256<<10), crc: objsum.NewCRC64()}
	hdr, err := json.Marshal(snapHeader{
		FormatVersion: SnapshotFormatVersion,
		CreatedAtMS:   now,
		Scope:         snapScope{Job: scope.Job, Operator: scope.Operator, Groups: scope.Groups},
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	buf := make([]byte, 0, 4096)
	buf = append(buf, SnapshotMagic...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(hdr)))
	buf = append(buf, hdr...)
	if err := hw.write(buf); err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot: %w", err)
	}
	var count int64
	err = scan(scope, now, func(key, value []byte, expiresAt int64) error {
		recLen := 4 + len(key) + 4 + len(value) + 8
		if recLen > snapMaxRecord {
			return fmt.Errorf("state: snapshot: entry of %d bytes is too large", recLen)
		}
		buf = buf[:0]
		buf = append(buf, snapKindEntry)
		buf = binary.BigEndian.AppendUint32(buf, uint32(recLen))
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(key)))
		buf = append(buf, key...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(value)))
		buf = append(buf, value...)
		buf = binary.BigEndian.AppendUint64(buf, uint64(expiresAt))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, crc32c))
		count++
		if cap(buf) > 1<<20 { // do not keep one huge value's buffer
			err := hw.write(buf)
			buf = make([]byte, 0, 4096)
			return err
		}
		return hw.write(buf)
	})
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot of job %q: %w", scope.Job, err)
	}
	sum := hw.crc.Sum(nil)
	buf = buf[:0]
	buf = append(buf, snapKindEnd)
	buf = binary.BigEndian.AppendUint64(buf, uint64(count))
	buf = append(buf, sum...)
	if err := hw.write(buf); err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot: %w", err)
	}
	if err := hw.bw.Flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot: %w", err)
	}
	return SnapshotInfo{Entries: count, Bytes: hw.n, Checksum: objsum.Format(objsum.CRC64NVME, sum),
		ObjectCRC64: objsum.Format(objsum.CRC64NVME, hw.crc.Sum(nil))}, nil
}
