package main

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The queries are job specs, one YAML file each (queries/q3.yaml, …),
// built with arkflow.FromSpec (Builder.Join would build the same jobs in
// Go). The specs name their inputs and output by the types this file
// registers in a private connectors.Environment.
//
//go:embed queries/*.yaml
var queryFiles embed.FS

// The input and output types the specs use.
const (
	inputPersons  = "nexmark-persons"
	inputAuctions = "nexmark-auctions"
	inputBids     = "nexmark-bids"
	outputRows    = "nexmark-out"
)

// LoadQuery parses queries/<name>.yaml ("q3", "q7" or "q8") and sets the
// parallelism of its operators (0 keeps the spec's default, 1).
func LoadQuery(name string, parallelism int) (*job.Spec, error) {
	data, err := queryFiles.ReadFile("queries/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no query %q: %w", name, err)
	}
	spec, err := job.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", name, err)
	}
	if parallelism > 0 {
		spec.Parallelism = parallelism
	}
	return spec, nil
}

// Run is one run of a query: its output and the job's metrics at the end.
type Run struct {
	Output  []arrow.RecordBatch
	Metrics arkflow.Metrics
	// Took is how long the job ran (Job.Run), from connecting its
	// sources to their end.
	Took time.Duration
}

// RunQuery runs spec to its end over the events, read as l says, and
// returns what its sink received. dataDir is where the job may keep state
// on disk (arkflow.WithDataDir; "" for none).
func RunQuery(ctx context.Context, spec *job.Spec, ev *Events, l Layout, dataDir string) (*Run, error) {
	// The memory connector's own factories, handed Go batches the way the
	// builder hands them (BuildContext.Bound), under types of this
	// environment only: other jobs in the process see none of them.
	env := connectors.NewEnvironment()
	memIn, _ := env.LookupInput("memory")
	memOut, _ := env.LookupOutput("memory")
	// The batches of the entities the spec reads.
	inputs := map[string][][]arrow.RecordBatch{}
	for _, s := range spec.Sources {
		switch s.InputType {
		case inputPersons:
			inputs[s.InputType] = personBatches(ev, l)
		case inputAuctions:
			inputs[s.InputType] = auctionBatches(ev, l)
		case inputBids:
			inputs[s.InputType] = bidBatches(ev, l)
		}
	}
	defer func() {
		for _, parts := range inputs {
			for _, p := range parts {
				for _, rec := range p {
					rec.Release()
				}
			}
		}
	}()
	for name, parts := range inputs {
		src, err := mem.NewSourceFrom(parts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := env.RegisterInput(name, func(bc connectors.BuildContext) (connectors.Input, error) {
			bc.Bound = src
			return memIn(bc)
		}); err != nil {
			return nil, err
		}
	}
	sink := mem.NewSink()
	if err := env.RegisterOutput(outputRows, func(bc connectors.BuildContext, s *arrow.Schema) (connectors.Output, error) {
		bc.Bound = sink
		return memOut(bc, s)
	}); err != nil {
		return nil, err
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithEnvironment(env), arkflow.WithDataDir(dataDir))
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", spec.ID, err)
	}
	start := time.Now()
	if err := j.Run(ctx); err != nil {
		return nil, fmt.Errorf("running %s: %w", spec.ID, err)
	}
	return &Run{Output: sink.Records(), Metrics: j.Metrics(), Took: time.Since(start)}, nil
}

// Late is the number of rows the run's operators dropped as late (or for
// a null event time): zero when the sources' out_of_orderness covers the
// data's disorder.
func (r *Run) Late() int64 {
	var n int64
	for _, t := range r.Metrics.Tasks {
		n += t.Counters["late_dropped"] + t.Counters["null_timestamp_dropped"]
	}
	return n
}

// Q3Row is a row of Q3's output: a seller in OR, ID or CA and their
// auction in category 10.
type Q3Row struct {
	Name, City, State string
	Auction           int64
}

// Q7Row is a row of Q7's output: a bid at the highest price of its window.
type Q7Row struct {
	Auction, Price, Bidder int64
	DateTime               int64 // Unix ms
}

// Q8Row is a row of Q8's output: a person and an auction of theirs, both
// new in the window that starts at WindowStart.
type Q8Row struct {
	Person      int64
	Name        string
	WindowStart int64 // Unix ms
	Auction     int64
}

// Q3Rows reads Q3's output.
func Q3Rows(recs []arrow.RecordBatch) ([]Q3Row, error) {
	return readRows(recs, func(c cols, i int) Q3Row {
		return Q3Row{c.str("name", i), c.str("city", i), c.str("state", i), c.i64("id", i)}
	})
}

// Q7Rows reads Q7's output.
func Q7Rows(recs []arrow.RecordBatch) ([]Q7Row, error) {
	return readRows(recs, func(c cols, i int) Q7Row {
		return Q7Row{c.i64("auction", i), c.i64("price", i), c.i64("bidder", i), c.i64("date_time", i)}
	})
}

// Q8Rows reads Q8's output.
func Q8Rows(recs []arrow.RecordBatch) ([]Q8Row, error) {
	return readRows(recs, func(c cols, i int) Q8Row {
		return Q8Row{c.i64("id", i), c.str("name", i), c.i64("window_start", i), c.i64("auction", i)}
	})
}

// cols reads a batch's columns by name; a missing column, a null or a
// column of another type is recorded in err (the first one) and reads
// as the zero value.
type cols struct {
	rec arrow.RecordBatch
	err *error
}

func (c cols) col(name string, i int) arrow.Array {
	idx := c.rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		c.fail("no column %q in %s", name, c.rec.Schema())
		return nil
	}
	a := c.rec.Column(idx[0])
	if a.IsNull(i) {
		c.fail("column %q is null in row %d", name, i)
		return nil
	}
	return a
}

func (c cols) fail(format string, args ...any) {
	if *c.err == nil {
		*c.err = fmt.Errorf(format, args...)
	}
}

func (c cols) str(name string, i int) string {
	switch a := c.col(name, i).(type) {
	case nil:
	case *array.String:
		return a.Value(i)
	default:
		c.fail("column %q is %s, not a string", name, a.DataType())
	}
	return ""
}

// i64 reads an int64, or a millisecond timestamp as Unix ms.
func (c cols) i64(name string, i int) int64 {
	switch a := c.col(name, i).(type) {
	case nil:
	case *array.Int64:
		return a.Value(i)
	case *array.Timestamp:
		if a.DataType().(*arrow.TimestampType).Unit == arrow.Millisecond {
			return int64(a.Value(i))
		}
		c.fail("column %q is %s, not in ms", name, a.DataType())
	default:
		c.fail("column %q is %s, not an int64", name, a.DataType())
	}
	return 0
}

func readRows[T any](recs []arrow.RecordBatch, row func(cols, int) T) ([]T, error) {
	var out []T
	var err error
	for _, rec := range recs {
		c := cols{rec: rec, err: &err}
		for i := range int(rec.NumRows()) {
			out = append(out, row(c, i))
		}
	}
	return out, err
}
