package streambuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/humantime"
)

// Options are what a buffer needs from the stream around it.
type Options struct {
	// Inputs are the names of a multiple_inputs input's children (for a
	// join), in config order; nil for a single input.
	Inputs []string
	// Decode turns the rows of one input into the table a join reads: it
	// decodes the column valueField with the join's codec (json). The
	// buffer owns the record it returns. Nil: joins are refused.
	Decode func(rec arrow.RecordBatch, valueField string) (arrow.RecordBatch, error)

	// alloc allocates the batches the buffer builds (tests check it);
	// nil is memory.DefaultAllocator.
	alloc memory.Allocator
}

// New returns a buffer of type typ (memory, tumbling_window,
// session_window or sliding_window) configured by config, the buffer's
// keys as a JSON object, whose periods start at start. Its errors name the
// key at fault; the stream package checks configs before, with the same
// rules.
func New(typ string, config json.RawMessage, start time.Time, opts Options) (Buffer, error) {
	if opts.alloc == nil {
		opts.alloc = memory.DefaultAllocator
	}
	var cfg map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	if len(bytes.TrimSpace(config)) == 0 {
		cfg = map[string]json.RawMessage{}
	} else if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%s buffer: config must be an object: %v", typ, err)
	}
	k := keys{typ: typ, cfg: cfg}
	switch typ {
	case "memory":
		return newMemory(k, start, opts)
	case "tumbling_window":
		return newTumbling(k, start, opts)
	case "session_window":
		return newSession(k, opts)
	case "sliding_window":
		return newSliding(k, opts)
	}
	return nil, fmt.Errorf("unknown buffer type %q (available: memory, session_window, sliding_window, tumbling_window)", typ)
}

// keys reads a buffer's config keys, naming the key in its errors.
type keys struct {
	typ string
	cfg map[string]json.RawMessage
}

// check refuses keys other than known.
func (k keys) check(known ...string) error {
	for name := range k.cfg {
		found := false
		for _, kn := range known {
			found = found || kn == name
		}
		if !found {
			return fmt.Errorf("%s buffer: %s: unknown field (known fields: %v)", k.typ, name, known)
		}
	}
	return nil
}

// positive reads the required integer key name, which must be > 0.
func (k keys) positive(name string) (int64, error) {
	raw, ok := k.cfg[name]
	if !ok || string(raw) == "null" {
		return 0, fmt.Errorf("%s buffer: %s: missing (an integer > 0)", k.typ, name)
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("%s buffer: %s: must be an integer (got %s)", k.typ, name, raw)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%s buffer: %s: must be > 0 (got %d)", k.typ, name, n)
	}
	return n, nil
}

// duration reads the required humantime key name, which must be > 0.
func (k keys) duration(name string) (time.Duration, error) {
	raw, ok := k.cfg[name]
	if !ok || string(raw) == "null" {
		return 0, fmt.Errorf("%s buffer: %s: missing (a duration such as 10s, 500ms or 1h 30m)", k.typ, name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s buffer: %s: must be a duration string such as 1s, 500ms or 1h 30m (got %s)", k.typ, name, raw)
	}
	d, err := humantime.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%s buffer: %s: %v", k.typ, name, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s buffer: %s: must be > 0", k.typ, name)
	}
	return d, nil
}

func newMemory(k keys, start time.Time, opts Options) (Buffer, error) {
	if err := k.check("capacity", "timeout"); err != nil {
		return nil, err
	}
	capacity, err := k.positive("capacity")
	if err != nil {
		return nil, err
	}
	timeout, err := k.duration("timeout")
	if err != nil {
		return nil, err
	}
	return &memBuffer{capacity: capacity, tick: periodic{next: start.Add(timeout), period: timeout}, q: queue{alloc: opts.alloc}}, nil
}

func newTumbling(k keys, start time.Time, opts Options) (Buffer, error) {
	if err := k.check("interval", "join"); err != nil {
		return nil, err
	}
	interval, err := k.duration("interval")
	if err != nil {
		return nil, err
	}
	w, err := newWindow(k, opts)
	if err != nil {
		return nil, err
	}
	return &tumbling{w: w, tick: periodic{next: start.Add(interval), period: interval}}, nil
}

func newSession(k keys, opts Options) (Buffer, error) {
	if err := k.check("gap", "join"); err != nil {
		return nil, err
	}
	gap, err := k.duration("gap")
	if err != nil {
		return nil, err
	}
	w, err := newWindow(k, opts)
	if err != nil {
		return nil, err
	}
	return &session{w: w, gap: gap}, nil
}

func newSliding(k keys, opts Options) (Buffer, error) {
	if err := k.check("window_size", "slide_size", "interval"); err != nil {
		return nil, err
	}
	size, err := k.positive("window_size")
	if err != nil {
		return nil, err
	}
	slide, err := k.positive("slide_size")
	if err != nil {
		return nil, err
	}
	if _, err := k.duration("interval"); err != nil {
		return nil, err
	}
	if size < slide {
		return nil, fmt.Errorf("sliding_window buffer: window_size: must be ≥ slide_size (got window_size %d, slide_size %d)", size, slide)
	}
	return &sliding{size: int(size), slide: int(slide), alloc: opts.alloc}, nil
}

// errClosed is the error Close releases held acknowledgements with.
var errClosed = errors.New("buffer closed")
