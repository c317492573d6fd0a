package runtime

// Data-driven tests (github.com/cockroachdb/datadriven) of checkpoint
// barriers and restores. Every file under testdata/barrier and
// testdata/restore is a small story told one command at a time; each
// command's output follows its ----. Run
//
//	go test ./internal/runtime -run TestDataDriven -rewrite
//
// to rewrite the expected outputs from the current behaviour (then review
// the diff).
//
// # The job
//
//	job sources=<a>[,<b>...] [partitions=<n>] [readers=<n>] [parallelism=<n>] [gate=<source>]
//
// Every source is a memory source of (user, amount) rows with n partitions
// (default 1), read by readers subtasks (default 1; subtask s reads the
// partitions p with p % readers == s). All of them feed, by key, a running
// sum of amount per user (operator sum, parallelism n, default 1) that
// writes every updated total to a memory sink (out). gate=<source> puts a
// Go map function (operator gate, not chained to the source) between that
// source and sum, which the story can close: a closed gate holds the batch
// that reaches it, and everything behind it on that path (rows and
// barriers) waits. The state is kept in memory; checkpoints go to a
// directory of the test.
//
// A source pauses once it has passed a barrier on, until the cut ends
// (barrier.go): the rows pushed to it after its barrier are held there, so
// no row follows a barrier on any channel, and sum, which forwards the
// barrier once it came through all its inputs, never has to hold rows
// back while it aligns. The barrier stories check both halves: the rows
// after a source's barrier are not taken in before the cut, and the cut
// waits for (and its snapshot holds) every row sent before the barrier on
// a slower input.
//
// # Commands
//
//	push <source> [part=<p>] <user>=<amount>...   one batch; printed: "ok",
//	                     "held by the gate" or "held: <source> is paused"
//	gate open|close
//	output               the totals the sink received since the last output,
//	                     per user in arrival order
//	status               during a manual cut: the rows sum has taken in and
//	                     whether the barrier has reached the sink
//	checkpoint           a whole checkpoint (Runtime.Checkpoint)
//	checkpoint manual    starts a cut driven step by step, as Runtime.cut
//	                     would run it: the test sends each source its barrier
//	barrier <source>     that source's barrier request: the source passes the
//	                     barrier on behind what it sent and pauses; a task
//	                     ID (in-1) sends it to one subtask
//	cut                  waits until the barrier has reached the sink, records
//	                     the sources' positions, freezes the state, prints
//	                     both, and resumes the sources
//	state                sum's state now: every user's total
//	kill                 cancels the run (no graceful stop)
//	restore [parallelism=<n>]  a new run of the job (sum's parallelism n)
//	                     on the same checkpoint store, with sources that hold
//	                     every row pushed so far (a replayable input); it
//	                     restores the latest checkpoint and replays the rows
//	                     after its positions
//
// Commands that let rows flow return once every row pushed to a source
// that is neither paused nor behind a closed gate has been acknowledged:
// the source's positions, which acknowledgements move after the sink has
// written, reach the rows pushed (polled: positions have no signal). Then
// sum has processed the rows and the sink has written what they produced.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/datadriven"

	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

func TestDataDriven(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		d := &ddJob{t: t, store: t.TempDir()}
		defer d.close()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			d.t = t
			return d.run(td)
		})
	})
}

// ddPush is one batch pushed to a source.
type ddPush struct {
	source string
	part   int
	rec    arrow.RecordBatch
}

// ddJob is the job of one testdata file, across its runs.
type ddJob struct {
	t     *testing.T
	store string // the checkpoint store's directory

	sources    []string
	partitions int
	readers    int // subtasks of each source
	par        int
	gated      string

	pushes []ddPush // every batch pushed, in order (replayed on restore)

	// The current run.
	rt     *Runtime
	srcs   map[string]*mem.Source
	sink   *mem.Sink
	gate   *ddGate
	cancel context.CancelFunc
	done   chan error
	shown  int // sink records already printed
	cut    *ddCut
}

