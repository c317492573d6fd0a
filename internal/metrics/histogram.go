// Package metrics holds the lock-free histogram the engine keeps for its
// latencies and sizes: observing is a few atomic adds,
// with no lock and no allocation, so the hot paths (a sink's write, a WAL's
// fsync, a checkpoint round) pay next to nothing for it; a scrape reads a
// Snapshot and turns it into a Prometheus const histogram.
package metrics

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

// Histogram counts observations of an int64 quantity (nanoseconds, bytes)
// in fixed buckets. The zero value is not usable; see NewHistogram. All
// methods are safe for concurrent use.
type Histogram struct {
	// bounds are the buckets' inclusive upper bounds in the observed
	// unit, ascending; counts has one more slot, for +Inf.
	bounds []int64
	// reported are the bounds as given, in the reported unit.
	reported []float64
	counts   []atomic.Uint64
	sum      atomic.Int64
	// scale converts the observed unit to the reported one (1e-9 for
	// nanoseconds reported as seconds).
	scale float64
}

// NewHistogram returns a histogram whose buckets end at bounds, given in
// the reported unit (seconds, bytes) and ascending; observed values are
// in the reported unit divided by scale (scale 1e-9: nanoseconds
// observed, seconds reported).
func NewHistogram(bounds []float64, scale float64) *Histogram {
	h := &Histogram{bounds: make([]int64, len(bounds)), reported: append([]float64(nil), bounds...), counts: make([]atomic.Uint64, len(bounds)+1), scale: scale}
	for i, b := range bounds {
		h.bounds[i] = int64(math.Round(b / scale))
	}
	return h
}

// Duration bucket bounds in seconds: 1 ms to 1 min in about ×2.5 steps,
// for what takes milliseconds to a minute (a checkpoint, a pause).
var DurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// LatencyBuckets are bounds in seconds for what takes microseconds to
// seconds (a sink's write, a WAL fsync): 50 µs to 10 s.
var LatencyBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}

// SizeBuckets are bounds in bytes, 1 KiB to 16 GiB by ×4 (what a
// checkpoint uploads).
var SizeBuckets = []float64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30, 16 << 30}

// NewDurationHistogram returns a histogram of durations (ObserveDuration)
// reported in seconds, with the given bounds in seconds.
func NewDurationHistogram(bounds []float64) *Histogram { return NewHistogram(bounds, 1e-9) }

// Observe counts one value in the observed unit.
func (h *Histogram) Observe(v int64) {
	// Bucket counts are few (≤ 16): a linear scan beats a binary search.
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// ObserveDuration counts one duration (a histogram with scale 1e-9).
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(int64(d)) }

// Snapshot is a histogram's state, in the form
// prometheus.MustNewConstHistogram takes.
type Snapshot struct {
	// Count is the number of observations, Sum their total in the
	// reported unit.
	Count uint64
	Sum   float64
	// Buckets maps each upper bound (reported unit) to the cumulative
	// count of observations at or below it; +Inf is Count.
	Buckets map[float64]uint64
}

// Snapshot reads the histogram. Observations that land while it reads may
// be counted in the buckets but not in Sum (or the reverse); Count is the
// buckets' total, so the buckets and Count always agree.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Buckets: make(map[float64]uint64, len(h.bounds))}
	var cum uint64
	for i, b := range h.reported {
		cum += h.counts[i].Load()
		s.Buckets[b] = cum
	}
	s.Count = cum + h.counts[len(h.bounds)].Load()
	s.Sum = float64(h.sum.Load()) * h.scale
	return s
}

// Bounds returns the bucket bounds in the reported unit, ascending.
func (s Snapshot) Bounds() []float64 {
	out := make([]float64, 0, len(s.Buckets))
	for b := range s.Buckets {
		out = append(out, b)
	}
	sort.Float64s(out)
	return out
}
