package main

// `arkflow run` on a terminal shows how the job is doing: a live
// line per source, and a bar while a restore runs. The drawing is
// github.com/vbauerster/mpb/v8's (several lines redrawn in place, log lines
// printed above them); this file only reads the job's numbers and words
// them.
//
//	restoring checkpoint ckpt-…  [=====>      ]  1.2 MiB of 3.4 MiB, 52,000 keys, 1 of 2 snapshots
//	in-0  [=======>   ]  700,000 of 1,000,000 rows  412,003 rows/s  wm 2026-01-02T03:04:05.000Z  late 3
//
// A source's line is one per source task, or one per source operator
// ("in ×8", its tasks summed) when the job has more than
// progressMaxTaskLines source tasks. It says the rows the source read, its
// rate over the last progressRateWindow, its position of its end when the
// connector knows them (connectors.ProgressReporter: a bounded generate in
// rows, a file in bytes), the lowest input watermark of its tasks ("end"
// once its bounded input ended) and the late rows of the window operators
// downstream of it. The lines stay when the job ends, with the whole run's
// average rate; the restore bar goes when the restore ends, and a line
// saying what was restored takes its place above the others.
//
// It draws on stderr only, and only when stderr is a terminal, --quiet is
// not given, and the job has no stdout sink writing to a terminal (most
// likely the same one); the job's output on stdout is never touched. While it
// draws, the CLI's log lines go through it, so they are printed above the
// lines rather than through them.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/arkflow-rs/arkflow-go"
	stdoutsink "github.com/arkflow-rs/arkflow-go/connectors/stdout"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

const (
	// progressEvery is how often the job's numbers are read (cheap:
	// atomic counters, no state walk).
	progressEvery = 250 * time.Millisecond
	// progressStartingEvery is how often they are read while the job
	// starts (and restores).
	progressStartingEvery = 40 * time.Millisecond
	// progressRateWindow is how far back a line's rows/s looks.
	progressRateWindow = 5 * time.Second
	// progressMaxTaskLines is how many source tasks get a line each; with
	// more, each source operator gets one.
	progressMaxTaskLines = 8
	// progressBarWidth is the width of a bar, brackets included.
	progressBarWidth = 24
)

// progress is the live view of one `arkflow run`. Off, it does nothing,
// and the logs go straight to stderr.
type progress struct {
	stderr io.Writer
	on     bool
	logs   *progressLogs

	p     *mpb.Progress
	stopc chan struct{}
	done  chan struct{}
}

