//go:build beam

package queries

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// The Beam side: each query as an Apache Beam pipeline (Go SDK) run by
// Prism, Beam's local runner, in this process. Prism runs the DoFns here
// (loopback), so the source DoFn reads the events, and the sink DoFns add
// to the digest, through beamRuns, by the run's ID: neither is encoded
// into the pipeline.

// beamSides are the queries' Beam sides, by name.
var beamSides = map[string]func(context.Context, *nexmark.Events) (Digest, error){
	"q0": Q0Beam, "q1": Q1Beam, "q2": Q2Beam, "q5": Q5Beam,
	"window1k": beamWindowOf(1_000), "window100k": beamWindowOf(100_000),
}

// beamWindowOf is the window query's Beam side over keys keys, on the
// clicks of a run's size.
func beamWindowOf(keys int) func(context.Context, *nexmark.Events) (Digest, error) {
	return func(ctx context.Context, ev *nexmark.Events) (Digest, error) {
		return WindowBeam(ctx, clicksFor(ev, keys))
	}
}

func init() {
	for _, t := range []any{nexmark.Bid{}, AuctionPrice{}, HotItem{}, beamCount{}, beamClick{}, beamAcc{}, beamTotal{}} {
		beam.RegisterType(reflect.TypeOf(t))
	}
	register.DoFn2x0[[]byte, func(beam.EventTime, nexmark.Bid)](&beamSource{})
	register.Emitter2[beam.EventTime, nexmark.Bid]()
	register.Function1x1[nexmark.Bid, nexmark.Bid](beamToEuro)
	register.Function2x0[nexmark.Bid, func(AuctionPrice)](beamQ2Select)
	register.Emitter1[AuctionPrice]()
	register.Function1x1[nexmark.Bid, int64](beamAuction)
	register.Function4x0[beam.Window, int64, int, func(int64, beamCount)](beamByWindow)
	register.Emitter2[int64, beamCount]()
	register.Function3x0[int64, func(*beamCount) bool, func(HotItem)](beamHot)
	register.Iter1[beamCount]()
	register.Emitter1[HotItem]()
	register.DoFn1x0[nexmark.Bid](&beamBidSink{})
	register.DoFn1x0[AuctionPrice](&beamPairSink{})
	register.DoFn1x0[HotItem](&beamHotSink{})
	register.DoFn2x0[[]byte, func(beam.EventTime, beamClick)](&beamClickSource{})
	register.Emitter2[beam.EventTime, beamClick]()
	register.Function1x2[beamClick, int64, int64](beamClickKey)
	register.Combiner2[beamAcc, int64](&beamCountSum{})
	register.Function4x0[beam.Window, int64, beamAcc, func(beamTotal)](beamWindowTotal)
	register.Emitter1[beamTotal]()
	register.DoFn1x0[beamTotal](&beamWindowSink{})
}

// beamRuns holds what the pipelines running in this process read and
// write, by run ID: the input (the *nexmark.Events or the []Click) and
// the digest.
var beamRuns = struct {
	mu      sync.Mutex
	next    int64
	inputs  map[int64]any
	digests map[int64]*Digest
}{inputs: map[int64]any{}, digests: map[int64]*Digest{}}

// beamInput is the input of run.
func beamInput[T any](run int64) T {
	beamRuns.mu.Lock()
	defer beamRuns.mu.Unlock()
	return beamRuns.inputs[run].(T)
}

// beamInit calls beam.Init, which the runner requires, once. beam.Init
// replaces slog's default logger with one of its own at level info, which
// the SDK and Prism log through: the default becomes one that writes
// warnings and errors to stderr, so a run's output stays the numbers.
var beamInit = sync.OnceFunc(func() {
	beam.Init()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
})

// runBeam builds a pipeline whose source emits ev's bids, each at its
// event time (date_time), adds the transforms build makes (which end in
// a sink DoFn of the run's ID), runs it on Prism and returns the digest
// the sinks made.
func runBeam(ctx context.Context, ev *nexmark.Events, build func(s beam.Scope, bids beam.PCollection, run int64)) (Digest, error) {
	return runBeamOn(ctx, ev, func(s beam.Scope, impulse beam.PCollection, run int64) {
		build(s, beam.ParDo(s, &beamSource{Run: run}, impulse), run)
	})
}

