package windowop

// A differential test: window operators driven with random batches and
// watermarks, compared after every call with a small reference model of
// the documented semantics (package doc). The model is
// deliberately naive (linear scans, no heaps, no group reuse), so that it
// checks the bookkeeping of the real operators: heaps of ends and
// deadlines, recycled groups, merged sessions, late updates.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/job"
)

type mwin struct {
	key            string
	start, last    int64 // aligned: last unused; sessions: last event
	n, sum, lo, hi int64
	fired, emitted bool
}

type model struct {
	kind              string // tumbling, sliding, session
	size, slide, gap  int64
	lateness          int64
	policy            string
	wm                int64
	wins              []*mwin
	fired             int64
	dropped, routed   int64
	updated           int64
	nullDrop, nullRte int64
}

func (m *model) end(w *mwin) int64 {
	if m.kind == TypeSession {
		return w.last + m.gap
	}
	return w.start + m.size
}

func (m *model) row(w *mwin, update bool) string {
	return fmt.Sprintf("%s [%d,%d) n=%d sum=%d lo=%d hi=%d update=%v", w.key, w.start, m.end(w), w.n, w.sum, w.lo, w.hi, update)
}

func (m *model) watermark(wm int64) []string {
	if wm <= m.wm {
		return nil
	}
	m.wm = wm
	var out []string
	for _, w := range m.wins {
		if !w.fired && m.end(w) <= wm {
			out = append(out, m.row(w, w.emitted))
			w.fired, w.emitted = true, true
			m.fired++
		}
	}
	kept := m.wins[:0]
	for _, w := range m.wins {
		// Fired windows stay until end + lateness only when the update
		// policy can still change them.
		if w.fired && (m.policy != job.LateUpdate || m.lateness == 0 || satAdd(m.end(w), m.lateness) <= wm) {
			continue
		}
		kept = append(kept, w)
	}
	m.wins = kept
	return out
}

func (m *model) find(key string, start int64) *mwin {
	for _, w := range m.wins {
		if w.key == key && w.start == start {
			return w
		}
	}
	return nil
}

// add folds one value into a window.
func (w *mwin) add(v int64) {
	if w.n == 0 {
		w.lo, w.hi = v, v
	}
	w.n++
	w.sum += v
	w.lo, w.hi = min(w.lo, v), max(w.hi, v)
}

type mrow struct {
	key string
	ts  *int64
	v   int64
}

func (m *model) process(rows []mrow) (out, late []string) {
	update := m.policy == job.LateUpdate
	route := m.policy == job.LateRoute
	var touched []*mwin
	touch := func(w *mwin) {
		if !slices.Contains(touched, w) {
			touched = append(touched, w)
		}
	}
	for _, r := range rows {
		if r.ts == nil {
			if route {
				m.nullRte++
				late = append(late, fmt.Sprintf("%s null", r.key))
			} else {
				m.nullDrop++
			}
			continue
		}
		t := *r.ts
		if m.kind == TypeSession {
			var overlap []*mwin
			end := t + m.gap
			for _, w := range m.wins {
				if w.key == r.key && m.end(w) > t && w.start < t+m.gap {
					overlap = append(overlap, w)
					end = max(end, m.end(w))
				}
			}
			isLate := m.wm >= end
			if isLate && (!update || m.wm >= satAdd(end, m.lateness)) {
				if route {
					m.routed++
					late = append(late, fmt.Sprintf("%s %d", r.key, t))
				} else {
					m.dropped++
				}
				continue
			}
			s := &mwin{key: r.key, start: t, last: t}
			if len(overlap) == 1 {
				s = overlap[0]
			} else if len(overlap) > 1 {
				for i, o := range overlap {
					if i == 0 {
						s.lo, s.hi = o.lo, o.hi
					}
					s.start, s.last = min(s.start, o.start), max(s.last, o.last)
					s.n, s.sum = s.n+o.n, s.sum+o.sum
					s.lo, s.hi = min(s.lo, o.lo), max(s.hi, o.hi)
					s.emitted = s.emitted || o.emitted
				}
				m.wins = slices.DeleteFunc(m.wins, func(w *mwin) bool { return slices.Contains(overlap, w) })
				touched = slices.DeleteFunc(touched, func(w *mwin) bool { return slices.Contains(overlap, w) })
			}
			if len(overlap) != 1 {
				m.wins = append(m.wins, s)
			}
			s.start, s.last = min(s.start, t), max(s.last, t)
			s.add(r.v)
			if isLate {
				m.updated++
				s.fired = true
				touch(s)
			} else {
				s.fired = false
			}
			continue
		}
		var starts []int64
		if m.kind == TypeTumbling {
			starts = []int64{eventtime.TumblingStart(t, m.size)}
		} else {
			starts = eventtime.SlidingStarts(nil, t, m.size, m.slide)
		}
		accepted, isLate, updated := false, false, false
		for _, s := range starts {
			end := s + m.size
			w := m.find(r.key, s)
			if m.wm >= end {
				isLate = true
				if !update || m.wm >= satAdd(end, m.lateness) {
					continue
				}
				if w == nil {
					w = &mwin{key: r.key, start: s, fired: true}
					m.wins = append(m.wins, w)
				}
				touch(w)
				updated = true
			} else if w == nil {
				w = &mwin{key: r.key, start: s}
				m.wins = append(m.wins, w)
			}
			w.add(r.v)
			accepted = true
		}
		switch {
		case updated:
			m.updated++
		case isLate && !accepted:
			if route {
				m.routed++
				late = append(late, fmt.Sprintf("%s %d", r.key, t))
			} else {
				m.dropped++
			}
		}
	}
	for _, w := range touched {
		// A session a late row touched and a later row of the batch
		// extended past the watermark fires later, at its new end.
		if !w.fired {
			continue
		}
		out = append(out, m.row(w, w.emitted))
		w.emitted = true
	}
	return out, late
}

