package arkflowtest_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/arkflowtest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Click is an event of the examples: a user, at an event time in Unix ms.
type Click struct {
	User string `arkflow:"user"`
	TS   int64  `arkflow:"ts"`
}

// Count is a window's result: clicks per user and window.
type Count struct {
	User  string    `arkflow:"user"`
	Start time.Time `arkflow:"window_start"`
	N     int64     `arkflow:"n"`
}

func (c Count) String() string { return fmt.Sprintf("%s@%ds:%d", c.User, c.Start.Unix(), c.N) }

// t stands for the *testing.T of a test function, which examples do not
// get. It fails by panicking; its cleanups run when the package's tests
// end (TestMain).
var t testing.TB = &exampleT{}

type exampleT struct {
	testing.TB // nil: the harness calls only the methods below
	mu         sync.Mutex
	cleanups   []func()
	dirs       []string
}

func (*exampleT) Helper()                      {}
func (*exampleT) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (*exampleT) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (*exampleT) Errorf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (e *exampleT) Cleanup(f func())           { e.mu.Lock(); e.cleanups = append(e.cleanups, f); e.mu.Unlock() }
func (e *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "arkflowtest-example-")
	if err != nil {
		panic(err)
	}
	e.mu.Lock()
	e.dirs = append(e.dirs, dir)
	e.mu.Unlock()
	return dir
}

func (e *exampleT) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	for _, d := range e.dirs {
		os.RemoveAll(d)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	t.(*exampleT).cleanup()
	os.Exit(code)
}

// A test of a job counting clicks per user in windows of 10 s.
func Example() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(10*time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 1_000}, Click{"bob", 2_000}, Click{"ann", 9_000})
	fmt.Println("before the watermark:", out.Take())
	h.AdvanceWatermark(10_000)
	fmt.Println("after:", out.Take())
	in.Push(0, Click{"ann", 3_000}) // late: dropped and counted
	fmt.Println("late dropped:", h.Counter("w", "late_dropped"))
	// Output:
	// before the watermark: []
	// after: [ann@0s:2 bob@0s:1]
	// late dropped: 1
}

// A join reads two Inputs, each with its own event time. Its watermark
// is the lower of the two, so an input that has not advanced holds the
// join's windows back; Harness.AdvanceWatermark advances both.
func Example_join() {
	type Person struct {
		ID   string `arkflow:"id"`
		Name string `arkflow:"name"`
		TS   int64  `arkflow:"ts"`
	}
	type Auction struct {
		Auction int64  `arkflow:"auction"`
		Seller  string `arkflow:"seller"`
		TS      int64  `arkflow:"ts"`
	}
	type Sale struct {
		Seller  string `arkflow:"id"` // the key, named as on the left
		Name    string `arkflow:"name"`
		Auction int64  `arkflow:"auction"`
	}
	persons, auctions := arkflowtest.NewInput[Person](1), arkflowtest.NewInput[Auction](1)
	out := arkflowtest.NewOutput[Sale]()
	arkflowtest.New(t, arkflow.NewJob("sales").
		Source("persons", persons, arkflow.EventTime{Field: "ts"}).
		Source("auctions", auctions, arkflow.EventTime{Field: "ts"}).
		Join("sales", job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id",
			Right: "auctions", RightKey: "seller", Size: 10 * time.Second}).
		Sink("out", out))
	persons.Push(0, Person{"p1", "ann", 1_000})
	auctions.Push(0, Auction{7, "p1", 4_000})
	persons.AdvanceWatermark(10_000)
	fmt.Println("persons at 10 s:", out.Take())
	auctions.AdvanceWatermark(10_000)
	fmt.Println("both at 10 s:", out.Take())
	// Output:
	// persons at 10 s: []
	// both at 10 s: [{p1 ann 7}]
}

// New starts the job; each step after it returns once the job handled it.
func ExampleNew() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	in.Push(0, Click{"ann", 500}) // waits for the job
	arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 1_000}) // the watermark reaches 1 s
	fmt.Println(out.Rows())
	// Output: [ann@0s:1]
}