// runBeamOn runs, on Prism, the pipeline build makes from an impulse
// (its source DoFn reads input by the run's ID, its sinks add to the
// run's digest), and returns the digest the sinks made.
func runBeamOn(ctx context.Context, input any, build func(s beam.Scope, impulse beam.PCollection, run int64)) (Digest, error) {
	beamInit()
	beamRuns.mu.Lock()
	beamRuns.next++
	run := beamRuns.next
	beamRuns.inputs[run], beamRuns.digests[run] = input, &Digest{}
	beamRuns.mu.Unlock()
	defer func() {
		beamRuns.mu.Lock()
		delete(beamRuns.inputs, run)
		delete(beamRuns.digests, run)
		beamRuns.mu.Unlock()
	}()
	p, s := beam.NewPipelineWithRoot()
	build(s, beam.Impulse(s), run)
	if _, err := prism.Execute(ctx, p); err != nil {
		return Digest{}, fmt.Errorf("beam: %w", err)
	}
	beamRuns.mu.Lock()
	defer beamRuns.mu.Unlock()
	return *beamRuns.digests[run], nil
}

// beamSource emits the bids of its run, each at its event time.
type beamSource struct {
	Run int64
}

// ProcessElement emits the bids, on the impulse.
func (f *beamSource) ProcessElement(_ []byte, emit func(beam.EventTime, nexmark.Bid)) {
	for _, b := range beamInput[*nexmark.Events](f.Run).Bids {
		emit(mtime.FromMilliseconds(b.DateTime), b)
	}
}

// beamDigest is a sink's digest of the rows of one bundle, added to its
// run's when the bundle ends.
type beamDigest struct {
	Run int64
	d   Digest
}

func (s *beamDigest) add(sum uint64) {
	s.d.Rows++
	s.d.Sum += sum
}

// FinishBundle adds the bundle's digest to the run's.
func (s *beamDigest) FinishBundle() {
	beamRuns.mu.Lock()
	d := beamRuns.digests[s.Run]
	d.Rows += s.d.Rows
	d.Sum += s.d.Sum
	beamRuns.mu.Unlock()
	s.d = Digest{}
}

// beamBidSink digests bids (Q0, Q1).
type beamBidSink struct{ beamDigest }

// ProcessElement adds a bid to the digest.
func (s *beamBidSink) ProcessElement(b nexmark.Bid) { s.add(bidSum(b)) }

// beamPairSink digests Q2's rows.
type beamPairSink struct{ beamDigest }

// ProcessElement adds a row to the digest.
func (s *beamPairSink) ProcessElement(r AuctionPrice) { s.add(pairSum(r)) }

// beamHotSink digests Q5's rows.
type beamHotSink struct{ beamDigest }

// ProcessElement adds a row to the digest.
func (s *beamHotSink) ProcessElement(r HotItem) { s.add(hotSum(r)) }

// Q0Beam is Q0 on Beam: the source straight into the sink.
func Q0Beam(ctx context.Context, ev *nexmark.Events) (Digest, error) {
	return runBeam(ctx, ev, func(s beam.Scope, bids beam.PCollection, run int64) {
		beam.ParDo0(s, &beamBidSink{beamDigest{Run: run}}, bids)
	})
}

func beamToEuro(b nexmark.Bid) nexmark.Bid {
	b.Price = ToEuro(b.Price)
	return b
}

// Q1Beam is Q1 on Beam: a ParDo that converts the price.
func Q1Beam(ctx context.Context, ev *nexmark.Events) (Digest, error) {
	return runBeam(ctx, ev, func(s beam.Scope, bids beam.PCollection, run int64) {
		beam.ParDo0(s, &beamBidSink{beamDigest{Run: run}}, beam.ParDo(s, beamToEuro, bids))
	})
}

func beamQ2Select(b nexmark.Bid, emit func(AuctionPrice)) {
	if b.Auction%Q2Modulus == 0 {
		emit(AuctionPrice{Auction: b.Auction, Price: b.Price})
	}
}

// Q2Beam is Q2 on Beam: a ParDo that selects and projects.
func Q2Beam(ctx context.Context, ev *nexmark.Events) (Digest, error) {
	return runBeam(ctx, ev, func(s beam.Scope, bids beam.PCollection, run int64) {
		beam.ParDo0(s, &beamPairSink{beamDigest{Run: run}}, beam.ParDo(s, beamQ2Select, bids))
	})
}

// beamCount is Q5's count of one auction's bids in a window.
type beamCount struct {
	Auction, Num int64
}

func beamAuction(b nexmark.Bid) int64 { return b.Auction }

// beamByWindow keys a count by its window's start (Unix ms).
func beamByWindow(w beam.Window, auction int64, n int, emit func(int64, beamCount)) {
	emit(w.(window.IntervalWindow).Start.Milliseconds(), beamCount{Auction: auction, Num: int64(n)})
}

