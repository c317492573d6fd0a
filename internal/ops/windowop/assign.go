package windowop

import (
	"fmt"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Window types.
const (
	TypeTumbling = "tumbling"
	TypeSliding  = "sliding"
	TypeSession  = "session"
)

// Spec is a window's shape as written in a spec: {type: "tumbling",
// size_ms} | {type: "sliding", size_ms, slide_ms} | {type: "session",
// gap_ms}. Windows are half-open, [start, end).
type Spec struct {
	Type    string `json:"type"`
	SizeMS  int64  `json:"size_ms,omitempty"`
	SlideMS int64  `json:"slide_ms,omitempty"`
	GapMS   int64  `json:"gap_ms,omitempty"`
}

// Check reports every problem of the spec, with paths relative to it.
func (s Spec) Check(path string) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &job.FieldError{Path: path + "." + field, Reason: fmt.Sprintf(format, args...)})
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"size_ms", s.SizeMS}, {"slide_ms", s.SlideMS}, {"gap_ms", s.GapMS}} {
		if f.v > eventtime.MaxSpanMS {
			add(f.name, "must be <= %d (1000 years; got %d)", int64(eventtime.MaxSpanMS), f.v)
		}
	}
	switch s.Type {
	case TypeTumbling:
		if s.SizeMS <= 0 {
			add("size_ms", "must be > 0 (got %d)", s.SizeMS)
		}
		if s.SlideMS != 0 {
			add("slide_ms", "only sliding windows have a slide (type is %q)", s.Type)
		}
		if s.GapMS != 0 {
			add("gap_ms", "only session windows have a gap (type is %q)", s.Type)
		}
	case TypeSliding:
		if s.SizeMS <= 0 {
			add("size_ms", "must be > 0 (got %d)", s.SizeMS)
		}
		switch {
		case s.SlideMS <= 0:
			add("slide_ms", "must be > 0 (got %d)", s.SlideMS)
		case s.SizeMS > 0 && s.SlideMS > s.SizeMS:
			add("slide_ms", "must be <= size_ms=%d (got %d): a slide larger than the window would skip events", s.SizeMS, s.SlideMS)
		case s.SizeMS > 0 && s.SizeMS/s.SlideMS > maxWindowsPerEvent:
			add("slide_ms", "size_ms/slide_ms = %d windows per event is more than %d", s.SizeMS/s.SlideMS, maxWindowsPerEvent)
		}
		if s.GapMS != 0 {
			add("gap_ms", "only session windows have a gap (type is %q)", s.Type)
		}
	case TypeSession:
		if s.GapMS <= 0 {
			add("gap_ms", "must be > 0 (got %d)", s.GapMS)
		}
		if s.SizeMS != 0 || s.SlideMS != 0 {
			add("size_ms", "session windows have no size or slide, only gap_ms")
		}
	default:
		errs = append(errs, &job.FieldError{Path: path + ".type", Reason: fmt.Sprintf("must be tumbling, sliding or session (got %q)", s.Type)})
	}
	return errs
}

// maxWindowsPerEvent bounds size/slide: every event updates that many
// windows.
const maxWindowsPerEvent = 10000