// The harness's steps: the watermark fires event-time windows, the clock
// moves processing time.
func ExampleHarness() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in). // processing time: windows follow the clock
		KeyBy("user").
		Window("w", window.Tumbling(time.Minute, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{User: "ann"})
	h.AdvanceClock(time.Minute)
	fmt.Println(out.Rows(), h.Now().UTC().Format(time.TimeOnly))
	// Output: [ann@0s:1] 00:01:00
}

// Restore starts a new version of the job from a snapshot of the old one;
// the window's open contents are replayed from the snapshot's input.
func ExampleRestore() {
	build := func() (*arkflowtest.Input[Click], *arkflowtest.Output[Count], *arkflow.Builder) {
		in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
		return in, out, arkflow.NewJob("clicks").
			Source("in", in, arkflow.EventTime{Field: "ts"}).
			KeyBy("user").
			Window("w", window.Tumbling(10*time.Second, job.Count("n"))).
			Sink("out", out)
	}
	in, _, b := build()
	h := arkflowtest.New(t, b)
	in.Push(0, Click{"ann", 1_000}, Click{"ann", 2_000})
	snap := h.Snapshot()
	h.Stop()

	in2, out2, b2 := build()
	h2 := arkflowtest.Restore(t, b2, snap)
	in2.Push(0, Click{"ann", 3_000})
	h2.AdvanceWatermark(10_000)
	fmt.Println(out2.Rows())
	// Output: [ann@0s:3]
}

func ExampleHarness_AdvanceWatermark() {
	in, out := arkflowtest.NewInput[Click](2), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 100}, Click{"ann", 5_000})
	fmt.Println("partition 1 holds it back:", out.Rows())
	h.AdvanceWatermark(2_000) // both partitions
	fmt.Println(out.Rows())
	// Output:
	// partition 1 holds it back: []
	// [ann@0s:1]
}

func ExampleHarness_AdvanceClock() {
	in, out := arkflowtest.NewInput[Click](2), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts", IdleTimeout: time.Second}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	h.AdvanceClock(500 * time.Millisecond)
	in.Push(0, Click{"ann", 100}, Click{"ann", 1_500})
	h.AdvanceClock(500 * time.Millisecond) // partition 1 silent for 1 s: idle
	fmt.Println(out.Rows())
	// Output: [ann@0s:1]
}

func ExampleHarness_Now() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in). // processing time: the fake clock's
		KeyBy("user").
		Window("w", window.Tumbling(time.Hour, job.Count("n"))).
		Sink("out", out),
		arkflowtest.StartAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	in.Push(0, Click{User: "ann"})
	h.AdvanceClock(time.Hour)
	fmt.Println(h.Now().UTC(), out.Rows())
	// Output: 2030-01-01 01:00:00 +0000 UTC [ann@1893456000s:1]
}

func ExampleHarness_Counter() {
	in, late := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts", RouteLate: "late"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", arkflowtest.NewOutput[Count]()).
		LateSink("late", late))
	in.Push(0, Click{"ann", 2_000}, Click{"bob", 10})
	fmt.Println(h.Counter("w", "late_routed"), late.Rows())
	// Output: 1 [{bob 10}]
}

func ExampleHarness_Finish() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Session(time.Minute, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 0}, Click{"ann", 30_000})
	h.Finish() // the final watermark fires the open session
	fmt.Println(out.Rows(), h.Job().Status())
	// Output: [ann@0s:2] stopped
}

func ExampleHarness_Job() {
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", arkflowtest.NewInput[Click](1)).
		Sink("out", arkflowtest.NewOutput[Click]()))
	fmt.Println(h.Job().Status(), h.Job().Spec().Sources[0].InputType)
	// Output: running arkflowtest
}

// Settle after driving the job another way than through the harness.
func ExampleHarness_Settle() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").Source("in", in).Sink("out", out))
	in.Push(0, Click{"ann", 1})
	if _, err := h.Job().Checkpoint(context.Background()); err != nil {
		panic(err)
	}
	h.Settle()
	fmt.Println(out.Rows(), h.Job().Metrics().Checkpoints.Completed)
	// Output: [{ann 1}] 1
}

