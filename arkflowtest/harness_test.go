package arkflowtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
	"github.com/arkflow-rs/arkflow-go/window"
)

// click is an event: a user at an event time in Unix ms.
type click struct {
	User string `arkflow:"user"`
	TS   int64  `arkflow:"ts"`
}

// count is a window's result row.
type count struct {
	User   string    `arkflow:"user"`
	Start  time.Time `arkflow:"window_start"`
	End    time.Time `arkflow:"window_end"`
	N      int64     `arkflow:"n"`
	Update bool      `arkflow:"__arkflow_window_update"`
}

func (c count) String() string {
	s := fmt.Sprintf("%s[%d,%d)=%d", c.User, c.Start.UnixMilli(), c.End.UnixMilli(), c.N)
	if c.Update {
		s += " update"
	}
	return s
}

// counts is a job counting the clicks of each user per window w (whose
// aggregate is job.Count("n")).
func counts(in *arkflowtest.Input[click], w window.Definition, out *arkflowtest.Output[count], opts ...timeOpt) *arkflow.Builder {
	return arkflow.NewJob("clicks").Source("in", in, eventTime("ts", opts...)).
		KeyBy("user").Window("w", w).Sink("out", out)
}

// expect compares rows with their String forms, joined by "; ".
func expect[T any](t *testing.T, rows []T, want string) {
	t.Helper()
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprint(r)
	}
	if got := strings.Join(s, "; "); got != want {
		t.Fatalf("rows\n got: %s\nwant: %s", got, want)
	}
}

func TestTumbling(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Tumbling(10*time.Second, job.Count("n")), out))
	in.Push(0, click{"ann", 1000}, click{"bob", 2000}, click{"ann", 9999})
	expect(t, out.Take(), "")
	in.Push(0, click{"ann", 10_000}) // the watermark reaches 10 s
	expect(t, out.Take(), "ann[0,10000)=2; bob[0,10000)=1")
	h.AdvanceWatermark(20_000)
	expect(t, out.Take(), "ann[10000,20000)=1")
}

// Every window containing the event, size 5 s sliding by 2 s.
func TestSliding(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Sliding(5*time.Second, 2*time.Second, job.Count("n")), out))
	in.Push(0, click{"ann", 4500})
	in.Push(0, click{"ann", 6000})
	expect(t, out.Take(), "ann[0,5000)=1")
	h.AdvanceWatermark(12_000)
	expect(t, out.Take(), "ann[2000,7000)=2; ann[4000,9000)=2; ann[6000,11000)=1")
}

// Sessions merge when an event bridges two of them.
func TestSession(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Session(time.Second, job.Count("n")), out, ooo(2*time.Second)))
	in.Push(0, click{"ann", 0}, click{"bob", 100}, click{"ann", 1500})
	in.Push(0, click{"ann", 900}) // bridges [0,1000) and [1500,2500)
	h.AdvanceWatermark(2400)
	expect(t, out.Take(), "bob[100,1100)=1")
	h.AdvanceWatermark(2500)
	expect(t, out.Take(), "ann[0,2500)=3")
}

// Drop (the default) counts late events and emits nothing.
func TestLateDrop(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Tumbling(time.Second, job.Count("n")), out))
	in.Push(0, click{"ann", 100})
	in.Push(0, click{"bob", 1500}, click{"ann", 200}) // late at once: the watermark moved first
	expect(t, out.Take(), "ann[0,1000)=1")
	if n := h.Counter("w", "late_dropped"); n != 1 {
		t.Fatalf("late_dropped = %d, want 1", n)
	}
}

// Route sends late events, as they came, to the late sink.
func TestLateRoute(t *testing.T) {
	in, out, late := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count](), arkflowtest.NewOutput[click]()
	arkflowtest.New(t, counts(in, window.Tumbling(time.Second, job.Count("n")), out, routeLate("late")).LateSink("late", late))
	in.Push(0, click{"ann", 100})
	in.Push(0, click{"bob", 1500}, click{"ann", 200})
	expect(t, out.Take(), "ann[0,1000)=1")
	expect(t, late.Rows(), "{ann 200}")
}