// newProgress returns run's progress view: on when stderr is a terminal
// and quiet is false.
func newProgress(stderr io.Writer, quiet bool) *progress {
	return &progress{stderr: stderr, logs: &progressLogs{w: stderr, stderr: stderr}, on: !quiet && isTerminal(stderr)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// stdoutSinkOnTerminal reports whether the job writes rows to stdout and
// stdout is a terminal, most likely the one stderr is on: the rows would
// land in the middle of the lines being redrawn, so there is no progress
// then (redirect stdout, or stderr, to have it).
func stdoutSinkOnTerminal(spec *job.Spec, stdout io.Writer) bool {
	for _, s := range spec.Sinks {
		if s.OutputType == stdoutsink.Type {
			return isTerminal(stdout)
		}
	}
	return false
}

// logWriter is where the CLI's logger writes: stderr, through the view
// while it draws.
func (pg *progress) logWriter() io.Writer { return pg.logs }

// start starts drawing j's progress until stop; nothing when off.
func (pg *progress) start(j *arkflow.Job) {
	if !pg.on {
		return
	}
	pg.p = mpb.New(mpb.WithConsoleWriter(sizedConsole{cupwriter.New(pg.stderr, false)}), mpb.WithRefreshRate(progressStartingEvery*2))
	pg.logs.set(pg.p)
	pg.stopc, pg.done = make(chan struct{}), make(chan struct{})
	v := newProgressView(j, pg.p)
	go func() {
		defer close(pg.done)
		for {
			v.update(time.Now())
			// Faster while the job starts: a restore can be over in a
			// fraction of a second.
			every := progressEvery
			if j.Status() < arkflow.Running {
				every = progressStartingEvery
			}
			select {
			case <-pg.stopc:
				v.update(time.Now())
				v.finish()
				return
			case <-time.After(every):
			}
		}
	}()
}

// stop draws the final lines, which stay, and hands stderr back to the
// logs.
func (pg *progress) stop() {
	if pg.p == nil {
		return
	}
	close(pg.stopc)
	<-pg.done
	pg.p.Wait()
	pg.logs.set(pg.stderr)
	pg.p = nil
}

// sizedConsole is mpb's own console writer, except that a terminal that
// reports no size (a pseudo-terminal nobody sized, such as script(1)'s)
// counts as 80×24: mpb draws only as many lines as the terminal has rows.
type sizedConsole struct{ *cupwriter.Writer }

func (c sizedConsole) GetTermSize() (width, height int, err error) {
	width, height, err = c.Writer.GetTermSize()
	if err == nil {
		width, height = cmp.Or(width, 80), cmp.Or(height, 24)
	}
	return width, height, err
}

// progressLogs is the logger's writer: the view while it draws (mpb prints
// each write above the lines), stderr otherwise. A write that meets the
// view already shut down goes to stderr.
type progressLogs struct {
	mu     sync.Mutex
	w      io.Writer
	stderr io.Writer
}

func (l *progressLogs) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *progressLogs) Write(b []byte) (int, error) {
	l.mu.Lock()
	w := l.w
	l.mu.Unlock()
	n, err := w.Write(b)
	if err != nil && w != l.stderr {
		var done mpb.ErrDone[*mpb.Progress]
		if errors.As(err, &done) {
			return l.stderr.Write(b)
		}
	}
	return n, err
}

// progressView turns the job's numbers into the lines. Only its goroutine
// calls update and finish; the decorators read the lines' text under mu.
type progressView struct {
	j     *arkflow.Job
	rt    *runtime.Runtime
	p     *mpb.Progress
	start time.Time

	sources []*sourceLine
	// downstream lists, by source operator, the operators its rows reach.
	downstream map[string]map[string]bool

	restore     *mpb.Bar
	restoreText string
	restoreFrac float64
	restoreSeen bool // a restore was reported (its summary printed)

	mu sync.Mutex
}

// sourceLine is one source task's line, or one source operator's.
type sourceLine struct {
	name  string
	op    string
	tasks map[string]bool

	bar     *mpb.Bar
	samples []rateSample
	text    string  // what follows the bar
	frac    float64 // position of end, -1 when no end is known
}

type rateSample struct {
	at   time.Time
	rows int64
}

func newProgressView(j *arkflow.Job, p *mpb.Progress) *progressView {
	plan := j.Plan()
	v := &progressView{j: j, rt: harness.RuntimeOf(j), p: p, start: time.Now(), downstream: downstreamOps(plan.Spec)}
	var srcTasks []job.Task
	for _, t := range plan.Tasks {
		if op, _ := plan.Spec.Operator(t.OperatorID); op != nil && op.Kind == job.KindSource {
			srcTasks = append(srcTasks, t)
		}
	}
	perOp := len(srcTasks) > progressMaxTaskLines
	byOp := map[string]*sourceLine{}
	for _, t := range srcTasks {
		if perOp {
			l := byOp[t.OperatorID]
			if l == nil {
				l = &sourceLine{op: t.OperatorID, tasks: map[string]bool{}}
				byOp[t.OperatorID] = l
				v.sources = append(v.sources, l)
			}
			l.tasks[t.ID] = true
			l.name = fmt.Sprintf("%s ×%d", t.OperatorID, len(l.tasks))
			continue
		}
		v.sources = append(v.sources, &sourceLine{name: t.ID, op: t.OperatorID, tasks: map[string]bool{t.ID: true}})
	}
	width := 0
	for _, l := range v.sources {
		width = max(width, len(l.name))
	}
	for _, l := range v.sources {
		l.frac = -1
		l.bar, _ = p.Add(0, v.filler(func() float64 { return l.frac }),
			mpb.BarWidth(progressBarWidth),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return fmt.Sprintf("%-*s", width, l.name) })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
				v.mu.Lock()
				defer v.mu.Unlock()
				return l.text
			})))
	}
	return v
}