func ExampleHarness_Snapshot() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	b := arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out)
	h := arkflowtest.New(t, b)
	in.Push(0, Click{"ann", 100})
	snap := h.Snapshot()
	in.Push(0, Click{"ann", 200}) // after the snapshot
	h.Stop()
	h = arkflowtest.Restore(t, b, snap) // the same job, resuming its input
	h.AdvanceWatermark(1_000)
	fmt.Println(out.Rows())
	// Output: [ann@0s:2]
}

func ExampleHarness_Stop() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 100})
	h.Stop() // the open window keeps its contents, unfired
	fmt.Println(out.Rows(), h.Job().Status())
	// Output: [] stopped
}

// seen counts the rows of each key in the Process examples.
var seen = state.NewValue[int64]("seen")

// countSeen is a Process function that counts rows per key in a Value, and
// in a Map per ts.
func countSeen(_ context.Context, pc *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	clicks, err := arkflow.Decode[Click](rec)
	if err != nil {
		return nil, err
	}
	for i, c := range clicks {
		k, err := pc.State(i)
		if err != nil {
			return nil, err
		}
		n, _, _ := seen.Get(k)
		if err := seen.Set(k, n+1); err != nil {
			return nil, err
		}
		if err := byTS.Put(k, c.TS, n+1); err != nil {
			return nil, err
		}
	}
	rec.Retain() // passed on as it came
	return rec, nil
}

// byTS maps, per key, a row's ts to its rank among the key's rows.
var byTS = state.NewMap[int64, int64]("by-ts")

func ExampleHarness_State() {
	in := arkflowtest.NewInput[Click](1)
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		KeyBy("user").
		Process("seen", arkflow.ProcessFunc(countSeen)).
		Sink("out", arkflowtest.NewOutput[Click]()))
	in.Push(0, Click{"ann", 1}, Click{"ann", 2})
	n, ok, err := seen.Get(h.State("seen", "ann"))
	fmt.Println(n, ok, err)
	// Output: 2 true <nil>
}

func ExampleValue() {
	in := arkflowtest.NewInput[Click](1)
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		KeyBy("user").
		Process("seen", arkflow.ProcessFunc(countSeen)).
		Sink("out", arkflowtest.NewOutput[Click]()))
	in.Push(0, Click{"ann", 1}, Click{"bob", 2}, Click{"ann", 3})
	fmt.Println(arkflowtest.Value(h, "seen", "ann", seen))
	fmt.Println(arkflowtest.Value(h, "seen", "cid", seen))
	// Output:
	// 2 true
	// 0 false
}

func ExampleMap() {
	in := arkflowtest.NewInput[Click](1)
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		KeyBy("user").
		Process("seen", arkflow.ProcessFunc(countSeen)).
		Sink("out", arkflowtest.NewOutput[Click]()))
	in.Push(0, Click{"ann", 10}, Click{"ann", 20})
	fmt.Println(arkflowtest.Map(h, "seen", "ann", byTS))
	// Output: map[10:1 20:2]
}

func ExampleInput() {
	in, out := arkflowtest.NewInput[Click](2), arkflowtest.NewOutput[Click]()
	arkflowtest.New(t, arkflow.NewJob("clicks").Source("in", in).Sink("out", out))
	in.Push(1, Click{"ann", 1})
	in.Push(0, Click{"bob", 2}, Click{"cid", 3})
	fmt.Println(out.Rows())
	// Output: [{ann 1} {bob 2} {cid 3}]
}

func ExampleNewInput() {
	in := arkflowtest.NewInput[Click](4) // four partitions
	fmt.Println(in.InputType())
	// Output: arkflowtest
}

// Within a batch the watermark advances first, so 100 is late.
func ExampleInput_Push() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 2_100}, Click{"ann", 100})
	fmt.Println(out.Rows(), h.Counter("w", "late_dropped"))
	// Output: [] 1
}

func ExampleInput_AdvanceWatermark() {
	in, out := arkflowtest.NewInput[Click](2), arkflowtest.NewOutput[Count]()
	arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 100}, Click{"ann", 3_000})
	in.AdvanceWatermark(1_500, 1) // partition 1 only: min(3000, 1500)
	fmt.Println(out.Rows())
	// Output: [ann@0s:1]
}

func ExampleInput_InputType() {
	var src arkflow.SourceComponent = arkflowtest.NewInput[Click](1)
	fmt.Println(src.InputType())
	// Output: arkflowtest
}

