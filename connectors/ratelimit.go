package connectors

import (
	"context"
	"time"
)

// rateLinger is how long a rate-limited source lets rows wait to share a
// batch: a batch holds at most the rows the rate allows in this time.
const rateLinger = 100 * time.Millisecond

// RateLimiter is a token bucket over rows, for sources with a rate_per_sec
// option. It refills at rate tokens per second up to what the rate allows
// in a linger of 100 ms (at least one row), and starts full; a batch takes
// as many tokens as it has rows, waiting until the bucket holds them. So a
// source that cuts its batches to BatchSize emits rate rows per second
// from its first Read, no batch holding more than 100 ms' worth of rows
// (or one row, at rates below 10 per second). A batch larger than the
// bucket goes when the bucket is full and owes the rest, which keeps the
// average but emits it in bursts. A nil RateLimiter does not limit. It is
// not safe for concurrent use: one per source subtask.
type RateLimiter struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter of rate rows per second, or nil (no
// limit) when rate <= 0.
func NewRateLimiter(rate float64) *RateLimiter {
	if rate <= 0 {
		return nil
	}
	// Divided rather than multiplied by rateLinger's seconds, so that
	// rates that are multiples of 10 give whole batches (50/s: 5 rows).
	burst := max(rate/(float64(time.Second)/float64(rateLinger)), 1)
	return &RateLimiter{rate: rate, burst: burst, tokens: burst}
}

// BatchSize returns the number of rows a source configured with batches
// of n rows should put in a batch: n, or fewer when the rate allows fewer
// in 100 ms, but at least 1 (so at 2 rows per second, batches of one row).
// The result depends on the rate and n alone, so batch boundaries do not
// depend on timing and a restarted source cuts the same batches. A nil
// limiter returns n.
func (l *RateLimiter) BatchSize(n int) int {
	if l == nil || float64(n) <= l.burst {
		return n
	}
	return max(int(l.burst), 1)
}

// Wait takes n tokens, sleeping until the bucket allows them. When ctx ends
// first it takes nothing and returns ctx.Err().
func (l *RateLimiter) Wait(ctx context.Context, n int) error {
	if l == nil {
		return ctx.Err()
	}
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens >= float64(n) || (l.tokens >= l.burst && float64(n) > l.burst) {
		// Enough tokens, or a batch larger than the bucket with a full
		// bucket: go now and owe the rest.
		l.tokens -= float64(n)
		return ctx.Err()
	}
	// Wait until the bucket holds n tokens (or is full, for big batches).
	need := min(float64(n), l.burst) - l.tokens
	d := time.Duration(need / l.rate * float64(time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	now = time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens -= float64(n)
	return nil
}
