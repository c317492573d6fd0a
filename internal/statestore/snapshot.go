package statestore

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
//	    {"format_version":1,"created_at_ms":now,
//	     "scope":{"job":...,"operator":...,"groups":{"start":s,"end":e}}}
//	then per entry, in encoded-key order:
//	    u8 kind (1 = entry) | u32 record length | record | u32 CRC32C
//	    record = u32 len(key) | key | u32 len(value) | value | i64 expiresAt
//	    (key is the encoding of key.go; the CRC32C, Castagnoli, covers the
//	    kind byte, the length and the record)
//	trailer:
//	    u8 kind (2 = end) | u64 entry count | SHA-256 of every byte before
//	    the trailer (32 bytes)
//
// All integers are big-endian. created_at_ms is the now the snapshot was
// taken at (the caller's clock, so equal states give equal bytes). Only
// entries live at that now are written; each keeps its expiry. Operator ""
// in the scope means every operator of the job.
//
// Restore reads the stream once, front to back, with a bounded buffer: each
// record's CRC is checked as it arrives, records must lie inside the
// header's scope and come in strictly increasing key order, and at the end
// the entry count and the SHA-256 are compared with the trailer, which must
// be followed by end of stream. Entries are written as they are read, so a
// failure at any point (the trailer included) deletes again every entry of
// the restore scope — which was empty when the restore began — before the
// error is returned. Restore assumes nothing else writes to that scope
// while it runs.

// SnapshotMagic opens every snapshot stream.
const SnapshotMagic = "ARKSNAP1"

// SnapshotFormatVersion is the version of the snapshot format written.
const SnapshotFormatVersion = 1

const (
	snapKindEntry byte = 1
	snapKindEnd   byte = 2

	snapMaxHeader = 1 << 20
	// snapMaxRecord bounds a record: a 1 GiB value plus a maximal key.
	snapMaxRecord = 1<<30 + 4*(maxKeyField+4) + 64
	trailerLen    = 1 + 8 + sha256.Size
)

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

// snapHashWriter writes to a bufio.Writer and hashes what it writes.
type snapHashWriter struct {
	bw  *bufio.Writer
	h   hash.Hash
	crc hash.Hash // CRC-64/NVME of every byte, the trailer included
	n   int64
}

func (w *snapHashWriter) write(p []byte) error {
	w.h.Write(p)
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
	hw := &snapHashWriter{bw: bufio.NewWriterSize(w, 256<<10), h: sha256.New(), crc: objsum.NewCRC64()}
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
	sum := hw.h.Sum(nil)
	buf = buf[:0]
	buf = append(buf, snapKindEnd)
	buf = binary.BigEndian.AppendUint64(buf, uint64(count))
	buf = append(buf, sum...)
	hw.h.Write(buf)
	hw.crc.Write(buf)
	objSum := hw.h.Sum(nil)
	hw.n += int64(len(buf))
	if _, err := hw.bw.Write(buf); err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot: %w", err)
	}
	if err := hw.bw.Flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("state: snapshot: %w", err)
	}
	return SnapshotInfo{Entries: count, Bytes: hw.n, Checksum: "sha256:" + hex.EncodeToString(sum), ObjectChecksum: "sha256:" + hex.EncodeToString(objSum),
		ObjectCRC64: objsum.Format(objsum.CRC64NVME, hw.crc.Sum(nil))}, nil
}
