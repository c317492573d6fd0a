package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	_ "github.com/arkflow-rs/arkflow-go/connectors/drop"
	_ "github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// events records lifecycle calls of the test connectors, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// probe is a test source and sink family. A probe source wraps a memory
// source; a probe sink records which subtask wrote which rows; both log
// Connect and Close, and can be told to fail.
type probe struct {
	ev          *events
	src         *mem.Source
	failConnect bool
	failWrite   int // fail the n-th write (1-based); 0 never
	failEvery   int // fail every n-th write; 0 never
	mu          sync.Mutex
	writes      int
	got         map[int][]arrow.RecordBatch // subtask -> batches
}

func (p *probe) InputType() string  { return "probe" }
func (p *probe) OutputType() string { return "probe" }

type probeInput struct {
	p  *probe
	in connectors.Input
}

func (pi probeInput) Schema() *arrow.Schema { return pi.in.Schema() }
func (pi probeInput) Partitions() int       { return pi.in.Partitions() }
func (pi probeInput) NewSource(info connectors.TaskInfo) (connectors.Source, error) {
	s, err := pi.in.NewSource(info)
	return &probeSource{Source: s, p: pi.p, task: planner.TaskID(info.OperatorID, info.Subtask)}, err
}

type probeSource struct {
	connectors.Source
	p    *probe
	task string
}

func (s *probeSource) Connect(ctx context.Context) error {
	if s.p.failConnect {
		s.p.ev.add("connect %s: failed", s.task)
		return errors.New("probe refuses to connect")
	}
	s.p.ev.add("connect %s", s.task)
	return s.Source.Connect(ctx)
}

func (s *probeSource) Positions() []connectors.Position {
	return s.Source.(connectors.Positioner).Positions()
}

func (s *probeSource) Seek(ps []connectors.Position) error {
	return s.Source.(connectors.Positioner).Seek(ps)
}

func (s *probeSource) Close(ctx context.Context) error {
	s.p.ev.add("close %s", s.task)
	return s.Source.Close(ctx)
}

type probeSink struct {
	p    *probe
	task string
	sub  int
}

func (s *probeSink) Connect(context.Context) error {
	if s.p.failConnect {
		s.p.ev.add("connect %s: failed", s.task)
		return errors.New("probe refuses to connect")
	}
	s.p.ev.add("connect %s", s.task)
	return nil
}

func (s *probeSink) Write(_ context.Context, rec arrow.RecordBatch) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.writes++
	if s.p.failWrite > 0 && s.p.writes == s.p.failWrite || s.p.failEvery > 0 && s.p.writes%s.p.failEvery == 0 {
		return errors.New("probe write failure")
	}
	rec.Retain()
	s.p.got[s.sub] = append(s.p.got[s.sub], rec)
	return nil
}

func (s *probeSink) Close(context.Context) error {
	s.p.ev.add("close %s", s.task)
	return nil
}

type probeOutput struct{ p *probe }

func (po probeOutput) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	return &probeSink{p: po.p, task: planner.TaskID(info.OperatorID, info.Subtask), sub: info.Subtask}, nil
}

// testEnv holds the test-only connector types ("probe", and "once" and
// "tally" of unrewindable_test.go), so that the global registry holds only
// real ones.
var testEnv = connectors.NewEnvironment()

func mustRegister(err error) {
	if err != nil {
		panic(err)
	}
}

func init() {
	mustRegister(testEnv.RegisterInput("probe", func(bc connectors.BuildContext) (connectors.Input, error) {
		p, ok := bc.Bound.(*probe)
		if !ok {
			return nil, errors.New("probe input needs a bound *probe")
		}
		f, _ := connectors.LookupInput("memory")
		in, err := f(connectors.BuildContext{OperatorID: bc.OperatorID, Config: []byte("{}"), Bound: p.src})
		return probeInput{p: p, in: in}, err
	}))
	mustRegister(testEnv.RegisterOutput("probe", func(bc connectors.BuildContext, _ *arrow.Schema) (connectors.Output, error) {
		p, ok := bc.Bound.(*probe)
		if !ok {
			return nil, errors.New("probe output needs a bound *probe")
		}
		return probeOutput{p}, nil
	}))
}

var clickSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func clicks(users []string, amounts []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, clickSchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(users, nil)
	b.Field(1).(*array.Int64Builder).AppendValues(amounts, nil)
	return b.NewRecordBatch()
}