// Update re-emits the corrected window until its deadline.
func TestLateUpdate(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Tumbling(time.Second, job.Count("n")), out, lateness(time.Second), lateUpdate()))
	in.Push(0, click{"ann", 100})
	in.Push(0, click{"bob", 1500}, click{"ann", 200})
	expect(t, out.Take(), "ann[0,1000)=1; ann[0,1000)=2 update")
	h.AdvanceWatermark(2000) // ann's deadline: 1000 + 1000
	in.Push(0, click{"ann", 300})
	expect(t, out.Take(), "bob[1000,2000)=1")
	if n := h.Counter("w", "late_dropped"); n != 1 {
		t.Fatalf("late_dropped = %d, want 1", n)
	}
}

// visit is a page view.
type visit struct {
	User string `arkflow:"user"`
	Page string `arkflow:"page"`
}

var (
	visits = state.NewValue[int64]("visits")
	pages  = state.NewMap[string, int64]("pages")
)

// firstVisits counts each user's visits (a Value), remembers at which
// visit each page was first seen (a Map), and keeps only first visits.
func firstVisits(_ context.Context, pc *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	rows, err := arkflow.Decode[visit](rec)
	if err != nil {
		return nil, err
	}
	var first []visit
	for i, v := range rows {
		k, err := pc.State(i)
		if err != nil {
			return nil, err
		}
		n, _, err := visits.Get(k)
		if err == nil {
			err = visits.Set(k, n+1)
		}
		_, seen, err2 := pages.Get(k, v.Page)
		if err = errors.Join(err, err2); err != nil {
			return nil, err
		}
		if !seen {
			first = append(first, v)
			if err := pages.Put(k, v.Page, n+1); err != nil {
				return nil, err
			}
		}
	}
	return arkflow.Encode(first)
}

func firstVisitsJob(in *arkflowtest.Input[visit], out *arkflowtest.Output[visit]) *arkflow.Builder {
	schema, _ := arkflow.SchemaOf[visit]()
	return arkflow.NewJob("visits").Source("in", in).KeyBy("user").
		Process("first", firstVisits, arkflow.WithSchema(schema)).Sink("out", out)
}

// Process with state.Value and state.Map, read back for a key.
func TestProcessState(t *testing.T) {
	in, out := arkflowtest.NewInput[visit](1), arkflowtest.NewOutput[visit]()
	h := arkflowtest.New(t, firstVisitsJob(in, out))
	in.Push(0, visit{"ann", "home"}, visit{"bob", "home"}, visit{"ann", "home"}, visit{"ann", "cart"})
	expect(t, out.Take(), "{ann home}; {bob home}; {ann cart}")
	if n, _ := arkflowtest.Value(h, "first", "ann", visits); n != 3 {
		t.Fatalf("ann's visits = %d, want 3", n)
	}
	if m := arkflowtest.Map(h, "first", "ann", pages); len(m) != 2 || m["home"] != 1 || m["cart"] != 3 {
		t.Fatalf("ann's pages = %v", m)
	}
	if _, ok := arkflowtest.Value(h, "first", "cid", visits); ok {
		t.Fatal("a key never seen has a value")
	}
}

// A snapshot carries a Process operator's state and a window's open
// contents (by replay) into a restored job, a new version here.
func TestSnapshotRestore(t *testing.T) {
	in, out := arkflowtest.NewInput[visit](1), arkflowtest.NewOutput[visit]()
	h := arkflowtest.New(t, firstVisitsJob(in, out))
	in.Push(0, visit{"ann", "home"})
	snap := h.Snapshot()
	in.Push(0, visit{"ann", "cart"}) // not in the snapshot
	in2, out2 := arkflowtest.NewInput[visit](1), arkflowtest.NewOutput[visit]()
	h2 := arkflowtest.Restore(t, firstVisitsJob(in2, out2), snap)
	in2.Push(0, visit{"ann", "home"}, visit{"ann", "shop"})
	expect(t, out2.Rows(), "{ann shop}")
	if n, _ := arkflowtest.Value(h2, "first", "ann", visits); n != 3 {
		t.Fatalf("ann's visits = %d, want 3", n)
	}

	cin, cout := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	b := counts(cin, window.Tumbling(time.Second, job.Count("n")), cout)
	h = arkflowtest.New(t, b)
	cin.Push(0, click{"ann", 100})
	cin.Push(0, click{"bob", 1500}, click{"ann", 1200}) // fires ann[0,1000), holds [1000,2000)
	snap = h.Snapshot()
	h.Stop()
	h = arkflowtest.Restore(t, b, snap) // the same job and input again
	cin.Push(0, click{"ann", 1300})
	h.AdvanceWatermark(2000)
	expect(t, cout.Rows(), "ann[0,1000)=1; bob[1000,2000)=1; ann[1000,2000)=2")
}