// ddCut is a cut driven step by step.
type ddCut struct {
	id       uint64
	resume   chan struct{}
	all      <-chan struct{}
	injected map[string]bool // source tasks that passed the barrier on
}

// ddGate is the map function between a source and sum.
type ddGate struct {
	mu      sync.Mutex
	closed  bool
	open    chan struct{} // closed when the gate opens
	entered chan struct{} // a batch waits at the closed gate
	holding bool
}

func newGate() *ddGate { return &ddGate{entered: make(chan struct{}, 1)} }

func (g *ddGate) binding() ops.MapBinding {
	return ops.MapBinding{Name: "gate", Fn: func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		g.mu.Lock()
		if g.closed {
			open := g.open
			g.holding = true
			g.mu.Unlock()
			g.entered <- struct{}{}
			select {
			case <-open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			g.mu.Unlock()
		}
		rec.Retain()
		return rec, nil
	}}
}

func (g *ddGate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if closed == g.closed {
		return
	}
	g.closed = closed
	if closed {
		g.open = make(chan struct{})
	} else {
		close(g.open)
		g.holding = false
	}
}

func (g *ddGate) isClosed() (closed, holding bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed, g.holding
}

const ddWait = 20 * time.Second

func (d *ddJob) spec() string {
	var opsJSON, edges, srcs []string
	for _, s := range d.sources {
		opsJSON = append(opsJSON, fmt.Sprintf(`{"id":%q,"kind":"source","parallelism":%d}`, s, d.readers))
		srcs = append(srcs, fmt.Sprintf(`{"operator_id":%q,"input_type":"memory"}`, s))
		if s == d.gated {
			opsJSON = append(opsJSON, `{"id":"gate","kind":"map","key_field":"user","parallelism":1,"config":{"function":"gate"}}`)
			edges = append(edges, fmt.Sprintf(`{"id":"e-%s","from":%q,"to":"gate","partitioned":true}`, s, s),
				`{"id":"e-gate","from":"gate","to":"sum","partitioned":true}`)
		} else {
			edges = append(edges, fmt.Sprintf(`{"id":"e-%s","from":%q,"to":"sum","partitioned":true}`, s, s))
		}
	}
	return fmt.Sprintf(`{"id":"dd","parallelism":%d,"operators":[%s,
	  {"id":"sum","kind":"aggregate","stateful":true,"key_field":"user","config":{"aggregates":[{"function":"sum","field":"amount","as":"total"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[%s,{"id":"o","from":"sum","to":"out"}],
	  "sources":[%s],"sinks":[{"operator_id":"out","output_type":"memory"}],
	  "state":{"backend":"memory"},
	  "checkpoint":{"interval_ms":3600000,"retention":2,"object_store_uri":"file://%s"}}`,
		d.par, strings.Join(opsJSON, ","), strings.Join(edges, ","), strings.Join(srcs, ","), d.store)
}

// start runs the job with sources that hold every batch pushed so far.
func (d *ddJob) start() {
	t := d.t
	t.Helper()
	d.srcs = map[string]*mem.Source{}
	bindings := map[string]any{}
	for _, s := range d.sources {
		d.srcs[s] = mem.NewSource(clickSchema, d.partitions)
		bindings[s] = d.srcs[s]
	}
	for _, p := range d.pushes {
		if err := d.srcs[p.source].Append(p.part, p.rec); err != nil {
			t.Fatal(err)
		}
	}
	d.sink = mem.NewSink()
	bindings["out"] = d.sink
	if d.gated != "" {
		d.gate = newGate()
		bindings["gate"] = d.gate.binding()
	}
	d.shown = 0
	d.rt = New(mustBuild(t, d.spec(), bindings), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan error, 1)
	rt, done := d.rt, d.done
	go func() { done <- rt.Run(ctx) }()
	select {
	case <-rt.Running():
	case <-rt.Done():
		t.Fatalf("the job did not start: %v", <-done)
	case <-time.After(ddWait):
		t.Fatal("the job did not start")
	}
}