func (m *model) gauges() map[string]int64 {
	return map[string]int64{
		MetricOpenWindows: int64(len(m.wins)), MetricWindowsFired: m.fired,
		MetricLateDropped: m.dropped, MetricLateRouted: m.routed, MetricLateUpdated: m.updated,
		MetricNullDropped: m.nullDrop, MetricNullRouted: m.nullRte,
		MetricReplayedSkipped: 0, // the model never restarts: nothing is a replay
	}
}

// render turns what the operator emitted into model rows; it releases the
// batches and their acknowledgements.
func render(t *testing.T, c *collector) (out, late []string) {
	t.Helper()
	for _, b := range c.got {
		rec := b.Rec
		if b.Port == ops.PortLate {
			k := rec.Column(0).(*array.String)
			ts := rec.Column(1).(*array.Int64)
			for i := 0; i < int(rec.NumRows()); i++ {
				if ts.IsNull(i) {
					late = append(late, fmt.Sprintf("%s null", k.Value(i)))
				} else {
					late = append(late, fmt.Sprintf("%s %d", k.Value(i), ts.Value(i)))
				}
			}
		} else {
			k := rec.Column(0).(*array.String)
			st := rec.Column(1).(*array.Timestamp)
			en := rec.Column(2).(*array.Timestamp)
			n := rec.Column(3).(*array.Int64)
			sum := rec.Column(4).(*array.Int64)
			lo := rec.Column(5).(*array.Int64)
			hi := rec.Column(6).(*array.Int64)
			upd := rec.Column(7).(*array.Boolean)
			for i := 0; i < int(rec.NumRows()); i++ {
				out = append(out, fmt.Sprintf("%s [%d,%d) n=%d sum=%d lo=%d hi=%d update=%v", k.Value(i), st.Value(i), en.Value(i), n.Value(i), sum.Value(i), lo.Value(i), hi.Value(i), upd.Value(i)))
			}
		}
		rec.Release()
		b.Ack.Release(nil)
	}
	c.got = nil
	return out, late
}

