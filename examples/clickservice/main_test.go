package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test run this very program as a child process: with
// CLICKSERVICE_MAIN=1 the test binary is the service (main with the
// command line's flags), so the test can SIGKILL a real one.
func TestMain(m *testing.M) {
	if os.Getenv("CLICKSERVICE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The proof that an embedding service loses no accepted push: the service is
// SIGKILLed at random moments at least 20 times and restarted on the same
// data directory while a client POSTs clicks one at a time, each retried
// until it gets a 200 and only then followed by the next (so event time stays
// in order). After the last restart a click an hour later fires every window,
// and every click that got a 200 is counted in its window's result.
//
// The bounds, asserted per (user, window) on the result with the largest
// count:
//
//   - accepted ≤ count: nothing acknowledged is lost.
//   - count ≤ accepted + unanswered: a POST that got no answer (the
//     connection broke: the process was killed while handling it) may have
//     reached the WAL before the kill, and its retry is then a second copy.
//     Those are the only events counted twice; POSTs refused at connect or
//     answered 503 (the job had stopped; nothing taken) never are.
//   - count == accepted ⇒ total == the sum of the accepted amounts (each
//     click's amount is its unique sequence number): no click counted in
//     place of another.
//
// The clicks have no ID, so a retry may count twice; with IDs a retry
// counts once (TestSIGKILLRetriedClicksCountOnce).
//
// Window results are at least once. After a restart the checkpoint's
// state and the WAL's replay bring back every window not yet acknowledged,
// and a window whose result the sink wrote but whose acknowledgement had
// not yet committed the operator's floor (window/floor.go) fires again:
// at most the one firing in flight per kill, here at most 5 lines (one
// window per user ends at each 10 s boundary), usually none. Should the
// floors not carry across the restore (internal/runtime carriedMarks),
// every window acknowledged since the restored checkpoint fires again.
// Duplicate lines are counted and logged, not failed.
func TestSIGKILLLosesNoAcceptedClick(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLs the service 20 times (about a minute); run without -short")
	}
	dir := t.TempDir()
	if keep := os.Getenv("CLICKSERVICE_TEST_DIR"); keep != "" {
		// Keep the data and the runs' logs to look at after a failure.
		var err error
		if dir, err = os.MkdirTemp(keep, "sigkill-"); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	base := "http://" + addr
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))

	svc := &services{t: t, dir: dir, data: data, addr: addr}
	defer svc.killAll()

	cl := newClient(base)
	go cl.run()
	defer cl.abort() // after a failure: stop retrying at once

	const kills = 20
	startupKills := 0
	for k := 0; k < kills; k++ {
		p := svc.start()
		if k%5 == 4 {
			// Now and then a kill while the service starts: restoring the
			// checkpoint, replaying the log.
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			startupKills++
		} else {
			svc.waitReady(p)
			// 0.2–3 s of running: some runs complete a checkpoint (every
			// 2 s), others are killed before their first.
			time.Sleep(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
		}
		svc.kill(p)
	}

	// The last run: let the client go on a little, then stop it after the
	// click in flight got its 200.
	p := svc.start()
	svc.waitReady(p)
	time.Sleep(500 * time.Millisecond)
	events, err := cl.stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) < 200 {
		t.Fatalf("only %d clicks accepted over %d runs: the service hardly ran (see %s/run-*.log)", len(events), kills+1, dir)
	}

	// A click an hour of event time later, from a user of its own, moves
	// the watermark past the end of every window.
	last := events[len(events)-1].click.TS
	flush := Click{User: "flush", Amount: -1, TS: last.Add(time.Hour)}
	if res := post(cl.http, base, flush); res != answered200 {
		t.Fatalf("the flush click was not accepted: %v", res)
	}

	// Every window holding an accepted click, and what was sent to it.
	type key struct {
		user  string
		start int64 // ms
	}
	type expect struct {
		accepted, unanswered int
		sum                  int64
	}
	want := map[key]*expect{}
	unanswered := 0
	for _, e := range events {
		k := key{e.click.User, e.click.TS.Truncate(10 * time.Second).UnixMilli()}
		w := want[k]
		if w == nil {
			w = &expect{}
			want[k] = w
		}
		w.accepted++
		w.sum += e.click.Amount
		w.unanswered += e.unanswered
		unanswered += e.unanswered
	}

	// Wait until the results cover every window. The flush fires them all
	// at once, so once the file has stopped growing for 15 s, what is
	// missing is lost; the checks below then name it.
	lastLen, lastChange := -1, time.Now()
	for time.Since(lastChange) < 15*time.Second {
		results := getResults(t, cl.http, base)
		seen := map[key]bool{}
		for _, r := range results {
			seen[key{r.User, r.Start.UnixMilli()}] = true
		}
		missing := 0
		for k := range want {
			if !seen[k] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if len(results) != lastLen {
			lastLen, lastChange = len(results), time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A graceful stop exits 0.
	if err := svc.terminate(p); err != nil {
		t.Fatalf("after SIGTERM: %v (want exit 0); log:\n%s", err, p.log())
	}

	// The file, after the stop, holds whatever the last run still wrote.
	results := readResults(t, filepath.Join(data, "results.jsonl"))
	byKey := map[key][]Result{}
	for _, r := range results {
		if r.User == "flush" {
			continue
		}
		k := key{r.User, r.Start.UnixMilli()}
		byKey[k] = append(byKey[k], r)
	}
	keys := slices.SortedFunc(maps.Keys(want), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.user, b.user))
	})
	// problem reports the first 20 windows that break a bound; the totals
	// follow at the end.
	problems := 0
	problem := func(k key, format string, args ...any) {
		if problems++; problems <= 20 {
			t.Errorf("%s window %s: %s", k.user, time.UnixMilli(k.start).UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
		}
	}
	var dupLines, dupWindows, differing, countedTwice, lost, missing int
	for _, k := range keys {
		w, rs := want[k], byKey[k]
		if len(rs) == 0 {
			lost += w.accepted
			missing++
			problem(k, "no result: %d accepted clicks lost", w.accepted)
			continue
		}
		best := rs[0]
		for _, r := range rs[1:] {
			if r.Clicks > best.Clicks {
				best = r
			}
		}
		if len(rs) > 1 {
			dupWindows++
			dupLines += len(rs) - 1
			if slices.ContainsFunc(rs, func(r Result) bool { return r.Clicks != rs[0].Clicks || r.Total != rs[0].Total }) {
				differing++
				t.Logf("%s window %s: emitted %d times with different values: %+v", k.user, time.UnixMilli(k.start).UTC().Format(time.TimeOnly), len(rs), rs)
			}
		}
		switch {
		case best.Clicks < int64(w.accepted):
			lost += w.accepted - int(best.Clicks)
			problem(k, "%d clicks counted, %d accepted (200): accepted clicks lost", best.Clicks, w.accepted)
		case best.Clicks > int64(w.accepted+w.unanswered):
			problem(k, "%d clicks counted, but only %d accepted and %d POSTed without an answer: clicks counted twice", best.Clicks, w.accepted, w.unanswered)
		case best.Clicks == int64(w.accepted) && best.Total != w.sum:
			problem(k, "%d clicks as accepted, but a total of %d instead of %d: a click counted in place of another", best.Clicks, best.Total, w.sum)
		}
		countedTwice += max(int(best.Clicks)-w.accepted, 0)
	}
	for k := range byKey {
		if want[k] == nil {
			problem(k, "a result, but no click was sent to this window")
		}
	}
	t.Logf("%d kills (%d while starting), %d runs; %d clicks accepted, %d POSTs unanswered (killed while handling), %d refused while down",
		kills, startupKills, kills+1, len(events), unanswered, cl.refusedCount())
	t.Logf("%d windows; %d emitted more than once (%d duplicate lines, %d with differing values); %d clicks counted twice (bound: %d unanswered POSTs)",
		len(want), dupWindows, dupLines, differing, countedTwice, unanswered)
	if problems > 0 {
		t.Errorf("%d windows break a bound: %d accepted clicks lost, %d windows without any result; data and logs in %s", problems, lost, missing, dir)
	}
}

// services starts and kills the service's processes.
type services struct {
	t               *testing.T
	dir, data, addr string
	flags           []string // more command-line flags
	runs            int
	running         *proc
}

// proc is one run of the service.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process ended; then err is set
	err     error
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func (s *services) start() *proc {
	s.t.Helper()
	s.runs++
	logPath := filepath.Join(s.dir, fmt.Sprintf("run-%02d.log", s.runs))
	f, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", s.addr, "-data", s.data}, s.flags...)...)
	cmd.Env = append(os.Environ(), "CLICKSERVICE_MAIN=1")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p := &proc{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.running = p
	return p
}

// waitReady polls /healthz until the job runs; the process ending first
// fails the test.
func (s *services) waitReady(p *proc) {
	s.t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			s.t.Fatalf("run %d ended before it was ready (%v); log:\n%s", s.runs, p.err, p.log())
		default:
		}
		resp, err := client.Get("http://" + s.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("run %d not ready after 60 s; log:\n%s", s.runs, p.log())
}

// kill SIGKILLs p and checks that the kill, not something else, ended it.
func (s *services) kill(p *proc) {
	s.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	s.running = nil
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !ws.Signaled() {
		s.t.Fatalf("run %d ended by itself before the kill (%v); log:\n%s", s.runs, p.err, p.log())
	}
}

// terminate sends SIGTERM and waits for the exit.
func (s *services) terminate(p *proc) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		return errors.New("still running 2 minutes after SIGTERM")
	}
	s.running = nil
	return p.err
}