// Processing time follows the fake clock.
func TestProcessingTime(t *testing.T) {
	in, out := arkflowtest.NewInput[click](1), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").Source("in", in).KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).Sink("out", out))
	in.Push(0, click{User: "ann"}, click{User: "ann"})
	h.AdvanceClock(999 * time.Millisecond)
	in.Push(0, click{User: "ann"})
	expect(t, out.Take(), "")
	h.AdvanceClock(time.Millisecond)
	expect(t, out.Take(), "ann[0,1000)=3")
}

// A partition without data holds the watermark back until it
// has been idle for the idle timeout.
func TestIdlePartition(t *testing.T) {
	in, out := arkflowtest.NewInput[click](2), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Tumbling(time.Second, job.Count("n")), out, idle(time.Second)))
	in.Push(0, click{"ann", 100}, click{"ann", 1500})
	h.AdvanceClock(600 * time.Millisecond)
	in.Push(0, click{"ann", 1600}) // partition 0 stays active
	h.AdvanceClock(399 * time.Millisecond)
	expect(t, out.Take(), "")
	h.AdvanceClock(time.Millisecond) // partition 1 silent for 1 s
	expect(t, out.Take(), "ann[0,1000)=1")
	in.Push(1, click{"bob", 50}) // it rejoins; the watermark stays
	if n := h.Counter("w", "late_dropped"); n != 1 {
		t.Fatalf("late_dropped = %d, want 1", n)
	}
}

// Finish ends the inputs: the final watermark fires every window.
func TestFinish(t *testing.T) {
	in, out := arkflowtest.NewInput[click](3), arkflowtest.NewOutput[count]()
	h := arkflowtest.New(t, counts(in, window.Session(time.Minute, job.Count("n")), out))
	in.Push(2, click{"ann", 5})
	h.Finish()
	expect(t, out.Rows(), "ann[5,60005)=1")
}

// fatalTB records the first fatal failure and ends the goroutine, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails runs body with a TB that records its fatal failure.
func fails(t *testing.T, body func(tb testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(tb)
	}()
	<-done
	return tb.msg
}

func TestFailuresFailTheTest(t *testing.T) {
	boom := arkflow.ProcessFunc(func(context.Context, *arkflow.ProcessContext, arrow.RecordBatch) (arrow.RecordBatch, error) {
		return nil, errors.New("boom")
	})
	msg := fails(t, func(tb testing.TB) {
		in := arkflowtest.NewInput[visit](1)
		arkflowtest.New(tb, arkflow.NewJob("j").Source("in", in).KeyBy("user").Process("p", boom).Sink("out", arkflowtest.NewOutput[visit]()))
		in.Push(0, visit{"ann", "home"})
	})
	if !strings.Contains(msg, "boom") {
		t.Fatalf("a failed job: %q", msg)
	}
	msg = fails(t, func(tb testing.TB) {
		arkflowtest.New(tb, counts(arkflowtest.NewInput[click](1), window.Tumbling(time.Second, job.Count("n")), arkflowtest.NewOutput[count]()).
			LateSink("late", arkflowtest.NewOutput[visit]()))
	})
	if !strings.Contains(msg, "building the job") {
		t.Fatalf("an output of the wrong type: %q", msg)
	}
	msg = fails(t, func(tb testing.TB) {
		in := arkflowtest.NewInput[click](1)
		arkflowtest.New(tb, counts(in, window.Tumbling(time.Second, job.Count("n")), arkflowtest.NewOutput[count]()))
		in.Push(1, click{"ann", 1})
	})
	if !strings.Contains(msg, "partition 1 out of range") {
		t.Fatalf("a push to a missing partition: %q", msg)
	}
}

func TestUnsupportedRowType(t *testing.T) {
	type bad struct{ C chan int }
	msg := fails(t, func(tb testing.TB) {
		arkflowtest.New(tb, arkflow.NewJob("j").Source("in", arkflowtest.NewInput[bad](1)).Sink("out", arkflowtest.NewOutput[click]()))
	})
	if !strings.Contains(msg, "bad.C") {
		t.Fatalf("an unsupported row type: %q", msg)
	}
}

