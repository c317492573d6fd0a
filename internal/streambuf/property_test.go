package streambuf

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The property tests drive buffers with random writes (random inputs,
// rows and times), ticking at every deadline before the next write and
// sometimes in between, then flushing a millisecond after the last
// write, releasing emissions in random order; then they
// compare what came out with a model of each buffer computed from the
// writes alone, and check the acknowledgements: each entry's completes
// once, only after every emission holding its rows was released, and no
// emission holds the rows of an entry already completed.

// write is one random write: entry i's rows are the values i*10+j.
type write struct {
	at    time.Duration
	input string
	rows  int
}

// out is one emission as the property tests see it.
type out struct {
	at      time.Duration
	by      string // write, tick or flush
	n       int    // the harness's emission number
	values  []int64
	entries []int // the entries whose rows it holds, each once
}

// run is one random run of a buffer.
type run struct {
	h        *harness
	writes   []write
	outs     []out
	released map[int]bool
	// in[i] is the emissions holding entry i's rows.
	in     map[int][]int
	rng    *rand.Rand
	checks int
}

func randomWrites(rng *rand.Rand, n int, step time.Duration, inputs []string, minRows int) []write {
	ws := make([]write, n)
	var at time.Duration
	for i := range ws {
		switch rng.IntN(4) {
		case 0: // at once
		case 1:
			at += time.Duration(rng.Int64N(int64(step)))
		case 2:
			at += step * time.Duration(rng.IntN(4)) // on a period's edge
		default:
			at += time.Duration(rng.Int64N(int64(3 * step)))
		}
		ws[i] = write{at: at, input: inputs[rng.IntN(len(inputs))], rows: minRows + rng.IntN(4)}
	}
	return ws
}

// drive runs the writes through a new buffer of typ and config.
func drive(t *testing.T, seed uint64, typ, config string, ws []write) *run {
	r := &run{h: newHarness(t), writes: ws, released: map[int]bool{}, in: map[int][]int{}, rng: rand.New(rand.NewPCG(seed, 7))}
	if err := r.h.open(typ, config, Options{}); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		r.tickUntil(w.at)
		vals := make([]int64, w.rows)
		for j := range vals {
			vals[j] = int64(i*10 + j)
		}
		es, err := r.h.buf.Write(epoch.Add(w.at), r.h.entry(w.input, ints(r.h.mem, "v", vals)))
		r.record(w.at, "write", es, err)
		r.releaseSome()
	}
	end := ws[len(ws)-1].at + time.Millisecond
	r.tickUntil(end)
	es, err := r.h.buf.Flush(epoch.Add(end))
	r.record(end, "flush", es, err)
	for len(r.h.pending) > 0 {
		r.releaseSome()
	}
	r.h.finish()
	for i, d := range r.h.done {
		if len(d) == 1 && d[0] != nil {
			t.Errorf("entry %d failed: %v", i, d[0])
		}
	}
	return r
}

// tickUntil ticks at every deadline up to at, and sometimes at a time
// between deadlines, where nothing is due.
func (r *run) tickUntil(at time.Duration) {
	for {
		d, ok := r.h.buf.Deadline()
		if r.rng.IntN(3) == 0 {
			early := at
			if ok && d.Sub(epoch) <= at {
				early = d.Sub(epoch) - 1
			}
			if es, err := r.h.buf.Tick(epoch.Add(early)); len(es) > 0 || err != nil {
				r.h.t.Fatalf("a tick at %v before the deadline %v emitted %d (%v)", early, d.Sub(epoch), len(es), err)
			}
		}
		if !ok || d.Sub(epoch) > at {
			return
		}
		es, err := r.h.buf.Tick(d)
		r.record(d.Sub(epoch), "tick", es, err)
		r.releaseSome()
		if d2, ok := r.h.buf.Deadline(); ok && !d2.After(d) {
			r.h.t.Fatalf("the deadline %v is still due after its tick", d.Sub(epoch))
		}
	}
}

// record keeps the emissions of one call and checks the entries they
// hold are not completed yet.
func (r *run) record(at time.Duration, by string, es []Emission, err error) {
	t := r.h.t
	if err != nil {
		t.Fatalf("%s at %v: %v", by, at, err)
	}
	for _, e := range r.h.keep(es) {
		o := out{at: at, by: by, n: e.n, values: slices.Clone(int64s(t, e.Rec))}
		for _, v := range o.values {
			if i := int(v / 10); !slices.Contains(o.entries, i) {
				o.entries = append(o.entries, i)
			}
		}
		for _, i := range o.entries {
			if len(r.h.done[i]) > 0 {
				t.Fatalf("emission %d holds the rows of entry %d, completed before", e.n, i)
			}
			r.in[i] = append(r.in[i], e.n)
		}
		r.outs = append(r.outs, o)
	}
	r.checkAcks()
}