// filler draws a bar of frac (0..1), or nothing when frac is negative: the
// view sets the numbers, not mpb's counters, so a line whose source has no
// known end has no bar, and a line completed by the end of the job shows
// where its source was, not 100 %.
func (v *progressView) filler(frac func() float64) mpb.BarFiller {
	bar := mpb.BarStyle().Build()
	return mpb.BarFillerFunc(func(w io.Writer, st decor.Statistics) error {
		v.mu.Lock()
		f := frac()
		v.mu.Unlock()
		if st.AvailableWidth < 3 {
			// A terminal too narrow for the bar still separates the name
			// from the numbers.
			_, err := io.WriteString(w, " ")
			return err
		}
		if f < 0 {
			_, err := io.WriteString(w, strings.Repeat(" ", min(progressBarWidth, max(st.AvailableWidth, 0))))
			return err
		}
		const scale = 10000
		st.Total, st.Current = scale, int64(math.Round(min(f, 1)*scale))
		st.Completed = st.Current >= st.Total
		return bar.Fill(w, st)
	})
}

// update reads the job's numbers as of now and rewrites the lines.
func (v *progressView) update(now time.Time) {
	v.updateRestore(now)
	tasks := map[string]runtime.TaskMetrics{}
	for _, t := range v.rt.Metrics() {
		tasks[t.Task] = t
	}
	for _, l := range v.sources {
		text, frac := v.sourceText(l, tasks, now, false)
		v.mu.Lock()
		l.text, l.frac = text, frac
		v.mu.Unlock()
	}
}

// finish writes the final lines (the whole run's rate) and completes
// them, so that mpb draws them once more and leaves them.
func (v *progressView) finish() {
	tasks := map[string]runtime.TaskMetrics{}
	for _, t := range v.rt.Metrics() {
		tasks[t.Task] = t
	}
	now := time.Now()
	for _, l := range v.sources {
		text, frac := v.sourceText(l, tasks, now, true)
		v.mu.Lock()
		l.text, l.frac = text, frac
		v.mu.Unlock()
		if l.bar != nil {
			l.bar.SetTotal(-1, true)
		}
	}
	if v.restore != nil {
		v.restore.Abort(false) // the job ended while restoring: leave where it got
	}
}

