package metrics

import (
	"sync"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	h := NewDurationHistogram([]float64{0.001, 0.01, 0.1})
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 50 * time.Millisecond, time.Second} {
		h.ObserveDuration(d)
	}
	s := h.Snapshot()
	if s.Count != 5 {
		t.Fatalf("count %d, want 5", s.Count)
	}
	want := map[float64]uint64{0.001: 2, 0.01: 3, 0.1: 4}
	for b, n := range want {
		if s.Buckets[b] != n {
			t.Errorf("bucket le=%v: %d, want %d (all: %v)", b, s.Buckets[b], n, s.Buckets)
		}
	}
	if got, wantSum := s.Sum, 0.0005+0.001+0.002+0.05+1; got < wantSum-1e-9 || got > wantSum+1e-9 {
		t.Errorf("sum %v, want %v", got, wantSum)
	}
	if b := s.Bounds(); len(b) != 3 || b[0] != 0.001 || b[2] != 0.1 {
		t.Errorf("bounds %v", b)
	}
}

func TestHistogramSizes(t *testing.T) {
	h := NewHistogram(SizeBuckets, 1)
	h.Observe(100)
	h.Observe(5000)
	s := h.Snapshot()
	if s.Buckets[1024] != 1 || s.Buckets[16<<10] != 2 || s.Count != 2 || s.Sum != 5100 {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestHistogramConcurrent observes from several goroutines while another
// snapshots: counts never go down and end at the total (run with -race).
func TestHistogramConcurrent(t *testing.T) {
	h := NewDurationHistogram(LatencyBuckets)
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				h.ObserveDuration(time.Duration(w*i) * time.Microsecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var last uint64
	for {
		s := h.Snapshot()
		if s.Count < last {
			t.Fatalf("count went down: %d after %d", s.Count, last)
		}
		last = s.Count
		select {
		case <-done:
			if s := h.Snapshot(); s.Count != workers*each {
				t.Fatalf("count %d, want %d", s.Count, workers*each)
			}
			return
		default:
		}
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewDurationHistogram(LatencyBuckets)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.ObserveDuration(time.Duration(i) * time.Microsecond)
	}
}