// releaseSome releases a random part of the emissions held.
func (r *run) releaseSome() {
	r.h.release(func(e held) bool {
		if r.rng.IntN(2) == 0 {
			r.released[e.n] = true
			return true
		}
		return false
	}, nil)
	r.checkAcks()
}

// checkAcks checks that every entry completed since the last check had
// all its emissions released.
func (r *run) checkAcks() {
	for _, i := range r.h.order[r.checks:] {
		for _, n := range r.in[i] {
			if !r.released[n] {
				r.h.t.Fatalf("entry %d completed before emission %d, which holds its rows, was released", i, n)
			}
		}
	}
	r.checks = len(r.h.order)
}

// values are the values of entries es, in order.
func (r *run) values(es []int) []int64 {
	var vs []int64
	for _, i := range es {
		for j := range r.writes[i].rows {
			vs = append(vs, int64(i*10+j))
		}
	}
	return vs
}

// byFirstInput orders entries es by input, the inputs in the order of
// their first entry, keeping the order within an input.
func (r *run) byFirstInput(es []int) []int {
	var inputs []string
	for _, i := range es {
		if !slices.Contains(inputs, r.writes[i].input) {
			inputs = append(inputs, r.writes[i].input)
		}
	}
	var sorted []int
	for _, in := range inputs {
		for _, i := range es {
			if r.writes[i].input == in {
				sorted = append(sorted, i)
			}
		}
	}
	return sorted
}

// expect is an emission a model predicts: its time, its cause (""
// for any) and its entries in order.
type expect struct {
	at      time.Duration
	by      string
	entries []int
}

// compare checks the emissions against the model's, ignoring emissions
// of no rows and entries with none (whose rows cannot be seen).
func (r *run) compare(seed uint64, want []expect) {
	t := r.h.t
	var got []out
	for _, o := range r.outs {
		if len(o.values) > 0 {
			got = append(got, o)
		}
	}
	var ws []expect
	for _, w := range want {
		if len(r.values(w.entries)) > 0 {
			ws = append(ws, w)
		}
	}
	if len(got) != len(ws) {
		t.Fatalf("seed %d: %d emissions, the model has %d\ngot  %v\nwant %v", seed, len(got), len(ws), got, ws)
	}
	for k, w := range ws {
		g := got[k]
		if wv := r.values(w.entries); !slices.Equal(g.values, wv) || g.at != w.at || (w.by != "" && g.by != w.by) {
			t.Fatalf("seed %d: emission %d: %s at %v %v, the model has %s at %v %v", seed, k, g.by, g.at, g.values, w.by, w.at, wv)
		}
	}
}

// A memory buffer emits at capacity or at the end of the period its
// first queued batch falls in.
func TestMemoryProperty(t *testing.T) {
	const timeout = time.Second
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		capacity := 1 + rng.IntN(8)
		ws := randomWrites(rng, 1+rng.IntN(30), timeout, []string{""}, 0)
		r := drive(t, seed, "memory", fmt.Sprintf(`{"capacity": %d, "timeout": "1s"}`, capacity), ws)
		// The model: rows queue until capacity (the emission goes out in
		// the write, and the periods start again there) or the end of the
		// period after the first queued write.
		var want []expect
		var queued []int
		var restart, end time.Duration
		rows := 0
		next := func(w time.Duration) time.Duration { return restart + ((w-restart)/timeout+1)*timeout }
		for i, w := range ws {
			if len(queued) > 0 && next(ws[queued[0]].at) <= w.at {
				want = append(want, expect{next(ws[queued[0]].at), "tick", queued})
				queued, rows = nil, 0
			}
			queued, rows = append(queued, i), rows+w.rows
			if rows >= capacity {
				want = append(want, expect{w.at, "write", queued})
				queued, rows, restart = nil, 0, w.at
			}
			end = w.at + time.Millisecond
		}
		if len(queued) > 0 {
			at, by := end, "flush"
			if next(ws[queued[0]].at) <= end {
				at, by = next(ws[queued[0]].at), "tick"
			}
			want = append(want, expect{at, by, queued})
		}
		r.compare(seed, want)
	}
}

