package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The proof that a client retrying every request is counted exactly once:
// the service is SIGKILLed at random moments at least 10 times while a
// client POSTs requests of 1 to 3 clicks, each click with its own ID. The
// client drops connections at random (it gives up on a request at a random
// moment, so the service may have taken the clicks or not), retries every
// request until it gets a 200, and now and then sends an answered request
// again. After the last restart every (user, window) result must hold
// exactly the distinct clicks sent to it, computed from the clicks
// themselves: their count and the sum of their amounts (each click's
// amount is its unique sequence number), in every line written for the
// window. And every answered request sent again must come back with all
// its clicks acknowledged as duplicates.
func TestSIGKILLRetriedClicksCountOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLs the service 12 times (about 30 s); run without -short")
	}
	dir := t.TempDir()
	if keep := os.Getenv("CLICKSERVICE_TEST_DIR"); keep != "" {
		var err error
		if dir, err = os.MkdirTemp(keep, "retries-"); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	base := "http://" + addr
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 31))

	// Small WAL segments: the log lets go of the clicks a checkpoint
	// holds, and their IDs then live in the key log beside it only.
	svc := &services{t: t, dir: dir, data: data, addr: addr, flags: []string{"-wal-segment-bytes", "65536"}}
	defer svc.killAll()
	cl := newRetryClient(base, seed)
	go cl.run()
	defer cl.abort()

	const kills = 12
	for k := range kills {
		p := svc.start()
		if k%4 == 3 {
			// A kill while the service starts: reading the key log,
			// replaying the WAL.
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		} else {
			svc.waitReady(p)
			// 0.5–3.5 s of running: most runs complete a checkpoint (every
			// 2 s), after which the WAL lets go of the clicks it holds.
			time.Sleep(time.Duration(500+rng.IntN(3000)) * time.Millisecond)
		}
		svc.kill(p)
	}
	p := svc.start()
	svc.waitReady(p)
	time.Sleep(300 * time.Millisecond)
	clicks, err := cl.stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(clicks) < 200 {
		t.Fatalf("only %d clicks accepted over %d runs: the service hardly ran (see %s/run-*.log)", len(clicks), kills+1, dir)
	}
	// A click an hour later fires every window.
	flush := Click{ID: "flush", User: "flush", Amount: -1, TS: clicks[len(clicks)-1].TS.Add(time.Hour)}
	if _, ok := cl.send([]Click{flush}, false); !ok {
		t.Fatal("the flush click was not accepted")
	}

	want := windowModel(clicks)
	waitForWindows(t, cl.http, base, want)
	if err := svc.terminate(p); err != nil {
		t.Fatalf("after SIGTERM: %v (want exit 0); log:\n%s", err, p.log())
	}
	checkExactWindows(t, readResults(t, filepath.Join(data, "results.jsonl")), want, dir)
	st := cl.stats()
	t.Logf("%d kills, %d runs; %d clicks in %d requests; %d POSTs dropped by the client, %d refused while down, %d 500s; "+
		"%d answered requests sent again; %d clicks acknowledged as duplicates",
		kills, kills+1, len(clicks), st.requests, st.dropped, st.refused, st.failed, st.resent, st.duplicates)
	if st.dropped == 0 || st.resent == 0 {
		t.Errorf("the client dropped %d POSTs and sent %d answered requests again: the test proved nothing of retries", st.dropped, st.resent)
	}
}

// windowKey is a (user, window start) of the job's 10 s windows.
type windowKey struct {
	user  string
	start int64 // ms
}

// windowTotals is what a window must hold.
type windowTotals struct{ clicks, total int64 }

// windowModel is the reference: the distinct clicks (by ID) counted and
// summed per user and 10 s window by a plain loop.
func windowModel(clicks []Click) map[windowKey]windowTotals {
	ids := map[string]bool{}
	want := map[windowKey]windowTotals{}
	for _, c := range clicks {
		if ids[c.ID] {
			continue
		}
		ids[c.ID] = true
		k := windowKey{c.User, c.TS.Truncate(10 * time.Second).UnixMilli()}
		w := want[k]
		want[k] = windowTotals{w.clicks + 1, w.total + c.Amount}
	}
	return want
}

// waitForWindows polls GET /results until every window of want has a
// result; once they have stopped coming for 15 s, the check that follows
// names what is missing.
func waitForWindows(t *testing.T, hc *http.Client, base string, want map[windowKey]windowTotals) {
	t.Helper()
	lastLen, lastChange := -1, time.Now()
	for time.Since(lastChange) < 15*time.Second {
		results := getResults(t, hc, base)
		seen := map[windowKey]bool{}
		for _, r := range results {
			seen[windowKey{r.User, r.Start.UnixMilli()}] = true
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(want)), func(k windowKey) bool { return !seen[k] }) {
			return
		}
		if len(results) != lastLen {
			lastLen, lastChange = len(results), time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkExactWindows checks that every line written for a window holds
// exactly its model totals, that every window has one, and that no other
// window has any.
func checkExactWindows(t *testing.T, results []Result, want map[windowKey]windowTotals, dir string) {
	t.Helper()
	byKey := map[windowKey][]Result{}
	for _, r := range results {
		if r.User != "flush" {
			k := windowKey{r.User, r.Start.UnixMilli()}
			byKey[k] = append(byKey[k], r)
		}
	}
	keys := slices.SortedFunc(maps.Keys(want), func(a, b windowKey) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.user, b.user))
	})
	problems, lines := 0, 0
	problem := func(k windowKey, format string, args ...any) {
		if problems++; problems <= 20 {
			t.Errorf("%s window %s: %s", k.user, time.UnixMilli(k.start).UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
		}
	}
	for _, k := range keys {
		w, rs := want[k], byKey[k]
		if len(rs) == 0 {
			problem(k, "no result: %d clicks lost", w.clicks)
		}
		lines += len(rs)
		for _, r := range rs {
			if r.Clicks != w.clicks || r.Total != w.total {
				problem(k, "%d clicks totalling %d, want exactly %d totalling %d", r.Clicks, r.Total, w.clicks, w.total)
			}
		}
	}
	for k := range byKey {
		if _, ok := want[k]; !ok {
			problem(k, "a result, but no click was sent to this window")
		}
	}
	t.Logf("%d windows, all exact; %d result lines (a line written again after a kill has the same values)", len(want), lines)
	if problems > 0 {
		t.Errorf("%d windows are not exact; data and logs in %s", problems, dir)
	}
}