// sourceText is a source line's text after its bar, and its position of
// its end (-1 when not known). final words it for the end of the run.
func (v *progressView) sourceText(l *sourceLine, tasks map[string]runtime.TaskMetrics, now time.Time, final bool) (string, float64) {
	var rows, late int64
	var pos, end map[string]int64 // by unit
	wm, wmSeen, lateSeen := int64(math.MaxInt64), false, false
	allHaveEnd := true
	for id := range l.tasks {
		t, ok := tasks[id]
		if !ok {
			allHaveEnd = false
			continue
		}
		rows += t.RowsIn
		if t.Watermark != math.MinInt64 {
			wm, wmSeen = min(wm, t.Watermark), true
		}
		hasEnd := false
		for name, g := range t.Gauges {
			if unit, ok := strings.CutPrefix(name, runtime.GaugeSourcePosition); ok {
				if pos == nil {
					pos = map[string]int64{}
				}
				pos[unit] += g
			}
			if unit, ok := strings.CutPrefix(name, runtime.GaugeSourceEnd); ok {
				if end == nil {
					end = map[string]int64{}
				}
				end[unit] += g
				hasEnd = true
			}
		}
		allHaveEnd = allHaveEnd && hasEnd
	}
	for _, t := range tasks {
		if !v.downstream[l.op][t.Operator] {
			continue
		}
		for _, name := range []string{windowop.MetricLateDropped, windowop.MetricLateRouted, windowop.MetricLateUpdated} {
			if n, ok := t.Counters[name]; ok {
				late += n
				lateSeen = true
			}
		}
	}

	var b strings.Builder
	frac := -1.0
	// The position, in one unit (tasks of one operator share their
	// connector's); the rows read too when that unit is not rows.
	unit, p := "", int64(0)
	for u, n := range pos {
		unit, p = u, n
	}
	switch e := end[unit]; {
	case len(pos) != 1:
		fmt.Fprintf(&b, "%s rows  ", humanize.Comma(rows))
	case allHaveEnd && e > 0:
		fmt.Fprintf(&b, "%s of %s  ", strings.TrimSuffix(amount(p, unit), " "+unit), amount(e, unit))
		frac = float64(p) / float64(e)
	default:
		fmt.Fprintf(&b, "%s  ", amount(p, unit))
	}
	if len(pos) == 1 && unit != "rows" {
		fmt.Fprintf(&b, "%s rows  ", humanize.Comma(rows))
	}
	l.samples = append(l.samples, rateSample{now, rows})
	for len(l.samples) > 2 && now.Sub(l.samples[1].at) >= progressRateWindow {
		l.samples = l.samples[1:]
	}
	switch first := l.samples[0]; {
	case final:
		if d := now.Sub(v.start).Seconds(); d > 0 {
			fmt.Fprintf(&b, "avg %s rows/s", humanize.Comma(int64(float64(rows)/d)))
		}
	case now.Sub(first.at) > 0 && len(l.samples) > 1:
		fmt.Fprintf(&b, "%s rows/s", humanize.Comma(int64(float64(rows-first.rows)/now.Sub(first.at).Seconds())))
	default:
		b.WriteString("- rows/s")
	}
	switch {
	case !wmSeen:
	case wm == math.MaxInt64:
		b.WriteString("  wm end")
	default:
		fmt.Fprintf(&b, "  wm %s", time.UnixMilli(wm).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if lateSeen {
		fmt.Fprintf(&b, "  late %s", humanize.Comma(late))
	}
	return b.String(), frac
}

// updateRestore shows the restore the run starts with: a bar while it
// runs, then a line saying what it restored.
//
// The runtime names the checkpoint it restored (Restored) only once it
// is sure of it, after the state is in; while the state comes in, the
// recovery's totals are what say a restore runs. (metrics.go's readiness
// reason for a restore, which waits for Restored, is never given while
// the state comes in: the same timing.)
func (v *progressView) updateRestore(now time.Time) {
	if v.restoreSeen || v.j.Plan().Spec.Checkpoint == nil {
		return
	}
	// Not c.Enabled: the runtime sets it once the restore is over.
	c := checkpoints(v.j)
	r := c.Recovery
	text := fmt.Sprintf("%s of %s, %s keys, %d of %d snapshots",
		humanize.IBytes(uint64(r.BytesRestored)), humanize.IBytes(uint64(r.BytesTotal)), humanize.Comma(r.KeysRestored), r.SnapshotsRestored, r.SnapshotsTotal)
	switch {
	case r.Done && c.Restored != "":
		v.restoreSeen = true
		if v.restore != nil {
			v.restore.Abort(true)
			v.restore = nil
		}
		fmt.Fprintf(v.p, "restored %s: %s\n", c.Restored, text)
		return
	case r.Done || r.SnapshotsTotal == 0:
		return // none, or not yet the state's turn
	}
	frac := 0.0
	if r.BytesTotal > 0 {
		frac = float64(r.BytesRestored) / float64(r.BytesTotal)
	}
	v.mu.Lock()
	v.restoreText, v.restoreFrac = text, frac
	v.mu.Unlock()
	if v.restore == nil {
		label := "restoring state"
		v.restore, _ = v.p.Add(0, v.filler(func() float64 { return v.restoreFrac }),
			mpb.BarWidth(progressBarWidth), mpb.BarPriority(-1),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return label })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
				v.mu.Lock()
				defer v.mu.Unlock()
				return v.restoreText
			})))
	}
}

// amount words n of unit: rows with thousands separators, bytes in IEC
// units.
func amount(n int64, unit string) string {
	if unit == "bytes" {
		return humanize.IBytes(uint64(max(n, 0)))
	}
	return humanize.Comma(n) + " " + unit
}

// downstreamOps maps each operator to the operators its rows reach
// through the spec's edges.
func downstreamOps(spec *job.Spec) map[string]map[string]bool {
	next := map[string][]string{}
	for _, e := range spec.Edges {
		next[e.From] = append(next[e.From], e.To)
	}
	out := map[string]map[string]bool{}
	for _, op := range spec.Operators {
		seen := map[string]bool{}
		stack := []string{op.ID}
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, n := range next[cur] {
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
		}
		out[op.ID] = seen
	}
	return out
}
