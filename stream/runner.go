package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/streambuf"
)

// runner runs one stream.
type runner struct {
	id      string
	s       *Stream
	o       *options
	lg      *slog.Logger
	inputs  []*input
	out     *output
	errOut  *output
	threads int
	state   atomic.Int32 // stateStarting…, for the health routes
	lookups lookups      // the temporaries, by name
}

// input is one source of a stream: the stream's input, or one of
// multiple_inputs' inputs.
type input struct {
	name string // multiple_inputs' name; "" for a single input
	src  connectors.Source
	wal  *durable.Source // src itself when the stream has a durability block
	// rawValue says the source's column "value" is the raw payload,
	// which the stream calls __value__ as ArkFlow does.
	rawValue bool
	codec    string // json or debezium_json decode __value__; "" none
}

// entry is a batch on its way from the inputs to the buffer.
type entry = streambuf.Entry

// newRunner builds stream i: its sources (with their WALs) and outputs.
// Nothing is connected yet.
func newRunner(s *Stream, i int, o *options) (*runner, error) {
	r := &runner{id: streamName(s, i), s: s, o: o, threads: threads(&s.Pipeline)}
	r.lg = o.logger.With("stream", r.id)
	if err := r.buildInputs(); err != nil {
		r.abort()
		return nil, err
	}
	var err error
	if r.lookups, err = buildLookups(s); err != nil {
		r.abort()
		return nil, err
	}
	if r.out, err = newOutput(&s.Output, r.id, "output", r.lg, o.stdout); err != nil {
		r.abort()
		return nil, err
	}
	if s.ErrorOutput != nil {
		if r.errOut, err = newOutput(s.ErrorOutput, r.id, "error_output", r.lg, o.stdout); err != nil {
			r.abort()
			return nil, err
		}
	}
	return r, nil
}

// buildInputs builds the stream's input, or each of multiple_inputs'.
func (r *runner) buildInputs() error {
	c := &r.s.Input
	if c.Type != "multiple_inputs" {
		return r.buildInput("", c)
	}
	var cfg struct {
		Inputs []Component `json:"inputs"`
	}
	if err := json.Unmarshal(c.Config, &cfg); err != nil {
		return fmt.Errorf("input.inputs: %w", err)
	}
	for k := range cfg.Inputs {
		if err := r.buildInput(cfg.Inputs[k].Name, &cfg.Inputs[k]); err != nil {
			return err
		}
	}
	return nil
}

// buildInput builds one source through the connectors registry and puts
// the stream's WAL in front of it when the stream has a durability block.
func (r *runner) buildInput(name string, c *Component) error {
	f, ok := connectors.LookupInput(c.Type)
	if !ok {
		return fmt.Errorf("input type %q is not registered", c.Type)
	}
	op := "input"
	if name != "" {
		op = "input-" + name
	}
	in, err := f(connectors.BuildContext{JobID: r.id, OperatorID: op, Config: c.Config, Logger: r.lg})
	if err != nil {
		return err
	}
	info := connectors.TaskInfo{JobID: r.id, OperatorID: op, Parallelism: 1, Logger: r.lg.With("operator", op)}
	src, err := in.NewSource(info)
	if err != nil {
		return err
	}
	it := &input{name: name, src: src, rawValue: rawValue(c, in.Schema())}
	if c.Codec != nil {
		it.codec = c.Codec.Type
	}
	r.inputs = append(r.inputs, it)
	d, err := walConfig(r.s.Durability)
	if err != nil || d == nil {
		return err
	}
	w, err := durable.Open(context.Background(), d, src, r.o.dataDir, info, r.id+"/"+op, durable.Job{})
	if err != nil {
		return err
	}
	it.src, it.wal = w, w
	return nil
}

// rawValue says whether a source's rows carry their raw payload in a
// column "value": the input declares no schema (so it reads raw
// payloads) and its schema has a string or binary "value" and no
// __value__.
func rawValue(c *Component, schema *arrow.Schema) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(c.Config, &keys) != nil {
		return false
	}
	if _, declared := keys["schema"]; declared || schema == nil || schema.HasField(valueField) {
		return false
	}
	i := schema.FieldIndices("value")
	if len(i) != 1 {
		return false
	}
	switch schema.Field(i[0]).Type.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// abort releases what newRunner built, for a stream that never runs.
func (r *runner) abort() {
	ctx := context.Background()
	for _, in := range r.inputs {
		in.src.Close(ctx)
		if in.wal != nil {
			in.wal.CloseWAL()
		}
	}
}

