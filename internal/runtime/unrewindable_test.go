package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/leaktest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The "once" input is a source whose rows can be read only once
// (connectors.Unrewindable), as a push source's: rows handed to a run's
// feed reach that run only, and Seek never reads rows again, it only says
// which offset the next row gets. Its rows are clickSchema's (user,
// amount) in one partition, with offsets counting rows. A feed is either
// fed by hand (Push, End) or, with gen set, generates rows (the SIGKILL
// proof's child). The "tally" output keeps the last aggregates per user.
type onceFeed struct {
	mu     sync.Mutex
	queue  []arrow.RecordBatch
	notify chan struct{}
	ended  bool
	seeks  []int64
	gen    *onceGen
}

func newOnceFeed() *onceFeed { return &onceFeed{notify: make(chan struct{})} }

// Push hands rows to the source.
func (f *onceFeed) Push(users []string, amounts []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, clicks(users, amounts))
	close(f.notify)
	f.notify = make(chan struct{})
}

func (f *onceFeed) sought() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.seeks...)
}

// take returns the next rows, whose first offset is next.
func (f *onceFeed) take(ctx context.Context, next int64) (arrow.RecordBatch, error) {
	if f.gen != nil {
		return f.gen.take(ctx, next)
	}
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			rec := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return rec, nil
		}
		ended, notify := f.ended, f.notify
		f.mu.Unlock()
		if ended {
			return nil, connectors.ErrEndOfInput
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-notify:
		}
	}
}

type onceInput struct{ feed *onceFeed }

func (in onceInput) Schema() *arrow.Schema { return connectors.WithMeta(clickSchema) }
func (in onceInput) Partitions() int       { return 1 }
func (in onceInput) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	return &onceReader{feed: in.feed, op: info.OperatorID, tracker: connectors.NewTracker("")}, nil
}

type onceReader struct {
	feed    *onceFeed
	op      string
	next    int64 // offset of the next row
	tracker *connectors.Tracker
}

func (r *onceReader) Unrewindable()                    {}
func (r *onceReader) Connect(context.Context) error    { r.tracker.Start(0, r.next); return nil }
func (r *onceReader) Close(context.Context) error      { return nil }
func (r *onceReader) Positions() []connectors.Position { return r.tracker.Positions() }

func (r *onceReader) Seek(ps []connectors.Position) error {
	for _, p := range ps {
		if p.Partition == 0 {
			r.next = p.Offset
		}
	}
	r.feed.mu.Lock()
	r.feed.seeks = append(r.feed.seeks, r.next)
	r.feed.mu.Unlock()
	if g := r.feed.gen; g != nil {
		g.sought(r.next)
	}
	return nil
}

func (r *onceReader) Read(ctx context.Context) (connectors.Batch, error) {
	rec, err := r.feed.take(ctx, r.next)
	if err != nil {
		return connectors.Batch{}, err
	}
	defer rec.Release()
	start, n := r.next, rec.NumRows()
	meta := connectors.MetaArrays(r.op, 0, start, int(n))
	cols := append(append([]arrow.Array(nil), rec.Columns()...), meta...)
	out := array.NewRecordBatch(connectors.WithMeta(clickSchema), cols, n)
	for _, c := range meta {
		c.Release()
	}
	r.next += n
	return connectors.Batch{Record: out, Ack: r.tracker.Deliver(0, start, start+n)}, nil
}

// tally is the "tally" output: the last n and total the aggregate emitted
// for each user.
type tally struct {
	mu       sync.Mutex
	n, total map[string]int64
}

func newTally() *tally { return &tally{n: map[string]int64{}, total: map[string]int64{}} }

func (t *tally) get(user string) (n, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[user], t.total[user]
}

type tallySink struct{ t *tally }