func mustBuild(t *testing.T, spec string, bindings map[string]any) *build.Graph {
	t.Helper()
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	g, err := build.Build(s, build.Env{Bindings: bindings, Connectors: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func column[T any](t *testing.T, rec arrow.RecordBatch, name string, get func(arrow.Array, int) T) []T {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		t.Fatalf("no column %q in %s", name, rec.Schema())
	}
	col := rec.Column(idx[0])
	out := make([]T, col.Len())
	for i := range out {
		out[i] = get(col, i)
	}
	return out
}

func str(a arrow.Array, i int) string { return a.(*array.String).Value(i) }
func i64(a arrow.Array, i int) int64  { return a.(*array.Int64).Value(i) }
func i32(a arrow.Array, i int) int32  { return a.(*array.Int32).Value(i) }

const keyedSpec = `{"id":"routing","max_parallelism":128,"operators":[
  {"id":"in","kind":"source","parallelism":3},
  {"id":"out","kind":"sink","key_field":"user","parallelism":4}],
  "edges":[{"id":"in-out","from":"in","to":"out","partitioned":true}],
  "sources":[{"operator_id":"in","input_type":"probe"}],
  "sinks":[{"operator_id":"out","output_type":"probe","config":{}}]}`

// Rows with the same key arriving on different source partitions
// reach the same downstream subtask, the one owning the key's group.
func TestKeyedEdgeRoutesByKeyGroup(t *testing.T) {
	t.Parallel()
	users := []string{"ann", "bob", "cid", "dee", "eve", "fay", "gus", "hal", "ivy", "jon"}
	var parts [][]arrow.RecordBatch
	for p := 0; p < 3; p++ {
		// Every partition carries every user, twice, in another order.
		u := append([]string(nil), users...)
		sort.Slice(u, func(i, j int) bool { return (i*7+p)%10 < (j*7+p)%10 })
		u = append(u, u...)
		a := make([]int64, len(u))
		for i := range a {
			a[i] = int64(p*100 + i)
		}
		parts = append(parts, []arrow.RecordBatch{clicks(u, a)})
	}
	src, err := mem.NewSourceFrom(parts...)
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{ev: &events{}, src: src, got: map[int][]arrow.RecordBatch{}}
	g := mustBuild(t, keyedSpec, map[string]any{"in": p, "out": p})
	rt := New(g, Options{})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	owner := map[string]int{}
	fromPartitions := map[string]map[int32]bool{}
	rows := 0
	for sub, recs := range p.got {
		for _, rec := range recs {
			us := column(t, rec, "user", str)
			ps := column(t, rec, connectors.MetaPartition, i32)
			for i, u := range us {
				rows++
				if o, seen := owner[u]; seen && o != sub {
					t.Fatalf("key %q reached subtasks %d and %d", u, o, sub)
				}
				owner[u] = sub
				if fromPartitions[u] == nil {
					fromPartitions[u] = map[int32]bool{}
				}
				fromPartitions[u][ps[i]] = true
			}
		}
	}
	if rows != 3*20 {
		t.Fatalf("got %d rows, want 60", rows)
	}
	for _, u := range users {
		want := keys.OwnerOf(128, 4, keys.KeyGroup([]byte(u), 128))
		if owner[u] != want {
			t.Errorf("key %q went to subtask %d; its key group %d belongs to %d", u, owner[u], keys.KeyGroup([]byte(u), 128), want)
		}
		if len(fromPartitions[u]) != 3 {
			t.Errorf("key %q came from partitions %v, want all 3", u, fromPartitions[u])
		}
	}
	if len(p.got) < 2 {
		t.Errorf("all keys landed on one subtask (%v): the test does not exercise routing", owner)
	}
}

const probeSpec = `{"id":"lifecycle","operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink"}],
  "edges":[{"id":"in-out","from":"in","to":"out"}],
  "sources":[{"operator_id":"in","input_type":"probe"}],
  "sinks":[{"operator_id":"out","output_type":"probe"}]}`

// A sink that fails to connect fails the job before any
// task loop starts, and the source that was already connected is closed
// (observed through the connector), in reverse order.
func TestSinkConnectFailureClosesConnectedSource(t *testing.T) {
	t.Parallel()
	src, _ := mem.NewSourceFrom([]arrow.RecordBatch{clicks([]string{"a"}, []int64{1})})
	ev := &events{}
	in := &probe{ev: ev, src: src, got: map[int][]arrow.RecordBatch{}}
	out := &probe{ev: ev, failConnect: true, got: map[int][]arrow.RecordBatch{}}
	rt := New(mustBuild(t, probeSpec, map[string]any{"in": in, "out": out}), Options{})
	err := rt.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connecting sink out-0") || !strings.Contains(err.Error(), "probe refuses to connect") {
		t.Fatalf("Run: %v", err)
	}
	if rt.State() != Failed || rt.Err() == nil {
		t.Fatalf("state %v, err %v; want Failed", rt.State(), rt.Err())
	}
	want := []string{"connect in-0", "connect out-0: failed", "close out-0", "close in-0"}
	if got := ev.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lifecycle calls:\n got %v\nwant %v", got, want)
	}
	if len(out.got) != 0 {
		t.Fatal("rows were written although the job never started")
	}
}

