package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// visitCount is the keyed state of runningCount: one int64 per user.
var visitCount = state.NewValue[int64]("visits")

// countSchema is what runningCount emits: the user and their count so far.
var countSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// runningCount emits, for every input row, its user and how many rows
// that user has had so far, keeping the count in keyed state.
func runningCount(_ context.Context, pc *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	users := rec.Column(rec.Schema().FieldIndices("user")[0]).(*array.String)
	b := array.NewRecordBuilder(memory.DefaultAllocator, countSchema)
	defer b.Release()
	for i := 0; i < int(rec.NumRows()); i++ {
		k, err := pc.State(i) // the state of row i's key (its user)
		if err != nil {
			return nil, err
		}
		n, _, err := visitCount.Get(k) // 0 and false for a new user
		if err != nil {
			return nil, err
		}
		n++
		if err := visitCount.Set(k, n); err != nil {
			return nil, err
		}
		b.Field(0).(*array.StringBuilder).Append(users.Value(i))
		b.Field(1).(*array.Int64Builder).Append(n)
	}
	return b.NewRecordBatch(), nil
}

// A Process function keeps a running count per key in state.Value. Its
// writes commit when the rows it emitted have been written by the sink.
func ExampleProcessFunc() {
	schema := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"ann", "bob", "ann", "ann"}, nil)
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{b.NewRecordBatch()})
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()

	j, err := arkflow.NewJob("visits").
		Source("in", src).
		KeyBy("user").
		Process("count", runningCount, arkflow.WithSchema(countSchema)). // its rows have another schema than its input
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, rec := range out.Records() {
		for i := 0; i < int(rec.NumRows()); i++ {
			fmt.Println(rec.Column(0).(*array.String).Value(i), rec.Column(1).(*array.Int64).Value(i))
		}
	}
	// Output:
	// ann 1
	// bob 1
	// ann 2
	// ann 3
}

// Upgrading a job without losing its state: version 1 runs, takes a
// savepoint and stops; version 2 starts from the savepoint and continues
// the counts where version 1 left them.
func ExampleJob_Savepoint() {
	dir, err := os.MkdirTemp("", "arkflow-savepoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	type Visit struct {
		User string `arkflow:"user"`
	}
	type Count struct {
		User string `arkflow:"user"`
		N    int64  `arkflow:"n"`
	}
	// start builds and runs one version of the job.
	start := func(version uint64, opts ...arkflow.Option) (*arkflow.Job, *push.Source[Visit], chan error) {
		in := push.New(push.Config[Visit]{})
		j, err := arkflow.NewJob("visits").
			Version(version).
			Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + filepath.Join(dir, "checkpoints")}).
			Source("visits", in).
			KeyBy("user").
			Process("count", runningCount, arkflow.WithSchema(countSchema)).
			Sink("out", funcsink.Func[Count](func(_ context.Context, rows []Count) error {
				for _, r := range rows {
					fmt.Printf("v%d: %s %d\n", version, r.User, r.N)
				}
				return nil
			})).
			Build(append(opts, arkflow.WithDataDir(filepath.Join(dir, "data")))...)
		if err != nil {
			log.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- j.Run(context.Background()) }()
		return j, in, done
	}
	ctx := context.Background()

	// Version 1 counts three visits, saves its state as "v1" and stops.
	v1, in, done := start(1)
	if err := in.PushWait(ctx, Visit{"ann"}, Visit{"bob"}, Visit{"ann"}); err != nil {
		log.Fatal(err)
	}
	if err := v1.Savepoint(ctx, "v1"); err != nil {
		log.Fatal(err)
	}
	if err := v1.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	// Version 2 starts from the savepoint: ann's count goes on from 2.
	v2, in, done := start(2, arkflow.WithSavepoint("v1"))
	if err := in.PushWait(ctx, Visit{"ann"}); err != nil {
		log.Fatal(err)
	}
	if err := v2.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// v1: ann 1
	// v1: bob 1
	// v1: ann 2
	// v2: ann 3
}
