package connectors

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func newRecord(s *arrow.Schema, cols []arrow.Array, rows int64) arrow.RecordBatch {
	return array.NewRecordBatch(s, cols, rows)
}
