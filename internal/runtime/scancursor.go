package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
)

// maxScanLimit bounds the keys of one scan page; DefaultScanLimit is a
// page's size when the query gives none.
const (
	maxScanLimit     = 10_000
	DefaultScanLimit = 100
)

// ErrScanLimit is returned for a scan's limit out of range.
var ErrScanLimit = errors.New("arkflow: scan limit out of range")

// scanRequest checks a scan query against the operator's key type.
func scanRequest(shape *ops.QueryShape, op string, q ScanQuery) (ops.ScanRequest, error) {
	req := ops.ScanRequest{AfterGroup: -1, Limit: q.Limit}
	switch {
	case req.Limit == 0:
		req.Limit = DefaultScanLimit
	case req.Limit < 0 || req.Limit > maxScanLimit:
		return req, fmt.Errorf("%w: operator %q: a scan's limit must be between 1 and %d (got %d)", ErrScanLimit, op, maxScanLimit, q.Limit)
	}
	if q.After != "" {
		g, k, err := decodeCursor(q.After)
		if err != nil {
			return req, fmt.Errorf("%w: operator %q: %v", ErrBadCursor, op, err)
		}
		req.AfterGroup, req.AfterKey = g, k
	}
	t := shape.Key
	if len(q.Prefix) > 0 && !isBytesKey(t) {
		return req, fmt.Errorf("%w: operator %q: a prefix scan needs string or binary keys (its key is %s); give a range", ErrKeyType, op, t)
	}
	var from, to []byte
	var err error
	if q.From != nil {
		if from, err = keys.Encode(t, q.From); err != nil {
			return req, fmt.Errorf("%w: operator %q: the scan's start: %v", ErrKeyType, op, err)
		}
	}
	if q.To != nil {
		if to, err = keys.Encode(t, q.To); err != nil {
			return req, fmt.Errorf("%w: operator %q: the scan's end: %v", ErrKeyType, op, err)
		}
	}
	prefix := q.Prefix
	req.Match = func(k []byte) bool {
		return k != nil && bytes.HasPrefix(k, prefix) &&
			(from == nil || keys.Compare(t, k, from) >= 0) && (to == nil || keys.Compare(t, k, to) < 0)
	}
	return req, nil
}

func isBytesKey(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// encodeCursor is a scan page's cursor: the key group and key bytes of
// its last key, unpadded base64url of uvarint(group) then the key.
func encodeCursor(group int, key []byte) string {
	b := binary.AppendUvarint(nil, uint64(group))
	return base64.RawURLEncoding.EncodeToString(append(b, key...))
}

// decodeCursor reads encodeCursor's output.
func decodeCursor(s string) (int, []byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, nil, err
	}
	g, n := binary.Uvarint(b)
	if n <= 0 || g > 1<<30 {
		return 0, nil, fmt.Errorf("no key group in %q", s)
	}
	return int(g), append([]byte{}, b[n:]...), nil
}

// concatRecords makes one record of schema s from recs.
func concatRecords(s *arrow.Schema, recs []arrow.RecordBatch) arrow.RecordBatch {
	var rows int64
	var parts []arrow.RecordBatch
	for _, r := range recs {
		if r.NumRows() > 0 {
			parts = append(parts, r)
			rows += r.NumRows()
		}
	}
	if len(parts) == 0 {
		return ops.EmptyRecord(s)
	}
	cols := make([]arrow.Array, s.NumFields())
	for i := range cols {
		cs := make([]arrow.Array, len(parts))
		for k, r := range parts {
			cs[k] = r.Column(i)
		}
		c, err := array.Concatenate(cs, memory.DefaultAllocator)
		if err != nil {
			panic(err) // one schema: cannot fail
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(s, cols, rows)
}
