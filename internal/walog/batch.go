package walog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// MaxSourceName bounds the source name in a batch payload.
const MaxSourceName = 1 << 16

// EncodeBatch appends the payload of a source batch to dst in ArkFlow's
// layout: the source name's length (u32 BE), the name, then the rows as one
// Arrow IPC stream (schema and one record batch), __meta_* columns included.
func EncodeBatch(dst []byte, source string, rec arrow.RecordBatch) ([]byte, error) {
	if len(source) > MaxSourceName {
		return nil, fmt.Errorf("wal: source name of %d bytes exceeds %d", len(source), MaxSourceName)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(source)))
	dst = append(dst, source...)
	buf := bytes.NewBuffer(dst)
	w := ipc.NewWriter(buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return nil, fmt.Errorf("wal: encoding batch: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("wal: encoding batch: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeBatch parses a payload written by EncodeBatch. The record is
// independent of payload; the caller releases it. A payload with no record
// or more than one is an error.
func DecodeBatch(payload []byte, mem memory.Allocator) (source string, rec arrow.RecordBatch, err error) {
	source, err = BatchSource(payload)
	if err != nil {
		return "", nil, err
	}
	n := len(source)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	defer func() {
		// The IPC reader trusts lengths in flatbuffers; a payload that
		// passed the record checksum but is not IPC must not crash us.
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			source, rec, err = "", nil, fmt.Errorf("wal: batch payload is not a valid Arrow IPC stream: %v", p)
		}
	}()
	r, err := ipc.NewReader(bytes.NewReader(payload[4+n:]), ipc.WithAllocator(mem))
	if err != nil {
		return "", nil, fmt.Errorf("wal: batch payload: %w", err)
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return "", nil, fmt.Errorf("wal: batch payload: %w", err)
		}
		return "", nil, errors.New("wal: batch payload holds no record batch")
	}
	rec = r.RecordBatch()
	rec.Retain()
	if r.Next() {
		rec.Release()
		return "", nil, errors.New("wal: batch payload holds more than one record batch")
	}
	if err := r.Err(); err != nil {
		rec.Release()
		return "", nil, fmt.Errorf("wal: batch payload: %w", err)
	}
	if err := validateRecord(rec); err != nil {
		rec.Release()
		return "", nil, err
	}
	return source, rec, nil
}

// BatchSource returns the source name a batch payload (EncodeBatch's)
// begins with, without decoding its rows.
func BatchSource(payload []byte) (string, error) {
	if len(payload) < 4 {
		return "", errors.New("wal: batch payload truncated (name length)")
	}
	n := binary.BigEndian.Uint32(payload)
	if n > MaxSourceName || int64(n) > int64(len(payload)-4) {
		return "", fmt.Errorf("wal: batch payload truncated (name of %d bytes, %d remain)", n, len(payload)-4)
	}
	return string(payload[4 : 4+n]), nil
}

// validateRecord checks the decoded arrays' internal consistency, so that
// a damaged payload fails here instead of in an operator.
func validateRecord(rec arrow.RecordBatch) (err error) {
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("wal: batch payload: column %d has %d rows, the batch %d", i, col.Len(), rec.NumRows())
		}
		if v, ok := col.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				return fmt.Errorf("wal: batch payload: column %d: %w", i, err)
			}
		}
	}
	return nil
}