func (s tallySink) Connect(context.Context) error { return nil }
func (s tallySink) Close(context.Context) error   { return nil }
func (s tallySink) Write(_ context.Context, rec arrow.RecordBatch) error {
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	users, ns, totals := col("user").(*array.String), col("n").(*array.Int64), col("total").(*array.Int64)
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for i := range users.Len() {
		s.t.n[users.Value(i)], s.t.total[users.Value(i)] = ns.Value(i), totals.Value(i)
	}
	return nil
}

type tallyOutput struct{ t *tally }

func (o tallyOutput) NewSink(connectors.TaskInfo) (connectors.Sink, error) { return tallySink(o), nil }

func init() {
	mustRegister(testEnv.RegisterInput("once", func(bc connectors.BuildContext) (connectors.Input, error) {
		f, ok := bc.Bound.(*onceFeed)
		if !ok {
			return nil, errors.New("once input needs a bound *onceFeed")
		}
		return onceInput{f}, nil
	}))
	mustRegister(testEnv.RegisterOutput("tally", func(bc connectors.BuildContext, _ *arrow.Schema) (connectors.Output, error) {
		t, ok := bc.Bound.(*tally)
		if !ok {
			return nil, errors.New("tally output needs a bound *tally")
		}
		return tallyOutput{t}, nil
	}))
}

// onceSpec is a keyed running count and sum over the once source, with a
// WAL and checkpoints (every intervalMS; an hour: by hand) to store.
func onceSpec(store, stateBlock string, intervalMS int) string {
	return fmt.Sprintf(`{"id":"once","version":1,"parallelism":2,"max_parallelism":16,"operators":[
	  {"id":"in","kind":"source","parallelism":1},
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"sum","partitioned":true},{"id":"b","from":"sum","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"once"}],"sinks":[{"operator_id":"out","output_type":"tally"}],
	  "durability":{"sync":"group_commit"},
	  %s,
	  "checkpoint":{"interval_ms":%d,"retention":2,"object_store_uri":"file://%s"}}`, stateBlock, intervalMS, store)
}

// onceRun is one run of the once job.
type onceRun struct {
	t     *testing.T
	rt    *Runtime
	feed  *onceFeed
	tally *tally
	done  chan error
}

func startOnce(t *testing.T, spec, dataDir string, opts Options) *onceRun {
	t.Helper()
	r := &onceRun{t: t, feed: newOnceFeed(), tally: newTally(), done: make(chan error, 1)}
	opts.DataDir = dataDir
	r.rt = New(buildIn(t, spec, dataDir, map[string]any{"in": r.feed, "out": r.tally}), opts)
	go func() { r.done <- r.rt.Run(context.Background()) }()
	polltest.Eventually(t, "the job running", func() bool {
		select {
		case err := <-r.done:
			t.Fatalf("the job ended while starting: %v", err)
		default:
		}
		return r.rt.State() == Running
	})
	return r
}

