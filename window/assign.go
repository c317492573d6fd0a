package window

import (
	"fmt"
	"math"

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
		if f.v > MaxSpanMS {
			add(f.name, "must be <= %d (1000 years; got %d)", int64(MaxSpanMS), f.v)
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

// MaxSpanMS bounds window sizes, slides and gaps: 1000 years.
const MaxSpanMS = 1000 * 365 * 24 * 3600 * 1000

// maxWindowsPerEvent bounds size/slide: every event updates that many
// windows.
const maxWindowsPerEvent = 10000

// TumblingStart is the start of the tumbling window of the given size that
// contains t: the largest multiple of size that is <= t.
func TumblingStart(t, size int64) int64 { return FloorDiv(t, size) * size }

// SlidingStarts appends to dst, in ascending order, the start of every
// sliding window (starts are multiples of slide, each window is [s, s+size))
// that contains t. For size=5, slide=2: t=4 → 0, 2, 4; t=0 → −4, −2, 0;
// t=5 → 2, 4. There is no truncating division: the count is
// whatever the window boundaries give, which differs between events when
// size is not a multiple of slide.
func SlidingStarts(dst []int64, t, size, slide int64) []int64 {
	last := FloorDiv(t, slide) * slide
	// The first start is the smallest multiple of slide greater than
	// t − size.
	first := (FloorDiv(t-size, slide) + 1) * slide
	for s := first; s <= last; s += slide {
		dst = append(dst, s)
	}
	return dst
}

// InRange reports whether windows of span ms around t stay inside int64:
// events this close to the ends of time cannot be windowed.
func InRange(t, span int64) bool {
	return t > math.MinInt64+2*span && t < math.MaxInt64-2*span
}
