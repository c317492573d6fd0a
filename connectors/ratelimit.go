package connectors

import (
	"context"
	"time"
)

// RateLimiter is a token bucket over rows, for sources with a rate_per_sec
// option: it refills at rate tokens per second up to one second's worth
// (at least one row), and a batch takes as many tokens as it has rows,
// waiting for the debt to be repaid first. A nil RateLimiter does not
// limit. It is not safe for concurrent use: one per source subtask.
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
	return &RateLimiter{rate: rate, burst: max(rate, 1), tokens: max(rate, 1)}
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