// beamHot emits the auctions at a window's highest count.
func beamHot(start int64, counts func(*beamCount) bool, emit func(HotItem)) {
	var best maxPerWindow
	var c beamCount
	for counts(&c) {
		best.add(start, c.Auction, c.Num)
	}
	for _, r := range best.rows() {
		emit(r)
	}
}

// Q5Beam is Q5 on Beam: the bids into sliding windows of event time, a
// count per auction (stats.Count), the counts grouped by their window's
// start, and a ParDo that keeps the highest (ties all kept).
func Q5Beam(ctx context.Context, ev *nexmark.Events) (Digest, error) {
	return runBeam(ctx, ev, func(s beam.Scope, bids beam.PCollection, run int64) {
		windowed := beam.WindowInto(s, window.NewSlidingWindows(Q5SlideMS*time.Millisecond, Q5SizeMS*time.Millisecond), bids)
		counts := stats.Count(s, beam.ParDo(s, beamAuction, windowed))
		perWindow := beam.GroupByKey(s, beam.ParDo(s, beamByWindow, counts))
		beam.ParDo0(s, &beamHotSink{beamDigest{Run: run}}, beam.ParDo(s, beamHot, perWindow))
	})
}

// beamClick is a click on Beam: its event time is the element's, not a
// field (Beam's coders take no time.Time).
type beamClick struct {
	Key, Amount int64
}

// beamClickSource emits the clicks of its run, each at its event time.
type beamClickSource struct {
	Run int64
}

// ProcessElement emits the clicks, on the impulse.
func (f *beamClickSource) ProcessElement(_ []byte, emit func(beam.EventTime, beamClick)) {
	for _, c := range beamInput[[]Click](f.Run) {
		emit(mtime.FromTime(c.TS), beamClick{Key: c.Key, Amount: c.Amount})
	}
}

func beamClickKey(c beamClick) (int64, int64) { return c.Key, c.Amount }

// beamAcc is a key's count and sum in a window, the combine's
// accumulator and output.
type beamAcc struct {
	N, Sum int64
}

// beamCountSum is the window query's combine: the count and sum of the
// amounts.
type beamCountSum struct{}

// CreateAccumulator starts an empty count and sum.
func (beamCountSum) CreateAccumulator() beamAcc { return beamAcc{} }

// AddInput counts an amount and adds it to the sum.
func (beamCountSum) AddInput(a beamAcc, amount int64) beamAcc {
	return beamAcc{N: a.N + 1, Sum: a.Sum + amount}
}

// MergeAccumulators adds two partial counts and sums.
func (beamCountSum) MergeAccumulators(a, b beamAcc) beamAcc {
	return beamAcc{N: a.N + b.N, Sum: a.Sum + b.Sum}
}

// beamTotal is WindowTotal on Beam, its window's start in Unix ms.
type beamTotal struct {
	Key, Start, Clicks, Total int64
}

// beamWindowTotal stamps a key's count and sum with its window's start.
func beamWindowTotal(w beam.Window, key int64, a beamAcc, emit func(beamTotal)) {
	emit(beamTotal{Key: key, Start: w.(window.IntervalWindow).Start.Milliseconds(), Clicks: a.N, Total: a.Sum})
}

// beamWindowSink digests the window query's rows.
type beamWindowSink struct{ beamDigest }

// ProcessElement adds a row to the digest.
func (s *beamWindowSink) ProcessElement(r beamTotal) {
	s.add(windowSum(WindowTotal{Key: r.Key, Start: time.UnixMilli(r.Start), Clicks: r.Clicks, Total: r.Total}))
}

// WindowBeam is the window query on Beam: the clicks into fixed windows
// of event time, keyed by their key, a combine per key and window
// (count and sum), and a ParDo that stamps each total with its window's
// start.
func WindowBeam(ctx context.Context, clicks []Click) (Digest, error) {
	return runBeamOn(ctx, clicks, func(s beam.Scope, impulse beam.PCollection, run int64) {
		src := beam.ParDo(s, &beamClickSource{Run: run}, impulse)
		keyed := beam.ParDo(s, beamClickKey, beam.WindowInto(s, window.NewFixedWindows(WindowSize), src))
		totals := beam.ParDo(s, beamWindowTotal, beam.CombinePerKey(s, &beamCountSum{}, keyed))
		beam.ParDo0(s, &beamWindowSink{beamDigest{Run: run}}, totals)
	})
}