// close ends the current run, if any.
func (d *ddJob) close() {
	if d.cut != nil {
		close(d.cut.resume)
		d.rt.cutMu.Unlock()
		d.cut = nil
	}
	if d.gate != nil {
		d.gate.set(false)
	}
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

// task is the source subtask that reads a partition.
func (d *ddJob) task(source string, part int) string {
	return planner.TaskID(source, part%d.readers)
}

// paused reports whether the subtask reading a partition has passed the
// current cut's barrier on.
func (d *ddJob) paused(source string, part int) bool {
	return d.cut != nil && d.cut.injected[d.task(source, part)]
}

// free reports whether the rows pushed to a partition flow now.
func (d *ddJob) free(source string, part int) bool {
	if d.paused(source, part) {
		return false
	}
	if source == d.gated {
		if closed, _ := d.gate.isClosed(); closed {
			return false
		}
	}
	return true
}

// settle waits until every row pushed to a free source is acknowledged.
func (d *ddJob) settle() {
	d.t.Helper()
	want := map[string]map[int32]int64{}
	for _, p := range d.pushes {
		if d.free(p.source, p.part) {
			task := d.task(p.source, p.part)
			if want[task] == nil {
				want[task] = map[int32]int64{}
			}
			want[task][int32(p.part)] += p.rec.NumRows()
		}
	}
	polltest.Eventually(d.t, "the rows pushed to be acknowledged", func() bool {
		got := d.rt.Positions()
		for task, parts := range want {
			for p, n := range parts {
				found := false
				for _, pos := range got[task] {
					if pos.Partition == p && pos.Offset == n {
						found = true
					}
				}
				if !found {
					return false
				}
			}
		}
		return true
	})
}

func (d *ddJob) run(td *datadriven.TestData) string {
	t := d.t
	t.Helper()
	switch td.Cmd {
	case "job":
		d.sources, d.partitions, d.readers, d.par = nil, 1, 1, 1
		for _, a := range td.CmdArgs {
			switch a.Key {
			case "sources":
				for _, v := range a.Vals {
					d.sources = append(d.sources, strings.Split(v, ",")...)
				}
			case "partitions":
				d.partitions = d.intArg(td, a.Key)
			case "parallelism":
				d.par = d.intArg(td, a.Key)
			case "readers":
				d.readers = d.intArg(td, a.Key)
			case "gate":
				d.gated = a.Vals[0]
			default:
				td.Fatalf(t, "unknown argument %s", a.Key)
			}
		}
		d.start()
		return "running"

	case "push":
		if len(td.CmdArgs) < 2 {
			td.Fatalf(t, "push <source> [part=<p>] <user>=<amount>...")
		}
		src := td.CmdArgs[0].Key
		if d.srcs[src] == nil {
			td.Fatalf(t, "no source %q", src)
		}
		part := 0
		var users []string
		var amounts []int64
		for _, a := range td.CmdArgs[1:] {
			if a.Key == "part" {
				part = d.intArg(td, "part")
				continue
			}
			if len(a.Vals) != 1 {
				td.Fatalf(t, "push: %s needs an amount", a.Key)
			}
			n, err := strconv.ParseInt(a.Vals[0], 10, 64)
			if err != nil {
				td.Fatalf(t, "push: %v", err)
			}
			users, amounts = append(users, a.Key), append(amounts, n)
		}
		rec := clicks(users, amounts)
		d.pushes = append(d.pushes, ddPush{source: src, part: part, rec: rec})
		// The gate's first batch: wait until it is held there.
		var entered bool
		if src == d.gated && !d.free(src, part) && !d.paused(src, part) {
			if _, holding := d.gate.isClosed(); !holding {
				entered = true
			}
		}
		if err := d.srcs[src].Append(part, rec); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.paused(src, part):
			return "held: " + d.task(src, part) + " is paused"
		case entered:
			select {
			case <-d.gate.entered:
			case <-time.After(ddWait):
				t.Fatal("the batch did not reach the gate")
			}
			return "held by the gate"
		case !d.free(src, part):
			return "held by the gate"
		}
		d.settle()
		return "ok"

	case "gate":
		if d.gate == nil || len(td.CmdArgs) != 1 {
			td.Fatalf(t, "gate open|close, on a job with a gate")
		}
		switch td.CmdArgs[0].Key {
		case "open":
			d.gate.set(false)
			d.settle()
			return "open"
		case "close":
			d.gate.set(true)
			return "closed"
		}
		td.Fatalf(t, "gate open|close")

	case "output":
		return d.output()

	case "status":
		if d.cut == nil {
			td.Fatalf(t, "status: no manual cut in progress")
		}
		var in int64
		for _, m := range d.rt.Metrics() {
			if m.Operator == "sum" {
				in += m.RowsIn
			}
		}
		reached := "no"
		select {
		case <-d.cut.all:
			reached = "yes"
		default:
		}
		return fmt.Sprintf("sum has taken in %d rows\nbarrier at the sink: %s", in, reached)

	case "checkpoint":
		if td.HasArg("manual") {
			return d.beginCut()
		}
		id, err := d.rt.Checkpoint(context.Background())
		if err != nil {
			return "error: " + err.Error()
		}
		return "checkpoint " + id

	case "barrier":
		if d.cut == nil || len(td.CmdArgs) != 1 {
			td.Fatalf(t, "barrier <source>, after checkpoint manual")
		}
		return d.barrier(td.CmdArgs[0].Key)

	case "cut":
		if d.cut == nil {
			td.Fatalf(t, "cut: no manual cut in progress")
		}
		return d.endCut()

	case "state":
		return d.state()

	case "kill":
		d.close()
		return "killed"

	case "restore":
		if d.cancel != nil {
			td.Fatalf(t, "restore: the job still runs (kill it)")
		}
		if td.HasArg("parallelism") {
			d.par = d.intArg(td, "parallelism")
		}
		d.start()
		st := d.rt.CheckpointStatus()
		d.settle()
		return fmt.Sprintf("restored: %s\n%s", st.Restored, d.output())
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

func (d *ddJob) intArg(td *datadriven.TestData, key string) int {
	var n int
	td.ScanArgs(d.t, key, &n)
	return n
}

// output prints the totals the sink received since the last output.
func (d *ddJob) output() string {
	recs := d.sink.Records()
	totals := map[string][]string{}
	for _, rec := range recs[d.shown:] {
		us := column(d.t, rec, "user", str)
		ts := column(d.t, rec, "total", i64)
		for i := range us {
			totals[us[i]] = append(totals[us[i]], strconv.FormatInt(ts[i], 10))
		}
	}
	d.shown = len(recs)
	if len(totals) == 0 {
		return "(nothing)"
	}
	users := make([]string, 0, len(totals))
	for u := range totals {
		users = append(users, u)
	}
	sort.Strings(users)
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s: %s\n", u, strings.Join(totals[u], " "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// beginCut opens a cut as Runtime.cut does, without sending the barriers.
func (d *ddJob) beginCut() string {
	r := d.rt
	r.cutMu.Lock()
	r.mu.Lock()
	sinks := r.sinkTasks
	r.mu.Unlock()
	r.cutID++
	d.cut = &ddCut{id: r.cutID, resume: make(chan struct{}), injected: map[string]bool{}}
	d.cut.all = r.barriers.start(d.cut.id, sinks)
	return fmt.Sprintf("cut %d begins", d.cut.id)
}

// barrier sends a source's subtasks the cut's barrier request and waits
// until they have passed the barrier on.
func (d *ddJob) barrier(source string) string {
	t := d.t
	r := d.rt
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	var tasks []string
	for _, s := range sources {
		if op, _, ok := splitTask(s.task); s.task != source && (!ok || op != source) {
			continue
		}
		req := barrierReq{id: d.cut.id, injected: make(chan error, 1), resume: d.cut.resume}
		select {
		case s.barriers <- req:
		case <-time.After(ddWait):
			t.Fatalf("source %s did not take the barrier request", s.task)
		}
		select {
		case err := <-req.injected:
			if err != nil {
				return "error: " + err.Error()
			}
		case <-time.After(ddWait):
			t.Fatalf("source %s did not pass the barrier on", s.task)
		}
		tasks = append(tasks, s.task)
	}
	if len(tasks) == 0 {
		d.t.Fatalf("no source %q", source)
	}
	for _, task := range tasks {
		d.cut.injected[task] = true
	}
	return fmt.Sprintf("%s passed the barrier on and pauses", strings.Join(tasks, ","))
}

// endCut completes the cut as Runtime.cut does: once the barrier has
// reached every sink it records the positions and freezes the state, then
// resumes the sources.
func (d *ddJob) endCut() string {
	t := d.t
	r := d.rt
	select {
	case <-d.cut.all:
	case <-time.After(ddWait):
		t.Fatal("the barrier did not reach the sink")
	}
	var b strings.Builder
	positions := r.Positions()
	tasks := make([]string, 0, len(positions))
	for task := range positions {
		tasks = append(tasks, task)
	}
	sort.Strings(tasks)
	b.WriteString("positions:")
	for _, task := range tasks {
		for _, p := range positions[task] {
			fmt.Fprintf(&b, " %s/p%d=%d", task, p.Partition, p.Offset)
		}
	}
	r.mu.Lock()
	st := r.store
	r.mu.Unlock()
	frozen, err := st.(statestore.Freezer).Freeze()
	if err != nil {
		t.Fatal(err)
	}
	snap := d.keys(func(w *bytes.Buffer, scope statestore.Scope, now int64) error {
		_, err := frozen.Snapshot(w, scope, now)
		return err
	})
	frozen.Close()
	fmt.Fprintf(&b, "\nsnapshot of sum: %s", snap)
	close(d.cut.resume)
	d.cut = nil
	r.cutMu.Unlock()
	d.settle()
	return b.String()
}

// state prints the keys of sum's state now.
func (d *ddJob) state() string {
	r := d.rt
	r.mu.Lock()
	st := r.store
	r.mu.Unlock()
	return d.keys(func(w *bytes.Buffer, scope statestore.Scope, now int64) error {
		_, err := st.Snapshot(w, scope, now)
		return err
	})
}

// keys restores a snapshot of sum's state into an empty store and lists
// the users it holds a total for, with the total (the positions its
// journal commits with the state are left out: the cut prints the
// sources').
func (d *ddJob) keys(snapshot func(w *bytes.Buffer, scope statestore.Scope, now int64) error) string {
	t := d.t
	scope := statestore.Scope{Job: stateJob(d.rt.g.Spec), Operator: "sum", Groups: statestore.AllKeyGroups}
	now := time.Now().UnixMilli()
	var buf bytes.Buffer
	if err := snapshot(&buf, scope, now); err != nil {
		t.Fatal(err)
	}
	m := statestore.NewMemory()
	defer m.Close()
	if _, err := m.Restore(&buf, scope, now); err != nil {
		t.Fatal(err)
	}
	var out []string
	err := m.Scan(scope, now, func(e statestore.Entry) error {
		if e.Key.Namespace != "aggregate" {
			return nil // the positions sum's journal commits with its state
		}
		// The accumulator of sum(amount) (agg.State.Encode): its
		// count slot, then the sum, as varints.
		_, w := binary.Varint(e.Value)
		if w <= 0 {
			return fmt.Errorf("key %q: malformed accumulator %x", e.Key.User, e.Value)
		}
		total, w2 := binary.Varint(e.Value[w:])
		if w2 <= 0 || w+w2 != len(e.Value) {
			return fmt.Errorf("key %q: malformed accumulator %x", e.Key.User, e.Value)
		}
		out = append(out, fmt.Sprintf("%s=%d", e.Key.User, total))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(empty)"
	}
	return strings.Join(out, " ")
}
