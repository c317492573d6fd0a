package windowop

// White-box tests of the window operator driven directly (Process,
// Watermark, Close), for what the public API cannot observe: when each
// input batch's acknowledgement completes.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

var inputSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// newInstance builds a window operator instance for inputSchema.
func newInstance(t *testing.T, d Definition, policy string, lateness int64) ops.Instance {
	t.Helper()
	return newInstanceOn(t, d, policy, lateness, statestore.NewMemory())
}

// newInstanceOn is newInstance on a given state backend.
func newInstanceOn(t *testing.T, d Definition, policy string, lateness int64, store statestore.Backend) ops.Instance {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	tm := &job.Time{Mode: job.EventTime, TimestampField: "ts", Watermark: &job.Watermark{Strategy: job.BoundedOutOfOrderness},
		AllowedLatenessMS: lateness, LateEventPolicy: policy}
	if policy == job.LateRoute {
		tm.LateEventRoute = "late"
	}
	spec := &job.Spec{ID: "j",
		Operators: []job.Operator{{ID: "in", Kind: job.KindSource}, {ID: "w", Kind: job.KindWindow, Stateful: true, KeyField: "k", Config: raw}},
		Edges:     []job.Edge{{ID: "in-w", From: "in", To: "w", Partitioned: true}},
		Sources:   []job.Source{{OperatorID: "in", InputType: "memory", Time: tm}},
	}
	built, err := Build(ops.Context{JobID: "j", Spec: spec, Op: &spec.Operators[1], Input: inputSchema, Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := built.New(ops.Task{TaskInfo: connectors.TaskInfo{JobID: "j", OperatorID: "w", Parallelism: 1},
		State: store, KeyGroups: job.KeyGroupRange{Start: 0, End: 127}, MaxParallelism: 128, Now: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

type row struct {
	k  string
	ts *int64
	v  int64
}

func at(ts int64) *int64 { return &ts }

func record(rows ...row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, inputSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.k)
		if r.ts == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(*r.ts)
		}
		b.Field(2).(*array.Int64Builder).Append(r.v)
	}
	return b.NewRecordBatch()
}

// collector is an Emitter that keeps what it receives, by port.
type collector struct {
	got []ops.Batch
}

func (c *collector) Emit(_ context.Context, b ops.Batch) error {
	c.got = append(c.got, b)
	return nil
}

// write releases everything received, as a sink does after writing it.
func (c *collector) write() (main, late int) {
	for _, b := range c.got {
		if b.Port == ops.PortLate {
			late += int(b.Rec.NumRows())
		} else {
			main += int(b.Rec.NumRows())
		}
		b.Rec.Release()
		b.Ack.Release(nil)
	}
	c.got = nil
	return main, late
}

// tracked is an acknowledgement whose completion the test observes.
type tracked struct {
	mu   sync.Mutex
	done bool
	err  error
	node *ack.Node
}

func newTracked() *tracked {
	tr := &tracked{}
	tr.node = ack.New(func(err error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.done {
			panic("acknowledged twice")
		}
		tr.done, tr.err = true, err
	})
	return tr
}

func (tr *tracked) state() (bool, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.done, tr.err
}

func (tr *tracked) wantDone(t *testing.T, what string, wantErr error) {
	t.Helper()
	done, err := tr.state()
	if !done {
		t.Fatalf("%s: the batch is not acknowledged", what)
	}
	if !errors.Is(err, wantErr) && !(err == nil && wantErr == nil) {
		t.Fatalf("%s: acknowledged with %v, want %v", what, err, wantErr)
	}
}

func (tr *tracked) wantPending(t *testing.T, what string) {
	t.Helper()
	if done, err := tr.state(); done {
		t.Fatalf("%s: acknowledged (err %v) while its rows are held", what, err)
	}
}

func process(t *testing.T, inst ops.Instance, out ops.Emitter, rows ...row) *tracked {
	t.Helper()
	tr := newTracked()
	if err := inst.Process(context.Background(), ops.Batch{Rec: record(rows...), Ack: tr.node}, out); err != nil {
		t.Fatal(err)
	}
	return tr
}

func watermark(t *testing.T, inst ops.Instance, out ops.Emitter, wm int64) {
	t.Helper()
	if err := inst.Watermark(context.Background(), wm, out); err != nil {
		t.Fatal(err)
	}
}

func definitions() map[string]Definition {
	return map[string]Definition{
		"tumbling": Tumbling(1e9, job.Count("n")),
		"sliding":  Sliding(1e9, 5e8, job.Count("n")),
		"session":  Session(1e9, job.Count("n")),
	}
}

// A batch of null event times is never held: under drop and
// update its acknowledgement completes during Process, before any
// watermark; under route it completes once the late sink wrote the rows.
func TestNullTimestampAckCompletesAtOnce(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		for _, policy := range []string{job.LateDrop, job.LateUpdate, job.LateRoute} {
			t.Run(name+"/"+policy, func(t *testing.T) {
				inst := newInstance(t, d, policy, 5000)
				defer inst.Close()
				var out collector
				tr := process(t, inst, &out, row{k: "a", v: 1}, row{k: "b", v: 2})
				if policy == job.LateRoute {
					tr.wantPending(t, "routed, not yet written")
					if main, late := out.write(); main != 0 || late != 2 {
						t.Fatalf("emitted %d main rows and %d late rows, want 0 and 2", main, late)
					}
				} else if len(out.got) != 0 {
					t.Fatalf("emitted %d batches", len(out.got))
				}
				tr.wantDone(t, "null event times", nil)
				g := inst.(ops.Gauger).Gauges()
				if g[MetricOpenWindows] != 0 {
					t.Fatalf("open_windows = %d", g[MetricOpenWindows])
				}
				c := inst.(ops.Gauger).Counters()
				if policy == job.LateRoute && c[MetricNullRouted] != 2 || policy != job.LateRoute && c[MetricNullDropped] != 2 {
					t.Fatalf("counters %v", c)
				}
			})
		}
	}
}

// A batch whose rows wait in open windows is acknowledged once every
// window its rows went into has fired and its output was written (not
// before); late rows that are dropped do not hold anything.
func TestAckHeldUntilWindowsFire(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		t.Run(name, func(t *testing.T) {
			inst := newInstance(t, d, job.LateDrop, 0)
			defer inst.Close()
			var out collector
			watermark(t, inst, &out, 0)
			// Rows at 100 (and a null one): tumbling [0,1000); sliding
			// [-500,500) and [0,1000); session [100,1100).
			tr := process(t, inst, &out, row{k: "a", ts: at(100), v: 1}, row{k: "b", v: 2})
			tr.wantPending(t, "after Process")
			watermark(t, inst, &out, 999)
			out.write()
			tr.wantPending(t, "at watermark 999")
			watermark(t, inst, &out, 1100)
			tr.wantPending(t, "fired, output not yet written")
			if main, _ := out.write(); main == 0 {
				t.Fatal("nothing fired at watermark 1100")
			}
			tr.wantDone(t, "fired and written", nil)
			// A late row is dropped: acknowledged at once.
			late := process(t, inst, &out, row{k: "a", ts: at(5), v: 3})
			late.wantDone(t, "late row", nil)
			if c, g := inst.(ops.Gauger).Counters(), inst.(ops.Gauger).Gauges(); c[MetricLateDropped] != 1 || g[MetricOpenWindows] != 0 {
				t.Fatalf("counters %v, gauges %v", c, g)
			}
		})
	}
}

