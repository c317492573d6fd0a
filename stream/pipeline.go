package stream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/streambuf"
)

// pipeline runs a stream's processors: those before the first batch
// processor on thread_num workers, the rest (a batch processor holds
// batches across calls, so it sees them in order) one batch at a time in
// input order, then writes to the output in input order.
type pipeline struct {
	r *runner
	// workers are the per-worker chains of the parallel part.
	workers [][]processor
	// serial is the rest, from the first batch processor on.
	serial []stage
}

// work is one emission of the buffer on its way through the pipeline.
type work struct {
	seq uint64
	in  arrow.RecordBatch // what entered the pipeline, for error_output
	ack *ack.Node
	out []arrow.RecordBatch
	err error
}

func newPipeline(r *runner) (*pipeline, error) {
	p := &pipeline{r: r}
	procs := r.s.Pipeline.Processors
	cut := len(procs)
	for i, c := range procs {
		if c.Type == "batch" {
			cut = i
			break
		}
	}
	for range r.threads {
		chain, err := buildProcessors(r, procs[:cut], 0)
		if err != nil {
			p.close()
			return nil, err
		}
		p.workers = append(p.workers, chain)
	}
	var err error
	if p.serial, err = buildStages(r, procs[cut:], cut); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pipeline) close() {
	for _, w := range p.workers {
		for _, pr := range w {
			pr.close()
		}
	}
	for _, s := range p.serial {
		s.close()
	}
}

// run processes the emissions until they end: the workers take them in
// turn, and the results are written in the order they came.
func (p *pipeline) run(ctx context.Context, in <-chan streambuf.Emission) error {
	defer p.close()
	jobs := make(chan *work, len(p.workers))
	done := make(chan *work, 4*len(p.workers))
	// slots bound what is inside: a worker far ahead of a slow one
	// waits instead of piling results up.
	slots := make(chan struct{}, 4*len(p.workers))
	var wg sync.WaitGroup
	for _, chain := range p.workers {
		wg.Go(func() {
			for w := range jobs {
				w.out, w.err = runChain(ctx, chain, w.in)
				done <- w
			}
		})
	}
	go func() {
		var seq uint64
		for em := range in {
			slots <- struct{}{}
			jobs <- &work{seq: seq, in: em.Rec, ack: em.Ack}
			seq++
		}
		close(jobs)
		wg.Wait()
		close(done)
	}()
	return p.output(ctx, done, slots)
}

// output takes the workers' results, puts them back in input order, runs
// the serial stages and writes.
func (p *pipeline) output(ctx context.Context, done <-chan *work, slots <-chan struct{}) error {
	waiting := map[uint64]*work{}
	var next uint64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		var tick <-chan time.Time
		if d, ok := p.deadline(); ok {
			timer.Reset(time.Until(d))
			tick = timer.C
		}
		select {
		case w, ok := <-done:
			if !ok {
				p.flushStages(ctx)
				return nil
			}
			waiting[w.seq] = w
			for w := waiting[next]; w != nil; w = waiting[next] {
				delete(waiting, next)
				next++
				p.handle(ctx, w)
				<-slots
			}
		case <-tick:
			p.tickStages(ctx, time.Now())
		}
	}
}

// handle sends a result on: to error_output when a processor failed,
// else through the serial stages to the output.
func (p *pipeline) handle(ctx context.Context, w *work) {
	if w.err != nil {
		p.r.failed(ctx, w.in, w.ack, w.err)
		return
	}
	w.in.Release()
	p.push(ctx, 0, w.out, w.ack)
}

// push gives batches to serial stage i (the output after the last).
func (p *pipeline) push(ctx context.Context, i int, recs []arrow.RecordBatch, node *ack.Node) {
	if i == len(p.serial) {
		p.r.write(ctx, recs, node)
		return
	}
	for _, it := range p.serial[i].add(time.Now(), item{recs: recs, ack: node}) {
		p.forward(ctx, i, it)
	}
}

// forward passes what stage i emitted to stage i+1, or its error on.
func (p *pipeline) forward(ctx context.Context, i int, it item) {
	if it.err != nil {
		p.r.failed(ctx, it.in, it.ack, it.err)
		return
	}
	p.push(ctx, i+1, it.recs, it.ack)
}

// deadline is the earliest time a serial stage waits for.
func (p *pipeline) deadline() (time.Time, bool) {
	var first time.Time
	found := false
	for _, s := range p.serial {
		if d, ok := s.deadline(); ok && (!found || d.Before(first)) {
			first, found = d, true
		}
	}
	return first, found
}

func (p *pipeline) tickStages(ctx context.Context, now time.Time) {
	for i, s := range p.serial {
		for _, it := range s.tick(now) {
			p.forward(ctx, i, it)
		}
	}
}

// flushStages empties the serial stages in order, at the end of input.
func (p *pipeline) flushStages(ctx context.Context) {
	for i := range p.serial {
		for _, it := range p.serial[i].flush() {
			p.forward(ctx, i, it)
		}
	}
}

// runChain runs processors over one batch; in stays the caller's.
func runChain(ctx context.Context, chain []processor, in arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	in.Retain()
	recs := []arrow.RecordBatch{in}
	for _, pr := range chain {
		var next []arrow.RecordBatch
		for _, rec := range recs {
			if rec.NumRows() == 0 {
				continue
			}
			out, err := pr.process(ctx, rec)
			if err != nil {
				releaseAll(recs)
				releaseAll(next)
				return nil, fmt.Errorf("%s: %w", pr.name(), err)
			}
			next = append(next, out...)
		}
		releaseAll(recs)
		recs = next
	}
	return recs, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// write writes batches to the output and acknowledges them; an output
// error leaves them unacknowledged.
func (r *runner) write(ctx context.Context, recs []arrow.RecordBatch, node *ack.Node) {
	defer releaseAll(recs)
	for _, rec := range recs {
		if rec.NumRows() == 0 {
			continue
		}
		if err := r.out.write(ctx, rec); err != nil {
			r.lg.Error("output failed: the rows stay unacknowledged", "error", err, "rows", rec.NumRows())
			node.Release(err)
			return
		}
	}
	node.Release(nil)
}

// failed handles a processor's error: in goes to error_output, or is
// dropped with the error logged when there is none.
func (r *runner) failed(ctx context.Context, in arrow.RecordBatch, node *ack.Node, perr error) {
	if in == nil {
		r.lg.Error("processor failed: the rows stay unacknowledged", "error", perr)
		node.Release(perr)
		return
	}
	defer in.Release()
	if ctx.Err() != nil {
		// A stop cut the processor short: the batch did not fail, it is
		// left unacknowledged for the input to give again.
		node.Release(ctx.Err())
		return
	}
	if r.errOut == nil {
		r.lg.Error("processor failed: the batch is dropped (no error_output)", "error", perr, "rows", in.NumRows())
		node.Release(nil)
		return
	}
	r.lg.Warn("processor failed: the batch goes to error_output", "error", perr, "rows", in.NumRows())
	if err := r.errOut.write(ctx, in); err != nil {
		r.lg.Error("error_output failed: the rows stay unacknowledged", "error", err, "rows", in.NumRows())
		node.Release(err)
		return
	}
	node.Release(nil)
}