// retryClient POSTs requests of clicks with IDs, one request at a time,
// each until it gets a 200, dropping connections at random, and now and
// then sends an answered request again.
type retryClient struct {
	http    *http.Client
	base    string
	rng     *rand.Rand // used by run (and by send, which run calls)
	stopReq chan struct{}
	quit    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	clicks []Click // every click of every answered request, in order
	st     retryStats
	err    error
}

type retryStats struct {
	requests, dropped, refused, failed, resent, duplicates int
}

func newRetryClient(base string, seed uint64) *retryClient {
	return &retryClient{
		http:    &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		base:    base,
		rng:     rand.New(rand.NewPCG(seed, 1)),
		stopReq: make(chan struct{}),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (c *retryClient) run() {
	defer close(c.done)
	users := []string{"ann", "bob", "cid", "dee", "eve"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var answered [][]Click
	seq := int64(0)
	for {
		select {
		case <-c.stopReq:
			return
		default:
		}
		// 100 ms of event time per click, in order: about 100 clicks per
		// 10 s window over 5 users. The amount is the sequence number.
		req := make([]Click, 1+c.rng.IntN(3))
		for i := range req {
			seq++
			req[i] = Click{ID: fmt.Sprintf("c%d", seq), User: users[c.rng.IntN(len(users))], Amount: seq, TS: t0.Add(time.Duration(seq) * 100 * time.Millisecond)}
		}
		if _, ok := c.send(req, true); !ok {
			return
		}
		c.mu.Lock()
		c.clicks = append(c.clicks, req...)
		c.st.requests++
		c.mu.Unlock()
		answered = append(answered, req)
		if c.rng.IntN(5) == 0 {
			// An answered request again (the client could not tell it
			// was answered): every click of it is a duplicate. A recent
			// one, or any.
			old := answered[max(len(answered)-1-c.rng.IntN(50), 0)]
			if c.rng.IntN(2) == 0 {
				old = answered[c.rng.IntN(len(answered))]
			}
			dups, ok := c.send(old, true)
			if !ok {
				return
			}
			c.mu.Lock()
			c.st.resent++
			if dups != len(old) && c.err == nil {
				c.err = fmt.Errorf("an answered request of %d clicks (%s…) sent again: %d acknowledged as duplicates, want all", len(old), old[0].ID, dups)
			}
			c.mu.Unlock()
		}
	}
}

// send POSTs req until it gets a 200 and returns the duplicates the
// answer reported; false when the client was told to quit or failed.
// With drop, it gives up on a POST now and then at a random moment,
// closing its connection, and retries.
func (c *retryClient) send(req []Click, drop bool) (int, bool) {
	body, _ := json.Marshal(req)
	for {
		var delay time.Duration = -1
		if drop && c.rng.IntN(4) == 0 {
			delay = time.Duration(c.rng.IntN(4000)) * time.Microsecond
		}
		dups, res := c.postOnce(body, delay)
		c.mu.Lock()
		switch res {
		case answered200:
			c.st.duplicates += dups
			c.mu.Unlock()
			return dups, true
		case refused:
			c.st.refused++
		case unanswered:
			if delay >= 0 {
				c.st.dropped++
			} else {
				c.st.failed++
			}
		case badRequest:
			c.err = fmt.Errorf("request %s refused as a bad request", body)
			c.mu.Unlock()
			return 0, false
		}
		c.mu.Unlock()
		select {
		case <-c.quit:
			return 0, false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// postOnce POSTs body; with delay ≥ 0 it gives up after delay (closing
// the connection, the answer unread). A 200 counts only with its body
// read: a client that did not read it cannot know its clicks were taken.
func (c *retryClient) postOnce(body []byte, delay time.Duration) (int, outcome) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if delay >= 0 {
		t := time.AfterFunc(delay, cancel)
		defer t.Stop()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/clicks", bytes.NewReader(body))
	if err != nil {
		return 0, badRequest
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, refused
		}
		return 0, unanswered
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return 0, unanswered
	case resp.StatusCode == http.StatusOK:
		var ans struct {
			Accepted   int `json:"accepted"`
			Duplicates int `json:"duplicates"`
		}
		if json.Unmarshal(b, &ans) != nil {
			return 0, badRequest
		}
		return ans.Duplicates, answered200
	case resp.StatusCode == http.StatusServiceUnavailable:
		return 0, refused
	case resp.StatusCode >= 500:
		return 0, unanswered
	}
	return 0, badRequest
}

// stop ends the client after the request in flight got its 200 and
// returns the clicks of every answered request.
func (c *retryClient) stop() ([]Click, error) {
	close(c.stopReq)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clicks, c.err
}

func (c *retryClient) abort() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
}

func (c *retryClient) stats() retryStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}