// The watermark floor of a firing is persisted before the input batches
// the firing releases commit their state (positions) and acknowledge their
// input. The other way round, a crash between the two writes leaves
// committed positions past rows of windows above the persisted floor: the
// restart reopens those windows with only the rows it still replays, and
// emits them again with part of their rows.
func TestFloorPersistedBeforeReleasedInputCommits(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		t.Run(name, func(t *testing.T) {
			store := statestore.NewMemory()
			inst := newInstanceOn(t, d, job.LateDrop, 0, store)
			defer inst.Close()
			var out collector
			watermark(t, inst, &out, 0)
			fl := newFloor(store, "j", "w", 0)
			floorAtAck := int64(eventtime.NoWatermark)
			acked := false
			node := ack.New(func(err error) {
				if err != nil {
					t.Errorf("input acknowledged with %v", err)
				}
				wm, _, err := fl.load(0)
				if err != nil {
					t.Error(err)
				}
				floorAtAck, acked = wm, true
			})
			if err := inst.Process(context.Background(), ops.Batch{Rec: record(row{k: "a", ts: at(100), v: 1}), Ack: node}, &out); err != nil {
				t.Fatal(err)
			}
			watermark(t, inst, &out, 1100)
			if main, _ := out.write(); main == 0 {
				t.Fatal("nothing fired at watermark 1100")
			}
			if !acked {
				t.Fatal("the input batch is not acknowledged after its window fired and was written")
			}
			if floorAtAck != 1100 {
				t.Fatalf("the floor was %d when the input batch was acknowledged, want 1100 (persisted first)", floorAtAck)
			}
		})
	}
}

