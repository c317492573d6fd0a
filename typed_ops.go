package arkflow

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/internal/typed"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// The typed operators are top-level functions, not Builder methods, since
// Go methods cannot have type parameters. Each binds the same operator its
// Arrow counterpart does (Map, Filter, Process) with a function over whole
// batches that decodes the rows into In, calls the user's function on each
// and encodes what it returns as Out, and a check of the input schema that
// runs at Build.

// MapRows adds a map operator over Go structs: each input row is decoded
// into an In (fields match columns by name, as in DecodeInto), f is
// called with it, and the Out values it returns are the rows emitted,
// encoded as Encode does. The output schema is SchemaOf[Out], so Build
// checks the operators after it against Out's columns, and checks that
// the input has a column for every field of In; a type SchemaOf refuses
// is a problem Build reports, naming the call. An error from f fails the
// job as a MapFunc's does: the batch stays unacknowledged, and a restart
// replays it. It runs only in the program that defines f. Rows that a
// push source or typed operator emitted reach f as Go values, without
// Arrow, when In's fields are numbers, bools, strings and times (package
// doc).
//
//	arkflow.MapRows(arkflow.NewJob("j").Source("in", src), "enrich", enrich).Sink("out", sink)
func MapRows[In, Out any](b *Builder, id string, f func(ctx context.Context, in In) (Out, error), opts ...OperatorOption) *Builder {
	call := typedCall("MapRows", id)
	if f == nil {
		b.problem(id, "%s needs a function", call)
		return b
	}
	r := newRowFunc[In, Out](b, id, call, true)
	set := b.add(call, job.Operator{ID: id, Kind: job.KindMap, Config: b.config(id, ops.MapConfig{Function: id})}, opts)
	r.refuseSchema(b, id, call, set)
	b.bindings[id] = ops.MapBinding{Name: id, Fn: r.mapFunc(f), Output: r.output(), Check: r.check}
	return b
}

// FilterRows adds a filter over Go structs: each input row is decoded
// into a T (fields match columns by name, as in DecodeInto) and kept when
// keep returns true. The rows kept go on as they came, every column
// included, so the operators after it see the input's schema. Build
// checks that the input has a column for every field of T; a type
// SchemaOf refuses is a problem Build reports, naming the call. An error
// from keep fails the job as a FilterFunc's does. It runs only in the
// program that defines keep.
func FilterRows[T any](b *Builder, id string, keep func(ctx context.Context, row T) (bool, error), opts ...OperatorOption) *Builder {
	call := typedCall("FilterRows", id)
	if keep == nil {
		b.problem(id, "%s needs a function", call)
		return b
	}
	r := newRowFunc[T, T](b, id, call, false)
	b.add(call, job.Operator{ID: id, Kind: job.KindFilter, Config: b.config(id, ops.FilterConfig{Function: id})}, opts)
	b.bindings[id] = ops.FilterBinding{Name: id, Fn: r.filterFunc(keep), Check: r.check}
	return b
}

// ProcessRows adds a keyed, stateful operator over Go structs, as Process
// does over Arrow batches: call KeyBy before it. Each input row is decoded
// into an In and f is called with it and st, the keyed state of the row's
// key (read and write it with state.Value and state.Map); the Out values
// it returns, none or several, are emitted, encoded as Encode does. The
// output schema is SchemaOf[Out], and Build checks In, Out and the
// operators after it as for MapRows. Writes to st commit when the
// batch's output is acknowledged; an error from f fails the job, the
// batch unacknowledged and its writes never committed, so a restart
// replays it.
func ProcessRows[In, Out any](b *Builder, id string, f func(ctx context.Context, st *state.Keyed, in In) ([]Out, error), opts ...OperatorOption) *Builder {
	call := typedCall("ProcessRows", id)
	if f == nil {
		b.problem(id, "%s needs a function", call)
		return b
	}
	if b.keyBy == "" && len(b.cursor) > 0 {
		b.problem(id, "%s needs a key: call KeyBy(field) before it", call)
	}
	r := newRowFunc[In, Out](b, id, call, true)
	set := b.add(call, job.Operator{ID: id, Kind: job.KindUDF, Stateful: true, Config: b.config(id, ops.MapConfig{Function: id})}, opts)
	r.refuseSchema(b, id, call, set)
	b.bindings[id] = ops.ProcessBinding{Name: id, Fn: r.processFunc(f), Output: r.output(), Check: r.check}
	return b
}