// Close order on a normal end: sources close before sinks.
func TestCloseOrderOnEnd(t *testing.T) {
	t.Parallel()
	src, _ := mem.NewSourceFrom([]arrow.RecordBatch{clicks([]string{"a", "b"}, []int64{1, 2})})
	ev := &events{}
	in := &probe{ev: ev, src: src, got: map[int][]arrow.RecordBatch{}}
	out := &probe{ev: ev, got: map[int][]arrow.RecordBatch{}}
	rt := New(mustBuild(t, probeSpec, map[string]any{"in": in, "out": out}), Options{})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"connect in-0", "connect out-0", "close in-0", "close out-0"}
	if got := ev.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lifecycle calls:\n got %v\nwant %v", got, want)
	}
	if rt.State() != Stopped {
		t.Fatalf("state %v", rt.State())
	}
	if err := rt.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run: %v", err)
	}
}

// A write failure fails the job with an error naming the sink; nothing is
// acknowledged past it.
func TestWriteFailureFailsJob(t *testing.T) {
	t.Parallel()
	var batches []arrow.RecordBatch
	for i := 0; i < 5; i++ {
		batches = append(batches, clicks([]string{"a"}, []int64{int64(i)}))
	}
	src, _ := mem.NewSourceFrom(batches)
	ev := &events{}
	in := &probe{ev: ev, src: src, got: map[int][]arrow.RecordBatch{}}
	out := &probe{ev: ev, failWrite: 3, got: map[int][]arrow.RecordBatch{}}
	rt := New(mustBuild(t, probeSpec, map[string]any{"in": in, "out": out}), Options{})
	err := rt.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "writing sink out-0: probe write failure") {
		t.Fatalf("Run: %v", err)
	}
	if rt.State() != Failed {
		t.Fatalf("state %v", rt.State())
	}
	got := ev.all()
	if got[len(got)-2] != "close in-0" || got[len(got)-1] != "close out-0" {
		t.Fatalf("close order: %v", got)
	}
	// Rows 0 and 1 were written; row 2 failed: the position stops at 2, so
	// a restart replays from the failed row.
	if pos := rt.Positions()["in-0"]; len(pos) != 1 || pos[0].Offset != 2 {
		t.Fatalf("positions after a failed write: %v, want offset 2", pos)
	}
}