func sameRows(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

func TestOperatorsAgainstModel(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(2024, 6))
	keys := []string{"a", "b", "c"}
	aggs := []job.Aggregate{job.Count("n"), job.Sum("v", "total"), job.Min("v", "lo"), job.Max("v", "hi")}
	for run := 0; run < 600; run++ {
		var d Definition
		m := &model{wm: eventtime.NoWatermark}
		switch run % 3 {
		case 0:
			m.kind, m.size = TypeTumbling, 1+r.Int64N(20)
			d = Tumbling(msDur(m.size), aggs...)
		case 1:
			m.kind, m.size = TypeSliding, 1+r.Int64N(20)
			m.slide = 1 + r.Int64N(m.size)
			d = Sliding(msDur(m.size), msDur(m.slide), aggs...)
		default:
			m.kind, m.gap = TypeSession, 1+r.Int64N(10)
			d = Session(msDur(m.gap), aggs...)
		}
		m.policy = []string{job.LateDrop, job.LateRoute, job.LateUpdate}[r.IntN(3)]
		if r.IntN(3) > 0 {
			m.lateness = r.Int64N(30)
		}
		name := fmt.Sprintf("run %d: %s size=%d slide=%d gap=%d policy=%s lateness=%d", run, m.kind, m.size, m.slide, m.gap, m.policy, m.lateness)
		inst := newInstance(t, d, m.policy, m.lateness)
		var c collector
		var log []string
		fail := func(format string, args ...any) {
			t.Helper()
			inst.Close()
			t.Fatalf("%s\n%s\nafter:\n%s", name, fmt.Sprintf(format, args...), strings.Join(log, "\n"))
		}
		check := func(op string, wantOut, wantLate []string) {
			t.Helper()
			gotOut, gotLate := render(t, &c)
			if !sameRows(gotOut, wantOut) || !sameRows(gotLate, wantLate) {
				fail("%s:\noperator out %q late %q\nmodel    out %q late %q", op, gotOut, gotLate, wantOut, wantLate)
			}
			g := maps.Clone(inst.(ops.Gauger).Counters()) // the model keeps both in one map
			maps.Copy(g, inst.(ops.Gauger).Gauges())
			if mg := m.gauges(); !mapsEqual(g, mg) {
				fail("%s: gauges %v, model %v", op, g, mg)
			}
		}
		var maxTS int64
		for step := 0; step < 40; step++ {
			if r.IntN(3) == 0 {
				wm := maxTS - r.Int64N(25)
				if err := inst.Watermark(context.Background(), wm, &c); err != nil {
					fail("watermark %d: %v", wm, err)
				}
				log = append(log, fmt.Sprintf("watermark %d", wm))
				wantOut := m.watermark(wm)
				check(fmt.Sprintf("watermark %d", wm), wantOut, nil)
			}
			var rows []row
			var mrows []mrow
			for range 1 + r.IntN(6) {
				k := keys[r.IntN(len(keys))]
				v := r.Int64N(200) - 100
				if r.IntN(12) == 0 {
					rows = append(rows, row{k: k, v: v})
					mrows = append(mrows, mrow{key: k, v: v})
					continue
				}
				ts := maxTS + r.Int64N(15) - 10
				if r.IntN(8) == 0 {
					ts -= r.Int64N(60)
				}
				maxTS = max(maxTS, ts)
				rows = append(rows, row{k: k, ts: at(ts), v: v})
				mrows = append(mrows, mrow{key: k, ts: at(ts), v: v})
			}
			tr := newTracked()
			if err := inst.Process(context.Background(), ops.Batch{Rec: record(rows...), Ack: tr.node}, &c); err != nil {
				fail("process: %v", err)
			}
			log = append(log, "process "+describeRows(mrows))
			wantOut, wantLate := m.process(mrows)
			check("process "+describeRows(mrows), wantOut, wantLate)
		}
		if err := inst.Watermark(context.Background(), eventtime.EndOfTime, &c); err != nil {
			fail("end: %v", err)
		}
		log = append(log, "watermark end")
		check("watermark end", m.watermark(eventtime.EndOfTime), nil)
		if g := inst.(ops.Gauger).Gauges(); g[MetricOpenWindows] != 0 {
			fail("open windows at the end: %v", g)
		}
		inst.Close()
	}
}

func describeRows(rs []mrow) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		if r.ts == nil {
			parts[i] = fmt.Sprintf("%s:null:%d", r.key, r.v)
		} else {
			parts[i] = fmt.Sprintf("%s:%d:%d", r.key, *r.ts, r.v)
		}
	}
	return strings.Join(parts, " ")
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func msDur(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