// typedCall names a typed operator's call in Build's errors, as
// `MapRows("enrich", ...)`.
func typedCall(fn, id string) string { return fmt.Sprintf("%s(%q, ...)", fn, id) }

// rowFunc is what a typed operator's batch function shares across the
// subtasks that call it: the codecs of its row types and a pool of
// buffers, so that a batch reuses the rows a previous one decoded into.
type rowFunc[In, Out any] struct {
	in     *typed.Codec[In]
	out    *typed.Codec[Out] // nil for a filter, which emits no Out
	inErr  error             // In's refusal
	outErr error             // Out's refusal
	// inName is In's name in errors: "In", or a filter's "T".
	inName string
	// same: In and Out are one type, whose codec is exact.
	same bool
	bufs sync.Pool // *rowBufs[In, Out]
}

type rowBufs[In, Out any] struct {
	in  []In
	out []Out
}

// newRowFunc gets the codecs of In and, with hasOut, of Out, recording a
// refused type as a problem of call: "In" and "Out" (a filter's In is its
// "T") name the type parameter at fault.
func newRowFunc[In, Out any](b *Builder, id, call string, hasOut bool) *rowFunc[In, Out] {
	r := &rowFunc[In, Out]{inName: "In"}
	if !hasOut {
		r.inName = "T"
	}
	r.in, r.inErr = typed.For[In]()
	if r.inErr != nil {
		b.callProblem(id, call+": "+r.inName, "%v", r.inErr)
	}
	if !hasOut {
		return r
	}
	r.out, r.outErr = typed.For[Out]()
	r.same = reflect.TypeFor[In]() == reflect.TypeFor[Out]() && r.outErr == nil && r.out.Exact()
	if r.outErr != nil && reflect.TypeFor[In]() != reflect.TypeFor[Out]() {
		b.callProblem(id, call+": Out", "%v", r.outErr)
	}
	return r
}

// refuseSchema reports a WithSchema given to a typed operator, whose Out
// type is its output schema.
func (r *rowFunc[In, Out]) refuseSchema(b *Builder, id, call string, set opSettings) {
	if set.schema != nil {
		b.callProblem(id, "WithSchema(schema)", "%s emits rows of its Out type, whose schema is SchemaOf[Out]: leave the option out", call)
	}
}

// output is the schema the operator emits, nil when Out is refused.
func (r *rowFunc[In, Out]) output() *arrow.Schema {
	if r.out == nil {
		return nil
	}
	return r.out.Schema()
}

// check is the operator's build check (ops.CheckFunc): the refused types
// (which the builder reported already, under the same fields), and
// whether the input decodes into In. A refused type fails the operator's
// build, so the operators after it are not checked against a schema it
// will never emit.
func (r *rowFunc[In, Out]) check(input *arrow.Schema) error {
	var errs ops.Errors
	switch {
	case r.inErr != nil:
		errs = append(errs, ops.Errf(r.inName, "%v", r.inErr))
	case input != nil:
		if err := r.in.Check(input); err != nil {
			errs = append(errs, ops.Errf(r.inName, "%v", err))
		}
	}
	if r.outErr != nil && reflect.TypeFor[In]() != reflect.TypeFor[Out]() {
		errs = append(errs, ops.Errf("Out", "%v", r.outErr))
	}
	return errs.Err()
}

// get returns buffers for one batch; put returns them. They are not
// cleared (that took 7 % of MapRows' time in BenchmarkMapRows): a pooled
// buffer keeps the values of one batch alive until it is reused, or
// dropped by the pool at a garbage collection.
func (r *rowFunc[In, Out]) get() *rowBufs[In, Out] {
	if bufs, ok := r.bufs.Get().(*rowBufs[In, Out]); ok {
		return bufs
	}
	return &rowBufs[In, Out]{}
}

func (r *rowFunc[In, Out]) put(bufs *rowBufs[In, Out]) { r.bufs.Put(bufs) }