// run connects the stream, moves its rows until the inputs end or ctx is
// done, drains, and closes everything.
func (r *runner) run(ctx context.Context) (err error) {
	// work outlives ctx by the drain timeout: a stop lets what was read
	// go out.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopDrain := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.o.drain, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopDrain()
	defer func() {
		err = errors.Join(err, r.close())
		if err != nil {
			r.setState(stateFailed)
		} else {
			r.setState(stateEnded)
		}
	}()
	for _, in := range r.inputs {
		if err := in.src.Connect(ctx); err != nil {
			return fmt.Errorf("connecting input %s: %w", in.label(), err)
		}
	}
	for name, l := range r.lookups {
		if err := l.Connect(ctx); err != nil {
			return fmt.Errorf("connecting temporary %s: %w", name, err)
		}
	}
	p, err := newPipeline(r)
	if err != nil {
		return err
	}
	r.setState(stateRunning)
	entries := make(chan entry, 4*r.threads)
	emitted := make(chan streambuf.Emission, 4*r.threads)
	var wg sync.WaitGroup
	errs := make([]error, len(r.inputs)+2)
	// A failed buffer or pipeline stops the reading too.
	reading, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var readers sync.WaitGroup
	for k, in := range r.inputs {
		readers.Go(func() { errs[k] = r.read(reading, work, in, entries) })
	}
	wg.Go(func() { readers.Wait(); close(entries) })
	wg.Go(func() {
		if errs[len(r.inputs)] = r.buffer(work, entries, emitted); errs[len(r.inputs)] != nil {
			stopReading()
		}
	})
	wg.Go(func() {
		if errs[len(r.inputs)+1] = p.run(work, emitted); errs[len(r.inputs)+1] != nil {
			stopReading()
		}
	})
	wg.Wait()
	return errors.Join(errs...)
}

func (in *input) label() string {
	if in.name == "" {
		return "input"
	}
	return "input " + in.name
}

// read reads one source until it ends or ctx is done, passing its
// batches on (work bounds the passing on, which a stop lets finish).
func (r *runner) read(ctx, work context.Context, in *input, out chan<- entry) error {
	for ctx.Err() == nil {
		b, err := in.src.Read(ctx)
		switch {
		case err == nil:
		case errors.Is(err, connectors.ErrEndOfInput):
			return nil
		case ctx.Err() != nil:
			refuse(b, ctx.Err())
			return nil
		default:
			refuse(b, err)
			return fmt.Errorf("reading %s: %w", in.label(), err)
		}
		if b.Record == nil {
			continue
		}
		if b.Accepted != nil {
			b.Accepted(nil)
		}
		rec := b.Record
		if in.rawValue {
			rec = renameRaw(rec)
		}
		if in.codec != "" {
			if rec, err = decodeInput(in.codec, rec); err != nil {
				if b.Ack != nil {
					b.Ack(err)
				}
				return fmt.Errorf("%s: %w", in.label(), err)
			}
		}
		e := entry{Rec: rec, Input: in.name, Ack: ack.New(b.Ack)}
		select {
		case out <- e:
		case <-work.Done():
			rec.Release()
			e.Ack.Release(work.Err())
			return nil
		}
	}
	return nil
}

// refuse hands back a batch the stream did not take.
func refuse(b connectors.Batch, err error) {
	if b.Record != nil {
		b.Record.Release()
	}
	if b.Accepted != nil {
		b.Accepted(err)
	}
	if b.Ack != nil && b.Record != nil {
		b.Ack(err)
	}
}

// buffer passes the entries through the stream's buffer (or straight on
// without one) and closes out when the entries end.
func (r *runner) buffer(ctx context.Context, in <-chan entry, out chan<- streambuf.Emission) error {
	defer close(out)
	if r.s.Buffer == nil {
		for e := range in {
			if !send(ctx, out, streambuf.Emission{Rec: e.Rec, Ack: e.Ack}) {
				return nil
			}
		}
		return nil
	}
	buf, err := newBuffer(r, time.Now())
	if err != nil {
		drainEntries(in, err)
		return err
	}
	defer buf.Close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		var tick <-chan time.Time
		if d, ok := buf.Deadline(); ok {
			timer.Reset(time.Until(d))
			tick = timer.C
		}
		var ems []streambuf.Emission
		select {
		case e, ok := <-in:
			if !ok {
				ems, err = buf.Flush(time.Now())
				if err == nil {
					sendAll(ctx, out, ems)
				}
				return err
			}
			ems, err = buf.Write(time.Now(), e)
		case <-tick:
			ems, err = buf.Tick(time.Now())
		case <-ctx.Done():
			drainEntries(in, ctx.Err())
			return nil
		}
		if err != nil {
			drainEntries(in, err)
			return err
		}
		if !sendAll(ctx, out, ems) {
			drainEntries(in, ctx.Err())
			return nil
		}
	}
}

// drainEntries fails the entries still coming, so the readers can end.
func drainEntries(in <-chan entry, err error) {
	for e := range in {
		e.Rec.Release()
		e.Ack.Release(err)
	}
}

func send(ctx context.Context, out chan<- streambuf.Emission, em streambuf.Emission) bool {
	select {
	case out <- em:
		return true
	case <-ctx.Done():
		em.Rec.Release()
		em.Ack.Release(ctx.Err())
		return false
	}
}

func sendAll(ctx context.Context, out chan<- streambuf.Emission, ems []streambuf.Emission) bool {
	for i, em := range ems {
		if !send(ctx, out, em) {
			for _, rest := range ems[i+1:] {
				rest.Rec.Release()
				rest.Ack.Release(ctx.Err())
			}
			return false
		}
	}
	return true
}

// close closes the sources, the outputs and then the WALs.
func (r *runner) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.drain)
	defer cancel()
	var errs []error
	for _, in := range r.inputs {
		if err := in.src.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", in.label(), err))
		}
	}
	for _, l := range r.lookups {
		l.Close()
	}
	for _, o := range []*output{r.out, r.errOut} {
		if err := o.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, in := range r.inputs {
		if in.wal != nil {
			if err := in.wal.CloseWAL(); err != nil {
				errs = append(errs, fmt.Errorf("closing the WAL of %s: %w", in.label(), err))
			}
		}
	}
	return errors.Join(errs...)
}
