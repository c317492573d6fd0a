package eventtime

import "math"

// MaxSpanMS bounds window sizes, slides and gaps: 1000 years.
const MaxSpanMS = 1000 * 365 * 24 * 3600 * 1000

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