func ExampleOutput() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 100}, Click{"bob", 200})
	in.Push(0, Click{"ann", 1_000})
	for _, c := range out.Rows() {
		fmt.Println(c.User, c.Start.UTC().Format(time.TimeOnly), c.N)
	}
	// Output:
	// ann 00:00:00 1
	// bob 00:00:00 1
}

func ExampleNewOutput() {
	// Only the columns it needs: the key and the aggregate.
	type perUser struct {
		User string `arkflow:"user"`
		N    int64  `arkflow:"n"`
	}
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[perUser]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", out))
	in.Push(0, Click{"ann", 100}, Click{"ann", 200})
	h.AdvanceWatermark(1_000)
	fmt.Println(out.Rows())
	// Output: [{ann 2}]
}

func ExampleOutput_Rows() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		Where("no-bots", "user != 'bot'").
		Sink("out", out))
	in.Push(0, Click{"ann", 1}, Click{"bot", 2}, Click{"bob", 3})
	fmt.Println(out.Rows())
	// Output: [{ann 1} {bob 3}]
}

func ExampleOutput_Take() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	arkflowtest.New(t, arkflow.NewJob("clicks").Source("in", in).Sink("out", out))
	in.Push(0, Click{"ann", 1})
	fmt.Println(out.Take())
	in.Push(0, Click{"bob", 2})
	fmt.Println(out.Take(), out.Rows())
	// Output:
	// [{ann 1}]
	// [{bob 2}] [{ann 1} {bob 2}]
}

func ExampleOutput_OutputType() {
	var snk arkflow.SinkComponent = arkflowtest.NewOutput[Count]()
	fmt.Println(snk.OutputType())
	// Output: arkflowtest
}

func ExampleStartAt() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		KeyBy("user").
		Window("w", window.Tumbling(time.Hour, job.Count("n"))).
		Sink("out", out),
		arkflowtest.StartAt(time.Date(2030, 1, 1, 9, 59, 0, 0, time.UTC)))
	in.Push(0, Click{User: "ann"})
	h.AdvanceClock(time.Minute)
	fmt.Println(out.Rows()[0].Start.UTC())
	// Output: 2030-01-01 09:00:00 +0000 UTC
}

func ExampleJobOptions() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").Source("in", in).Sink("out", out),
		arkflowtest.JobOptions(arkflow.WithChannelCapacity(1)))
	in.Push(0, Click{"ann", 1})
	fmt.Println(out.Rows(), h.Job().Status())
	// Output: [{ann 1}] running
}

func ExampleOption() {
	opts := []arkflowtest.Option{
		arkflowtest.StartAt(time.UnixMilli(5_000)),
		arkflowtest.JobOptions(arkflow.WithChannelCapacity(4)),
	}
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", arkflowtest.NewInput[Click](1)).
		Sink("out", arkflowtest.NewOutput[Click]()), opts...)
	fmt.Println(h.Now().UnixMilli())
	// Output: 5000
}

func ExampleSnapshot() {
	in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Click]()
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", in).
		KeyBy("user").
		Process("seen", arkflow.ProcessFunc(countSeen)).
		Sink("out", out))
	in.Push(0, Click{"ann", 1})
	snap := h.Snapshot()
	in2 := arkflowtest.NewInput[Click](1)
	h2 := arkflowtest.Restore(t, arkflow.NewJob("clicks").
		Source("in", in2).
		KeyBy("user").
		Process("seen", arkflow.ProcessFunc(countSeen)).
		Sink("out", arkflowtest.NewOutput[Click]()), snap)
	in2.Push(0, Click{"ann", 2})
	fmt.Println(arkflowtest.Value(h2, "seen", "ann", seen))
	// Output: 2 true
}

func ExampleSnapshot_Name() {
	h := arkflowtest.New(t, arkflow.NewJob("clicks").
		Source("in", arkflowtest.NewInput[Click](1)).
		Sink("out", arkflowtest.NewOutput[Click]()))
	snap := h.Snapshot()
	// A job outside the harness starts from it with
	// arkflow.WithSavepoint(snap.Name()) and the same checkpoint store.
	fmt.Println(snap.Name() != "")
	// Output: true
}
