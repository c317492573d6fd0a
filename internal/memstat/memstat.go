// Package memstat measures the process's memory for benchmarks: the peak
// of its anonymous resident memory over a stretch of work.
package memstat

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Sampler records the peak of the process's anonymous resident memory
// (Linux: RssAnon; the heap and Badger's arenas, not the page cache that
// memory-mapped files occupy), sampled every 10 ms from a GC'd start
// until Stop.
type Sampler struct {
	stop chan struct{}
	done chan int64
}

// Start collects garbage, returns memory to the OS and starts sampling.
func Start() *Sampler {
	runtime.GC()
	debug.FreeOSMemory()
	s := &Sampler{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		peak := RSSAnon()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.done <- max(peak, RSSAnon())
				return
			case <-t.C:
				peak = max(peak, RSSAnon())
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the peak in bytes (0 where RssAnon
// is unknown).
func (s *Sampler) Stop() int64 {
	close(s.stop)
	return <-s.done
}

// RSSAnon is the process's anonymous resident memory in bytes, from
// /proc/self/status (0 where that is unavailable).
func RSSAnon() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