func TestStopBeforeRunAndIdempotent(t *testing.T) {
	t.Parallel()
	src := mem.NewSource(clickSchema, 1) // never closed: unbounded
	sink := mem.NewSink()
	spec := `{"id":"stop","operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"e","from":"in","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}]}`
	rt := New(mustBuild(t, spec, map[string]any{"in": src, "out": sink}), Options{})
	if err := rt.Stop(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Stop before Run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	for i := 0; i < 3; i++ {
		if err := src.Append(0, clicks([]string{"a", "b"}, []int64{1, 2})); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the rows are written, then stop gracefully, twice and
	// concurrently.
	polltest.Eventually(t, "6 rows written", func() bool { return sink.NumRows() >= 6 },
		func() string { return fmt.Sprintf("%d rows", sink.NumRows()) })
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rt.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}()
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	if rt.State() != Stopped || sink.NumRows() != 6 {
		t.Fatalf("state %v rows %d", rt.State(), sink.NumRows())
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after stopped: %v", err)
	}
}

// Acknowledgements flow back to the source: after a bounded run, every
// partition's position is its end, also through a keyed edge that splits
// batches and a filter that drops rows.
func TestAcksAdvancePositions(t *testing.T) {
	t.Parallel()
	var parts [][]arrow.RecordBatch
	for p := 0; p < 2; p++ {
		var bs []arrow.RecordBatch
		for i := 0; i < 4; i++ {
			bs = append(bs, clicks([]string{"a", "b", "c"}, []int64{1, 20, 300}))
		}
		parts = append(parts, bs)
	}
	src, _ := mem.NewSourceFrom(parts...)
	spec := `{"id":"acks","parallelism":2,"operators":[{"id":"in","kind":"source"},
	  {"id":"big","kind":"filter","key_field":"user","config":{"expr":"amount >= 20"}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"big","partitioned":true},{"id":"b","from":"big","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"memory"}]}`
	g := mustBuild(t, spec, map[string]any{"in": src})
	rt := New(g, Options{})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	pos := rt.Positions()
	for sub, part := range []int32{0, 1} {
		got := pos[planner.TaskID("in", sub)]
		if len(got) != 1 || got[0].Partition != part || got[0].Offset != 12 {
			t.Errorf("source in-%d positions %v, want partition %d at offset 12", sub, got, part)
		}
	}
	m := rt.Metrics()
	var filtered, written int64
	for _, tm := range m {
		if tm.Operator == "big" {
			filtered += tm.RowsIn - tm.RowsOut
		}
		if tm.Operator == "out" {
			written += tm.RowsOut
		}
		if tm.Watermark != math.MaxInt64 {
			t.Errorf("task %s ended with watermark %d, want +inf", tm.Task, tm.Watermark)
		}
	}
	if filtered != 8 || written != 16 {
		t.Fatalf("filtered %d written %d, want 8 and 16", filtered, written)
	}
}

// Two sources feed one operator (a multi-input chain head): every row of
// both arrives, the operator's watermark is the minimum of its inputs (it
// reaches +inf only when both ended), and forward edges between equal
// parallelism into a multi-input operator use channels, not chaining.
func TestUnionOfTwoSources(t *testing.T) {
	t.Parallel()
	mk := func(n int) *mem.Source {
		var bs []arrow.RecordBatch
		for i := 0; i < n; i++ {
			bs = append(bs, clicks([]string{"a", "b"}, []int64{int64(i), int64(i)}))
		}
		s, _ := mem.NewSourceFrom(bs, bs)
		return s
	}
	sink := mem.NewSink()
	spec := `{"id":"union","parallelism":2,"operators":[{"id":"left","kind":"source"},{"id":"right","kind":"source","parallelism":1},
	  {"id":"both","kind":"filter","config":{"expr":"amount >= 0"}},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"l","from":"left","to":"both"},{"id":"r","from":"right","to":"both"},{"id":"o","from":"both","to":"out"}],
	  "sources":[{"operator_id":"left","input_type":"memory"},{"operator_id":"right","input_type":"memory"}],
	  "sinks":[{"operator_id":"out","output_type":"memory"}]}`
	g := mustBuild(t, spec, map[string]any{"left": mk(3), "right": mk(5), "out": sink})
	modes := map[string]string{}
	for _, e := range g.Plan.Edges {
		modes[e.ID] = e.Mode
	}
	if modes["l"] != job.EdgeForward || modes["r"] != job.EdgeRebalance || modes["o"] != job.EdgeChained {
		t.Fatalf("edge modes %v", modes)
	}
	rt := New(g, Options{ChannelCapacity: 1})
	if err := rt.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// left: 2 partitions x 3 batches x 2 rows; right: 2 x 5 x 2.
	if got := sink.NumRows(); got != 12+20 {
		t.Fatalf("got %d rows, want 32", got)
	}
	for _, m := range rt.Metrics() {
		if m.Operator == "both" && m.Watermark != math.MaxInt64 {
			t.Fatalf("%s ended at watermark %d", m.Task, m.Watermark)
		}
	}
}

// Inputs of one operator must agree on their schema.
func TestUnionSchemaMismatch(t *testing.T) {
	t.Parallel()
	spec := `{"id":"union","operators":[{"id":"a","kind":"source"},{"id":"b","kind":"source"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"x","from":"a","to":"out"},{"id":"y","from":"b","to":"out"}],
	  "sources":[{"operator_id":"a","input_type":"generate","config":{"count":1,"fields":[{"name":"k","type":"int64"}]}},
	             {"operator_id":"b","input_type":"generate","config":{"count":1,"fields":[{"name":"k","type":"string"}]}}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
	s, _ := job.Parse([]byte(spec))
	_, err := build.Build(s, build.Env{Connectors: testEnv})
	if err == nil || !strings.Contains(err.Error(), `operator "out": operators[2]: inputs have different schemas: "a" sends (k int64`) {
		t.Fatalf("want a schema mismatch naming both inputs, got %v", err)
	}
}

// Cancelling Run's context stops the job without draining and returns the
// context's error.
func TestRunContextCancel(t *testing.T) {
	t.Parallel()
	src := mem.NewSource(clickSchema, 1)
	spec := `{"id":"cancel","operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"e","from":"in","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"memory"}],"sinks":[{"operator_id":"out","output_type":"drop"}]}`
	rt := New(mustBuild(t, spec, map[string]any{"in": src}), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	for rt.State() != Running {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}
