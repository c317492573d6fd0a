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
}

func init() {
	for _, t := range []any{nexmark.Bid{}, AuctionPrice{}, HotItem{}, beamCount{}} {
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
}

// beamRuns holds what the pipelines running in this process read and
// write, by run ID: the events and the digest.
var beamRuns = struct {
	mu      sync.Mutex
	next    int64
	events  map[int64]*nexmark.Events
	digests map[int64]*Digest
}{events: map[int64]*nexmark.Events{}, digests: map[int64]*Digest{}}

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
	beamInit()
	beamRuns.mu.Lock()
	beamRuns.next++
	run := beamRuns.next
	beamRuns.events[run], beamRuns.digests[run] = ev, &Digest{}
	beamRuns.mu.Unlock()
	defer func() {
		beamRuns.mu.Lock()
		delete(beamRuns.events, run)
		delete(beamRuns.digests, run)
		beamRuns.mu.Unlock()
	}()
	p, s := beam.NewPipelineWithRoot()
	build(s, beam.ParDo(s, &beamSource{Run: run}, beam.Impulse(s)), run)
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
	beamRuns.mu.Lock()
	ev := beamRuns.events[f.Run]
	beamRuns.mu.Unlock()
	for _, b := range ev.Bids {
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