// decode decodes rec into bufs.in, reusing its memory. A typed batch of
// In is read in place: the functions get each row by value, and no one
// writes the slice.
func (r *rowFunc[In, Out]) decode(rec arrow.RecordBatch, bufs *rowBufs[In, Out]) ([]In, error) {
	if rows, ok := r.in.Rows(rec); ok {
		return rows, nil
	}
	rows, err := r.in.Decode(rec, bufs.in[:0])
	if err != nil {
		return nil, err
	}
	bufs.in = rows
	return rows, nil
}

// encode encodes rows, nil when there are none (the operator emits
// nothing then). When Out's values survive encoding unchanged, the batch
// is a typed one holding a copy of rows (rows is a pooled buffer), whose
// columns are encoded only if something reads them: a typed operator or
// sink after this one reads the rows themselves.
func (r *rowFunc[In, Out]) encode(rows []Out) (arrow.RecordBatch, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	if r.out.Exact() {
		own := r.out.MakeRows(len(rows))
		copy(own, rows)
		return r.encodeOwned(own)
	}
	return r.out.Encode(nil, rows)
}

// encodeOwned is encode of rows no one else holds: a typed batch keeps
// them, their times rounded to their columns' units.
func (r *rowFunc[In, Out]) encodeOwned(rows []Out) (arrow.RecordBatch, error) {
	if len(rows) == 0 || !r.out.Exact() {
		return r.encode(rows)
	}
	if err := r.out.Normalize(rows); err != nil {
		return nil, err
	}
	return typed.NewBatch(r.out, rows), nil
}

// owned returns the rows of rec for writing the map's output over them,
// when In and Out are one type and rec is a typed batch no one else
// holds.
func (r *rowFunc[In, Out]) owned(rec arrow.RecordBatch) ([]Out, bool) {
	if !r.same {
		return nil, false
	}
	rows, ok := r.in.Own(rec)
	if !ok {
		return nil, false
	}
	return any(rows).([]Out), true
}

func (r *rowFunc[In, Out]) mapFunc(f func(context.Context, In) (Out, error)) ops.MapFunc {
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		bufs := r.get()
		defer r.put(bufs)
		rows, err := r.decode(rec, bufs)
		if err != nil {
			return nil, err
		}
		var out []Out
		if owned, ok := r.owned(rec); ok {
			// A typed batch of In no one else holds: each row is read
			// (by value, into f) before its place is written.
			out = owned
		} else if r.out.Exact() {
			out = r.out.MakeRows(len(rows)) // the typed batch's own
		} else {
			out = slices.Grow(bufs.out[:0], len(rows))[:len(rows)]
			bufs.out = out
		}
		for i := range rows {
			if out[i], err = f(ctx, rows[i]); err != nil {
				return nil, err
			}
		}
		return r.encodeOwned(out)
	}
}

func (r *rowFunc[In, Out]) filterFunc(keep func(context.Context, In) (bool, error)) ops.FilterFunc {
	return func(ctx context.Context, rec arrow.RecordBatch) ([]bool, error) {
		bufs := r.get()
		defer r.put(bufs)
		rows, err := r.decode(rec, bufs)
		if err != nil {
			return nil, err
		}
		mask := make([]bool, len(rows))
		for i := range rows {
			if mask[i], err = keep(ctx, rows[i]); err != nil {
				return nil, err
			}
		}
		return mask, nil
	}
}

func (r *rowFunc[In, Out]) processFunc(f func(context.Context, *state.Keyed, In) ([]Out, error)) ops.ProcessFunc {
	return func(ctx context.Context, keyed func(int) (*statestore.Keyed, error), rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		bufs := r.get()
		defer r.put(bufs)
		rows, err := r.decode(rec, bufs)
		if err != nil {
			return nil, err
		}
		out := bufs.out[:0]
		for i := range rows {
			k, err := keyed(i)
			if err != nil {
				return nil, err
			}
			emitted, err := f(ctx, statestore.Public(k).(*state.Keyed), rows[i])
			if err != nil {
				return nil, err
			}
			out = append(out, emitted...)
		}
		bufs.out = out
		return r.encode(out)
	}
}
