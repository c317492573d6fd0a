package arkflowtest

import (
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// clock is the harness's fake clock (runtime.Clock): its time moves only
// when the test advances it, and each advance hands one tick to every live
// ticker, waiting until the ticker's source head has taken it, so that the
// tick is handled before anything the harness does next.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*ticker
}

type ticker struct {
	c       chan time.Time // unbuffered: a send returns once the head took it
	stopped chan struct{}
	once    sync.Once
}

func (t *ticker) C() <-chan time.Time { return t.c }
func (t *ticker) Stop()               { t.once.Do(func() { close(t.stopped) }) }

func newClock(start time.Time) *clock { return &clock{now: start} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) NewTicker(time.Duration) runtime.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &ticker{c: make(chan time.Time), stopped: make(chan struct{})}
	c.tickers = append(c.tickers, t)
	return t
}

// live returns how many tickers are live: the sources that follow the
// clock (processing time with a window downstream, idle timeouts).
func (c *clock) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.tickers {
		select {
		case <-t.stopped:
		default:
			n++
		}
	}
	return n
}

// advance moves the time by d and delivers one tick to every ticker not
// stopped, or gives up when done is closed (the job ended).
func (c *clock) advance(d time.Duration, done <-chan struct{}) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	live := c.tickers[:0]
	for _, t := range c.tickers {
		select {
		case <-t.stopped:
		default:
			live = append(live, t)
		}
	}
	c.tickers = live
	ts := append([]*ticker(nil), live...)
	c.mu.Unlock()
	for _, t := range ts {
		select {
		case t.c <- now:
		case <-t.stopped:
		case <-done:
			return
		}
	}
}