// Several subtasks: each Push settles, so the order is the push order.
func TestParallel(t *testing.T) {
	in, out := arkflowtest.NewInput[visit](4), arkflowtest.NewOutput[visit]()
	h := arkflowtest.New(t, firstVisitsJob(in, out).Parallelism(2))
	for p, u := range []string{"ann", "bob", "cid", "dan"} {
		in.Push(p, visit{u, "home"}, visit{u, "home"})
	}
	in.Push(3, visit{"ann", "home"}, visit{"ann", "cart"})
	expect(t, out.Take(), "{ann home}; {bob home}; {cid home}; {dan home}; {ann cart}")
	for u, want := range map[string]int64{"ann": 4, "bob": 2, "cid": 2, "dan": 2} {
		if n, _ := arkflowtest.Value(h, "first", u, visits); n != want {
			t.Fatalf("%s's visits = %d, want %d", u, n, want)
		}
	}
}

// A job with its own checkpoint block and Badger state keeps them.
func TestOwnCheckpointsAndBadger(t *testing.T) {
	in, out := arkflowtest.NewInput[visit](1), arkflowtest.NewOutput[visit]()
	b := firstVisitsJob(in, out).State(job.State{Backend: job.BackendBadger}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + t.TempDir(), IntervalMS: 3_600_000})
	h := arkflowtest.New(t, b)
	in.Push(0, visit{"ann", "home"})
	snap := h.Snapshot()
	h.Stop()
	h = arkflowtest.Restore(t, b, snap)
	in.Push(0, visit{"ann", "home"}, visit{"ann", "cart"})
	expect(t, out.Rows(), "{ann home}; {ann cart}")
	if st := h.Job().Spec().State; st.Backend != job.BackendBadger {
		t.Fatalf("state backend %q", st.Backend)
	}
}

func TestStartFailureFailsOnce(t *testing.T) {
	ft := &countingTB{TB: t}
	t.Cleanup(func() { // after the harness's own cleanup
		if ft.errors != 0 {
			t.Errorf("the failure was reported %d more times", ft.errors)
		}
	})
	// A snapshot of another job: the start finds no savepoint of "j".
	other := arkflowtest.New(t, arkflow.NewJob("other").Source("in", arkflowtest.NewInput[click](1)).Sink("out", arkflowtest.NewOutput[click]()))
	snap := other.Snapshot()
	msg := fails(t, func(tb testing.TB) {
		ft.fatalTB = tb.(*fatalTB)
		b := arkflow.NewJob("j").Source("in", arkflowtest.NewInput[click](1)).Sink("out", arkflowtest.NewOutput[click]())
		arkflowtest.Restore(ft, b, snap)
	})
	if !strings.Contains(msg, "starting the job") {
		t.Fatalf("a job that cannot start: %q", msg)
	}
}

// countingTB is a fatalTB that counts Errorf calls instead of failing.
type countingTB struct {
	testing.TB
	*fatalTB
	errors int
}

func (c *countingTB) Helper()                           {}
func (c *countingTB) Fatal(args ...any)                 { c.fatalTB.Fatal(args...) }
func (c *countingTB) Fatalf(format string, args ...any) { c.fatalTB.Fatalf(format, args...) }
func (c *countingTB) Errorf(string, ...any)             { c.errors++ }

// timeOpt sets one field of an arkflow.EventTime, so that tests can list
// the event-time settings they vary.
type timeOpt func(*arkflow.EventTime)

func ooo(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.OutOfOrderness = d } }
func monotonous() timeOpt {
	return func(e *arkflow.EventTime) { e.Monotonous, e.OutOfOrderness = true, 0 }
}
func idle(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.IdleTimeout = d } }
func advanceIdle(d time.Duration) timeOpt {
	return func(e *arkflow.EventTime) { e.AdvanceWhenIdle = d }
}
func perRow() timeOpt                  { return func(e *arkflow.EventTime) { e.PerRow = true } }
func lateness(d time.Duration) timeOpt { return func(e *arkflow.EventTime) { e.AllowedLateness = d } }
func lateUpdate() timeOpt {
	return func(e *arkflow.EventTime) { e.LateUpdate, e.RouteLate = true, "" }
}
func routeLate(sink string) timeOpt {
	return func(e *arkflow.EventTime) { e.RouteLate, e.LateUpdate = sink, false }
}

// eventTime is the EventTime of field with opts applied in order.
func eventTime(field string, opts ...timeOpt) arkflow.EventTime {
	e := arkflow.EventTime{Field: field}
	for _, o := range opts {
		o(&e)
	}
	return e
}