// buildIn is mustBuild for a job with a data directory.
func buildIn(t *testing.T, spec, dataDir string, bindings map[string]any) *build.Graph {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	g, err := build.Build(s, build.Env{Bindings: bindings, DataDir: dataDir, Connectors: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// waitFor waits until the tally shows n rows and total for user.
func (r *onceRun) waitFor(user string, n, total int64) {
	r.t.Helper()
	polltest.Eventually(r.t, fmt.Sprintf("%s at n=%d total=%d", user, n, total), func() bool {
		gn, gt := r.tally.get(user)
		return gn == n && gt == total
	})
}

func (r *onceRun) stop() {
	r.t.Helper()
	if err := r.rt.Stop(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

func (r *onceRun) replayed() int64 {
	for _, m := range r.rt.Metrics() {
		if m.Task == "in-0" {
			return m.Counters["wal_replayed"]
		}
	}
	return -1
}

// Rows an unrewindable source
// delivered after the last checkpoint, acknowledged and then stopped
// gracefully (no checkpoint at the stop), are replayed from the WAL into
// the restored state on restart: the restore puts back the checkpoint's
// state, and the source cannot read them again. Before, the WAL sought the
// source back to the checkpoint and dropped its tail, and ann's 10 was
// lost.
func TestUnrewindableRowsAfterTheCheckpointAreReplayed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := onceSpec(filepath.Join(dir, "ckpt"), `"state":{"backend":"memory"}`, 3_600_000)
	r := startOnce(t, spec, dir, Options{})
	r.feed.Push([]string{"ann", "bob"}, []int64{5, 7}) // offsets 0, 1
	r.waitFor("ann", 1, 5)
	r.waitFor("bob", 1, 7)
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.feed.Push([]string{"ann"}, []int64{10}) // offset 2, after the checkpoint
	r.waitFor("ann", 2, 15)
	r.stop()

	r2 := startOnce(t, spec, dir, Options{})
	r2.waitFor("ann", 2, 15) // 5 restored + 10 replayed from the WAL
	if got := r2.replayed(); got != 1 {
		t.Errorf("wal_replayed %d, want 1", got)
	}
	for _, off := range r2.feed.sought() {
		if off < 3 {
			t.Errorf("the unrewindable source was sought back to offset %d (the WAL holds offsets up to 2)", off)
		}
	}
	r2.feed.Push([]string{"ann", "bob"}, []int64{1, 1})
	r2.waitFor("ann", 3, 16)
	r2.waitFor("bob", 2, 8)
	if _, err := r2.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2.stop()

	// Restored from the second checkpoint, which holds everything: no
	// replay, nothing counted twice.
	r3 := startOnce(t, spec, dir, Options{})
	r3.feed.Push([]string{"ann"}, []int64{100})
	r3.waitFor("ann", 4, 116)
	if got := r3.replayed(); got != 0 {
		t.Errorf("wal_replayed %d after a checkpoint holding everything, want 0", got)
	}
	r3.stop()
}

// Replaying an entry whose rows the restored state has applied
// in part is safe: the stateful operators drop the rows whose positions
// their state has applied (ops.Replayed), however the restored positions
// cut the entry. Here the state is the checkpoint's (offsets 0..3
// applied) while the source is restarted at offset 3 (Options.
// StartPositions): the WAL replays the entry holding offsets 2 and 3,
// which the state holds already, and nothing counts twice.
func TestUnrewindableReplayOfAppliedRowsIsDropped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := onceSpec(filepath.Join(dir, "ckpt"), `"state":{"backend":"memory"}`, 3_600_000)
	r := startOnce(t, spec, dir, Options{})
	r.feed.Push([]string{"ann", "bob"}, []int64{5, 7})  // offsets 0, 1
	r.feed.Push([]string{"ann", "bob"}, []int64{10, 1}) // offsets 2, 3: one WAL entry
	r.waitFor("ann", 2, 15)
	r.waitFor("bob", 2, 8)
	if _, err := r.rt.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.stop()

	r2 := startOnce(t, spec, dir, Options{StartPositions: map[string][]connectors.Position{"in-0": {{Partition: 0, Offset: 3}}}})
	polltest.Eventually(t, "the replay of the entry", func() bool { return r2.replayed() == 1 })
	r2.feed.Push([]string{"ann"}, []int64{1}) // offset 4
	r2.waitFor("ann", 3, 16)
	if n, total := r2.tally.get("bob"); n != 0 && (n != 2 || total != 8) {
		t.Errorf("bob at n=%d total=%d after the replay, want his restored 2 and 8 (or no output)", n, total)
	}
	r2.stop()
}

// ---------------------------------------------------------------------------
// The SIGKILL proof.

// onceGen generates rows for the SIGKILL proof: user k(offset % keys),
// amount = offset, batches of batch rows every every. Before it generates
// a batch it writes "accepted N" to its file, N being the offset after the
// last batch it returned: the source wrapper appends a batch to the WAL
// before it returns it and only then reads the next one, so every row
// before N is in the WAL (what a push source returns to its caller on).
// A Seek below the accepted rows writes "REWIND": the source would have to
// read rows again, which it cannot. With final > 0 it generates final rows,
// one batch, then ends.
type onceGen struct {
	out      *os.File
	accepted int64 // read at start: the previous runs' last
	reported int64
	keys     int
	batch    int
	every    time.Duration
	final    int
	done     bool
	start    int64 // the first offset generated in this run (-1: none)
}

func (g *onceGen) sought(off int64) {
	if off < g.accepted && g.out != nil {
		fmt.Fprintf(g.out, "REWIND to %d, below the accepted %d\n", off, g.accepted)
	}
}

func (g *onceGen) take(ctx context.Context, next int64) (arrow.RecordBatch, error) {
	if next > g.reported && g.out != nil {
		fmt.Fprintf(g.out, "accepted %d\n", next)
		g.reported = next
	}
	if g.done {
		return nil, connectors.ErrEndOfInput
	}
	n := g.batch
	if g.final > 0 {
		n, g.done = g.final, true
	} else {
		t := time.NewTimer(g.every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if g.start < 0 {
		g.start = next
	}
	users := make([]string, n)
	amounts := make([]int64, n)
	for i := range n {
		off := next + int64(i)
		users[i], amounts[i] = userOf(off, g.keys), off
	}
	return clicks(users, amounts), nil
}

func userOf(off int64, keys int) string { return "k" + strconv.Itoa(int(off%int64(keys))) }

// readAccepted returns the highest accepted offset in the file and the
// REWIND lines.
func readAccepted(t *testing.T, path string) (int64, []string) {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var max int64
	var rewinds []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "REWIND") {
			rewinds = append(rewinds, line)
			continue
		}
		if v, ok := strings.CutPrefix(line, "accepted "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > max {
				max = n
			}
		}
	}
	return max, rewinds
}

const (
	crashChildEnv = "ARKFLOW_RUNTIME_ONCE_CHILD"
	onceKeys      = 7
)

// TestMain lets TestUnrewindableSurvivesSIGKILL re-execute this binary as
// the job's process: with ARKFLOW_RUNTIME_ONCE_CHILD set to a directory
// it runs the once job there until it is killed. Otherwise it runs the
// tests and then fails if a goroutine outlives them (a job, a source or
// a checkpoint round not stopped on Stop, Close or a cancelled context).
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(onceChild(dir))
	}
	leaktest.VerifyTestMain(m)
}

func onceChildSpec(dir string) string {
	return onceSpec(filepath.Join(dir, "ckpt"), `"state":{"backend":"badger"}`, 250)
}

func onceChild(dir string) int {
	acceptedPath := filepath.Join(dir, "accepted")
	prev, _ := readAcceptedFile(acceptedPath)
	out, err := os.OpenFile(acceptedPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	feed := newOnceFeed()
	feed.gen = &onceGen{out: out, accepted: prev, reported: prev, keys: onceKeys, batch: 20, every: 2 * time.Millisecond, start: -1}
	s, err := job.Parse([]byte(onceChildSpec(dir)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	g, err := build.Build(s, build.Env{Bindings: map[string]any{"in": feed, "out": newTally()}, DataDir: filepath.Join(dir, "data"), Connectors: testEnv})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rt := New(g, Options{DataDir: filepath.Join(dir, "data"), Logger: lg})
	if err := rt.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// readAcceptedFile is readAccepted without a test.
func readAcceptedFile(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var max int64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "accepted "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > max {
				max = n
			}
		}
	}
	return max, nil
}

// The end-to-end proof for unrewindable sources: the
// once job — an unrewindable source generating rows that are never read
// again, a keyed running count and sum in Badger, a WAL, checkpoints every
// 250 ms — is SIGKILLed at random moments, at least 10 times, and
// restarted each time; every row the source returned after its WAL append
// ("accepted") must then be in the state: a last run in this process adds
// one row per key and ends, and the count of every key must be at least
// the rows of it generated (each offset below the last run's first is in
// the WAL, and was appended once). Counts above that are duplicates: they
// are reported, not failed (at-least-once).
func TestUnrewindableSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kills := 10
	if testing.Short() {
		kills = 3
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	var lastErr strings.Builder
	redoRuns := 0 // runs that replayed entries the cursor had passed
	// What each run did, for a failure: when it was killed, and the lines
	// its restore logged.
	var history []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the runs:\n%s", strings.Join(history, "\n"))
		}
	})
	for killed, runs := 0, 0; killed < kills; runs++ {
		if runs > 3*kills {
			t.Fatalf("only %d of %d runs were killed; the last one's log:\n%s", killed, runs, lastErr.String())
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		lastErr.Reset()
		cmd.Stderr = &lastErr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(150+rng.IntN(1200)) * time.Millisecond
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		history = append(history, fmt.Sprintf("run %d, killed after %s:", runs+1, delay))
		for _, line := range strings.Split(lastErr.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "restor") ||
				strings.Contains(line, "replay") || strings.Contains(line, "accepted") {
				history = append(history, "  "+line)
			}
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
			if strings.Contains(lastErr.String(), "the WAL replays the entries whose rows the checkpoint does not hold") {
				redoRuns++
			}
			if strings.Contains(lastErr.String(), "cannot be replayed") {
				t.Fatalf("run %d lost rows it could not replay:\n%s", runs+1, lastErr.String())
			}
			continue
		}
		t.Fatalf("run %d ended before its kill: %v\n%s", runs+1, err, lastErr.String())
	}
	accepted, rewinds := readAccepted(t, filepath.Join(dir, "accepted"))
	if len(rewinds) > 0 {
		t.Fatalf("the unrewindable source was sought back before what it had delivered: %v", rewinds)
	}
	if accepted == 0 {
		t.Fatal("no run accepted any row")
	}

	// The last run, here: it restores the latest checkpoint, replays what
	// the WAL holds beyond it, adds one row per key and ends.
	feed := newOnceFeed()
	gen := &onceGen{keys: onceKeys, final: onceKeys, start: -1}
	feed.gen = gen
	tl := newTally()
	var logs syncLog
	rt := New(buildIn(t, onceChildSpec(dir), filepath.Join(dir, "data"), map[string]any{"in": feed, "out": tl}),
		Options{DataDir: filepath.Join(dir, "data"), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatalf("last run: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "cannot be replayed") {
		t.Fatalf("the last run lost rows it could not replay:\n%s", logs.String())
	}
	end := gen.start + onceKeys // every offset below end was generated once
	if gen.start < accepted {
		t.Fatalf("the last run's source started at offset %d, below the accepted %d", gen.start, accepted)
	}
	var replayed int64
	for _, m := range rt.Metrics() {
		if m.Task == "in-0" {
			replayed = m.Counters["wal_replayed"]
		}
	}
	lost, dups := int64(0), int64(0)
	for k := range onceKeys {
		user := userOf(int64(k), onceKeys)
		var wantN, wantTotal, acceptedN int64
		for off := int64(k); off < end; off += onceKeys {
			wantN++
			wantTotal += off
			if off < accepted {
				acceptedN++
			}
		}
		n, total := tl.get(user)
		if n < acceptedN {
			t.Errorf("%s: count %d, but %d of its rows were accepted", user, n, acceptedN)
		}
		switch {
		case n < wantN:
			lost += wantN - n
			t.Errorf("%s: count %d, sum %d; want %d, %d (rows below offset %d, all appended to the WAL)", user, n, total, wantN, wantTotal, end)
		case n > wantN:
			dups += n - wantN
		case total != wantTotal:
			t.Errorf("%s: count %d as expected, but sum %d, want %d", user, n, total, wantTotal)
		}
	}
	t.Logf("%d kills (%d of the runs replayed entries the WAL cursor had passed); %d rows accepted, %d generated; the last run replayed %d WAL entries; %d rows lost, %d counted twice",
		kills, redoRuns, accepted, end, replayed, lost, dups)
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