// A tumbling window emits the batches written in each interval at its
// end.
func TestTumblingProperty(t *testing.T) {
	const interval = time.Second
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 2))
		ws := randomWrites(rng, 1+rng.IntN(30), interval, []string{"a", "b", "c"}, 0)
		r := drive(t, seed, "tumbling_window", `{"interval": "1s"}`, ws)
		// The model: window k holds the writes in [k, k+1) intervals.
		var want []expect
		for i, w := range ws {
			k := w.at / interval
			end := (k + 1) * interval
			if len(want) == 0 || want[len(want)-1].at != end {
				want = append(want, expect{at: end, by: "tick"})
			}
			want[len(want)-1].entries = append(want[len(want)-1].entries, i)
		}
		for k := range want {
			want[k].entries = r.byFirstInput(want[k].entries)
		}
		r.fixLast(want)
		r.compare(seed, want)
	}
}

// A session window emits a session gap after its last batch.
func TestSessionProperty(t *testing.T) {
	const gap = time.Second
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		ws := randomWrites(rng, 1+rng.IntN(30), gap, []string{"a", "b", "c"}, 0)
		r := drive(t, seed, "session_window", `{"gap": "1s"}`, ws)
		// The model: a session ends where the next write is gap or more
		// after the last.
		var want []expect
		for i, w := range ws {
			if i == 0 || w.at-ws[i-1].at >= gap {
				want = append(want, expect{by: "tick"})
			}
			want[len(want)-1].entries = append(want[len(want)-1].entries, i)
			want[len(want)-1].at = w.at + gap
		}
		for k := range want {
			want[k].entries = r.byFirstInput(want[k].entries)
		}
		r.fixLast(want)
		r.compare(seed, want)
	}
}

// fixLast makes the model's last window the flush's when it ends after
// the flush, a millisecond after the last write.
func (r *run) fixLast(want []expect) {
	end := r.writes[len(r.writes)-1].at + time.Millisecond
	if last := &want[len(want)-1]; last.at > end {
		last.at, last.by = end, "flush"
	}
}

// A sliding window emits every window of window_size batches, sliding by
// slide_size, and at the flush the batches no window held.
func TestSlidingProperty(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 4))
		size := 1 + rng.IntN(5)
		slide := 1 + rng.IntN(size)
		ws := randomWrites(rng, 1+rng.IntN(20), time.Second, []string{""}, 1)
		r := drive(t, seed, "sliding_window", fmt.Sprintf(`{"window_size": %d, "slide_size": %d, "interval": "1s"}`, size, slide), ws)
		// The model, by nested loops: window k is entries k*slide up to
		// k*slide+size, emitted by the write of its last entry; the
		// entries no window holds make a last one at the flush.
		var want []expect
		covered := 0
		for start := 0; start+size <= len(ws); start += slide {
			var es []int
			for i := start; i < start+size; i++ {
				es = append(es, i)
			}
			want = append(want, expect{ws[start+size-1].at, "write", es})
			covered = start + size
		}
		if covered < len(ws) {
			var es []int
			for i := covered; i < len(ws); i++ {
				es = append(es, i)
			}
			want = append(want, expect{ws[len(ws)-1].at + time.Millisecond, "flush", es})
		}
		r.compare(seed, want)
	}
}

// A sliding window counts batches: not rows, and not time.
func TestSlidingCountsBatches(t *testing.T) {
	h := newHarness(t)
	defer h.finish()
	if err := h.open("sliding_window", `{"window_size": 2, "slide_size": 2, "interval": "10ms"}`, Options{}); err != nil {
		t.Fatal(err)
	}
	es, err := h.buf.Write(epoch, h.entry("", ints(h.mem, "v", []int64{1, 2, 3, 4, 5})))
	if len(h.keep(es)) > 0 || err != nil {
		t.Fatalf("a batch of 5 rows filled a window of 2 batches: %d emissions (%v)", len(es), err)
	}
	if d, ok := h.buf.Deadline(); ok {
		t.Fatalf("deadline %v", d)
	}
	for _, at := range []time.Duration{10 * time.Millisecond, time.Second, time.Hour} {
		if es, err := h.buf.Tick(epoch.Add(at)); len(h.keep(es)) > 0 || err != nil {
			t.Fatalf("a tick at %v emitted %d (%v)", at, len(es), err)
		}
	}
	es, err = h.buf.Write(epoch.Add(time.Hour), h.entry("", ints(h.mem, "v", nil)))
	if err != nil {
		t.Fatal(err)
	}
	es2 := h.keep(es)
	if len(es2) != 1 || !slices.Equal(int64s(t, es2[0].Rec), []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("the second batch (of no rows) gave %d emissions", len(es2))
	}
}
