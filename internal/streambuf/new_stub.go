package streambuf

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Options are what a buffer needs from the stream around it.
type Options struct {
	Inputs []string
	Decode func(rec arrow.RecordBatch, valueField string) (arrow.RecordBatch, error)
}

// New builds a buffer.
func New(typ string, config json.RawMessage, start time.Time, opts Options) (Buffer, error) {
	return nil, errors.New("buffers are not built yet")
}