func (s *services) killAll() {
	if p := s.running; p != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// outcome is what became of one POST.
type outcome int

const (
	answered200 outcome = iota // accepted: in the WAL
	refused                    // not received (connection refused) or answered 503: not taken
	unanswered                 // the connection broke, or a 500: maybe taken
	badRequest                 // a 4xx: the test's fault
)

// event is one click and how many of its POSTs went unanswered before one
// got its 200.
type event struct {
	click      Click
	unanswered int
}

// client POSTs clicks one at a time, each until it gets a 200.
type client struct {
	http    *http.Client
	base    string
	stopReq chan struct{} // stop after the click in flight is accepted
	quit    chan struct{} // stop now
	done    chan struct{}

	mu      sync.Mutex
	events  []event
	refused int
	err     error
}

func newClient(base string) *client {
	return &client{
		// A new connection per POST: a kill breaks only the POST in flight,
		// never a kept-alive connection the next one would find dead.
		http:    &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		base:    base,
		stopReq: make(chan struct{}),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (c *client) run() {
	defer close(c.done)
	users := []string{"ann", "bob", "cid", "dee", "eve"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seq := int64(1); ; seq++ {
		select {
		case <-c.stopReq:
			return
		default:
		}
		// The sequence number is the amount: totals tell which clicks a
		// window counted. 100 ms of event time per click: ~100 clicks per
		// 10 s window, over 5 users.
		ev := event{click: Click{User: users[rng.IntN(len(users))], Amount: seq, TS: t0.Add(time.Duration(seq) * 100 * time.Millisecond)}}
		for accepted := false; !accepted; {
			switch post(c.http, c.base, ev.click) {
			case answered200:
				accepted = true
				continue
			case refused:
				c.mu.Lock()
				c.refused++
				c.mu.Unlock()
			case unanswered:
				ev.unanswered++
			case badRequest:
				c.mu.Lock()
				c.err = fmt.Errorf("click %d: %+v refused as a bad request", seq, ev.click)
				c.mu.Unlock()
				return
			}
			select {
			case <-c.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		c.mu.Lock()
		c.events = append(c.events, ev)
		c.mu.Unlock()
	}
}

// stop ends the client after the click in flight got its 200 and returns
// every accepted click.
func (c *client) stop() ([]event, error) {
	close(c.stopReq)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events, c.err
}

func (c *client) abort() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
}

func (c *client) refusedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

func post(hc *http.Client, base string, ck Click) outcome {
	body, _ := json.Marshal(ck)
	resp, err := hc.Post(base+"/clicks", "application/json", bytes.NewReader(body))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return refused
		}
		return unanswered
	}
	resp.Body.Close()
	// The status line is written after Push returned: the status counts,
	// whether or not the body arrives.
	switch {
	case resp.StatusCode == http.StatusOK:
		return answered200
	case resp.StatusCode == http.StatusServiceUnavailable:
		return refused
	case resp.StatusCode >= 500:
		return unanswered
	default:
		return badRequest
	}
}

func getResults(t *testing.T, hc *http.Client, base string) []Result {
	t.Helper()
	resp, err := hc.Get(base + "/results")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /results: %s", resp.Status)
	}
	return parseResults(t, resp.Body)
}

func readResults(t *testing.T, path string) []Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return parseResults(t, f)
}

func parseResults(t *testing.T, r io.Reader) []Result {
	t.Helper()
	var out []Result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var res Result
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("result line %q: %v", sc.Text(), err)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// freeAddr returns a loopback address no one listens on now; every run of
// the service uses it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A bad body is a 400 that names the field; one click or an array are
// accepted alike.
func TestDecodeClicks(t *testing.T) {
	for _, c := range []struct {
		body string
		n    int
		err  string
	}{
		{`{"user":"ann","amount":3,"ts":"2026-01-01T00:00:01Z"}`, 1, ""},
		{` [{"user":"ann","ts":"2026-01-01T00:00:01Z"},{"user":"bob","ts":"2026-01-01T00:00:02.5Z"}] `, 2, ""},
		{`{"user":"ann","amount":"3","ts":"2026-01-01T00:00:01Z"}`, 0, `field "amount": want int64, got a JSON string`},
		{`[{"user":"ann","ts":"2026-01-01T00:00:01Z"},{"user":"bob","ts":"yesterday"}]`, 0, `clicks[1]: field "ts": want an RFC 3339 time`},
		{`{"usr":"ann","ts":"2026-01-01T00:00:01Z"}`, 0, `field "usr": unknown`},
		{`{"amount":1,"ts":"2026-01-01T00:00:01Z"}`, 0, `field "user": required`},
		{`{"user":"ann"}`, 0, `field "ts": required`},
		{`[]`, 0, `body: no clicks`},
		{` `, 0, `body: no clicks`},
		{`{"user":"ann"`, 0, `unexpected EOF`},
	} {
		got, err := decodeClicks(strings.NewReader(c.body))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one containing %q", c.body, err, c.err)
		case c.err == "" && len(got) != c.n:
			t.Errorf("%s: %d clicks, want %d", c.body, len(got), c.n)
		}
	}
}
