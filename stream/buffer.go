package stream

import (
	"encoding/json"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/streambuf"
)

// newBuffer builds the stream's buffer, its timers starting at start.
func newBuffer(r *runner, start time.Time) (streambuf.Buffer, error) {
	var names []string
	if len(r.inputs) > 1 || r.inputs[0].name != "" {
		for _, in := range r.inputs {
			names = append(names, in.name)
		}
	}
	cfg := r.s.Buffer.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	return streambuf.New(r.s.Buffer.Type, cfg, start, streambuf.Options{Inputs: names, Decode: decodeJSON})
}