// Close releases the acknowledgements still held with ErrAbandoned, so
// their rows are replayed on restart.
func TestCloseAbandonsHeldAcks(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		t.Run(name, func(t *testing.T) {
			inst := newInstance(t, d, job.LateDrop, 0)
			var out collector
			tr := process(t, inst, &out, row{k: "a", ts: at(100), v: 1})
			tr.wantPending(t, "held")
			if err := inst.Close(); err != nil {
				t.Fatal(err)
			}
			tr.wantDone(t, "after Close", ops.ErrAbandoned)
		})
	}
}

// A late update's output carries the late batch's
// acknowledgement; the batch is acknowledged once the update is written.
func TestLateUpdateAckFollowsTheUpdate(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		t.Run(name, func(t *testing.T) {
			inst := newInstance(t, d, job.LateUpdate, 10_000)
			defer inst.Close()
			var out collector
			process(t, inst, &out, row{k: "a", ts: at(100), v: 1})
			watermark(t, inst, &out, 3000)
			if main, _ := out.write(); main == 0 {
				t.Fatal("nothing fired")
			}
			tr := process(t, inst, &out, row{k: "a", ts: at(200), v: 2})
			tr.wantPending(t, "update emitted, not written")
			if len(out.got) == 0 {
				t.Fatal("no update emitted")
			}
			for _, b := range out.got {
				upd := b.Rec.Column(int(b.Rec.NumCols()) - 1).(*array.Boolean)
				for i := 0; i < upd.Len(); i++ {
					if !upd.Value(i) {
						t.Fatalf("update row %d not marked as an update", i)
					}
				}
			}
			out.write()
			tr.wantDone(t, "update written", nil)
			// The end of the input frees everything.
			watermark(t, inst, &out, eventtime.EndOfTime)
			out.write()
			if c, g := inst.(ops.Gauger).Counters(), inst.(ops.Gauger).Gauges(); g[MetricOpenWindows] != 0 || c[MetricLateUpdated] != 1 {
				t.Fatalf("counters %v, gauges %v", c, g)
			}
		})
	}
}

// An event time too close to the ends of int64 for its windows fails the
// batch with a *eventtime.TimeError naming the field, and the batch's
// acknowledgement with it; no panic, no wrap-around.
func TestEventTimeOutOfRangeFailsTheBatch(t *testing.T) {
	t.Parallel()
	for name, d := range definitions() {
		t.Run(name, func(t *testing.T) {
			inst := newInstance(t, d, job.LateDrop, 0)
			defer inst.Close()
			var out collector
			tr := newTracked()
			err := inst.Process(context.Background(), ops.Batch{Rec: record(row{k: "a", ts: at(eventtime.EndOfTime - 10), v: 1}), Ack: tr.node}, &out)
			var te *eventtime.TimeError
			if !errors.As(err, &te) || te.Field != "ts" {
				t.Fatalf("got %v, want a *eventtime.TimeError for ts", err)
			}
			tr.wantDone(t, "failed batch", te)
		})
	}
}
