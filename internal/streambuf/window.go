package streambuf

import (
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
)

// window is what a tumbling and a session window share: the batches of
// the window open now and, with a join, the query that turns them into
// the window's result.
type window struct {
	q    queue
	join *join
}

func newWindow(k keys, opts Options) (*window, error) {
	w := &window{q: queue{alloc: opts.alloc}}
	raw, ok := k.cfg["join"]
	if !ok || string(raw) == "null" {
		return w, nil
	}
	j, err := newJoin(k.typ, raw, opts)
	if err != nil {
		return nil, err
	}
	w.join = j
	return w, nil
}

func (w *window) write(e Entry) error {
	if w.join != nil {
		if err := w.join.accepts(e.Input); err != nil {
			release([]Entry{e}, err)
			return err
		}
	}
	w.q.push(e)
	return nil
}

// emit closes the window: it emits the batches of each input in arrival
// order, the inputs in the order their first batch came, as one batch;
// or, with a join, the join's result.
func (w *window) emit() ([]Emission, error) {
	if w.q.empty() {
		return nil, nil
	}
	groups := byInput(w.q.take())
	if w.join != nil {
		return w.join.run(w.q.alloc, groups)
	}
	var es []Entry
	for _, g := range groups {
		es = append(es, g.entries...)
	}
	return emit(w.q.alloc, es)
}

// group is the entries of one input in a window.
type group struct {
	input   string
	entries []Entry
}

// byInput groups es by input, the inputs in the order of their first
// entry, each input's entries in order.
func byInput(es []Entry) []group {
	var gs []group
	at := map[string]int{}
	for _, e := range es {
		i, ok := at[e.Input]
		if !ok {
			i = len(gs)
			at[e.Input] = i
			gs = append(gs, group{input: e.Input})
		}
		gs[i].entries = append(gs[i].entries, e)
	}
	return gs
}

// windowAck is one acknowledgement for every entry of gs, taking over
// their references.
func windowAck(gs []group) *ack.Node {
	var ps []*ack.Node
	for _, g := range gs {
		ps = append(ps, acks(g.entries)...)
	}
	return ack.Derive(ps...)
}

// tumbling is the tumbling window: a window every interval from the
// start; each one's batches are emitted at its end.
type tumbling struct {
	w    *window
	tick periodic
}

// Write adds e to the window open at now.
func (b *tumbling) Write(now time.Time, e Entry) ([]Emission, error) {
	if b.w.q.empty() {
		b.tick.skip(now) // windows passed with nothing in them
	}
	return nil, b.w.write(e)
}

// Deadline is the end of the window, while it holds anything.
func (b *tumbling) Deadline() (time.Time, bool) { return b.tick.next, !b.w.q.empty() }

// Tick closes the window when it has ended.
func (b *tumbling) Tick(now time.Time) ([]Emission, error) {
	if !b.tick.due(now) {
		return nil, nil
	}
	b.tick.skip(now)
	return b.w.emit()
}

// Flush closes the window open, unfinished.
func (b *tumbling) Flush(time.Time) ([]Emission, error) { return b.w.emit() }

// Close drops the window open.
func (b *tumbling) Close() { b.w.q.drop(errClosed) }

// session is the session window: one session for every input, which
// ends gap after the last batch written; its batches are emitted then.
type session struct {
	w    *window
	gap  time.Duration
	last time.Time
}

// Write adds e to the session, which it prolongs.
func (b *session) Write(now time.Time, e Entry) ([]Emission, error) {
	if err := b.w.write(e); err != nil {
		return nil, err
	}
	b.last = now
	return nil, nil
}

// Deadline is gap after the last write, while the session holds
// anything.
func (b *session) Deadline() (time.Time, bool) { return b.last.Add(b.gap), !b.w.q.empty() }

// Tick closes the session when it has ended.
func (b *session) Tick(now time.Time) ([]Emission, error) {
	if now.Before(b.last.Add(b.gap)) {
		return nil, nil
	}
	return b.w.emit()
}

// Flush closes the session open.
func (b *session) Flush(time.Time) ([]Emission, error) { return b.w.emit() }

// Close drops the session open.
func (b *session) Close() { b.w.q.drop(errClosed) }
