package arkflow_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

func ExampleNewJob() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"ann", "bob", "ann", "cid", "bob"}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{10, 5, 2.5, 0.5, 20}, nil)
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{b.NewRecordBatch()})
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()

	j, err := arkflow.NewJob("spend").
		Source("payments", src).
		Where("real", "amount >= 1").
		KeyBy("user").
		Aggregate("per-user", job.Final(job.Count("payments"), job.Sum("amount", "total"))).
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
			fmt.Printf("%s: %d payments, %.1f\n",
				rec.Column(0).(*array.String).Value(i),
				rec.Column(1).(*array.Int64).Value(i),
				rec.Column(2).(*array.Float64).Value(i))
		}
	}
	// Output:
	// ann: 2 payments, 12.5
	// bob: 2 payments, 25.0
}

func ExampleLoad() {
	j, err := arkflow.Load("testdata/clicks.yaml")
	if err != nil {
		log.Fatal(err)
	}
	// The stdout sink prints one JSON object per row.
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// {"user":"ann","actions":2,"spent":30}
	// {"user":"bob","actions":2,"spent":19.75}
}

func ExampleValidate() {
	j, err := arkflow.Load("testdata/broken.yaml")
	fmt.Println(j == nil)
	for _, e := range job.AsValidationErrors(err) {
		fmt.Println(e)
	}
	// Output:
	// true
	// job "broken": operator "per-user": operators[2].config.aggregates[0].function: unknown aggregate function "total" (known: count, sum, min, max, avg, first, last)
	// job "broken": operator "clicks": sources[0].config.schema[1].type: must be one of int64, float32, float64, string, bool, timestamp (got "text")
	// job "broken": operator "out": sinks[0].output_type: unknown output type "stdoutt" (known: drop, file, func, memory, stdout); did you mean "stdout"?
}

// KeyedBy: the input's partitions are already keyed by user (as a Kafka
// topic whose producer keyed its messages by user), so KeyBy("user")
// needs no shuffle: the per-user aggregate runs in each source subtask,
// and each subtask's chain is its own placement unit, which a Hub may put
// on its own Agent.
func ExampleKeyedBy() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	j, err := arkflow.NewJob("spend").
		Parallelism(3).
		Source("payments", mem.NewSource(schema, 3), arkflow.KeyedBy("user")).
		KeyBy("user"). // no shuffle: the rows are partitioned by user already
		Aggregate("per-user", job.Running(job.Sum("amount", "total"))).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range j.Plan().PlacementUnits {
		fmt.Println(u.ID, u.Tasks)
	}
	// Output:
	// unit-0 [out-0 payments-0 per-user-0]
	// unit-1 [out-1 payments-1 per-user-1]
	// unit-2 [out-2 payments-2 per-user-2]
}

// Nexmark's Q8 in miniature: each auction joined with its seller, the
// person who registered, in the same 10-second window. The output's key
// column is named as on the left (id); both sides have ts, so the output
// has left_ts and right_ts, which Sale leaves out.
func ExampleBuilder_Join() {
	type Person struct {
		ID   string    `arkflow:"id"`
		Name string    `arkflow:"name"`
		TS   time.Time `arkflow:"ts"`
	}
	type Auction struct {
		Auction int64     `arkflow:"auction"`
		Seller  string    `arkflow:"seller"`
		TS      time.Time `arkflow:"ts"`
	}
	type Sale struct {
		Seller  string    `arkflow:"id"`
		Name    string    `arkflow:"name"`
		Start   time.Time `arkflow:"window_start"`
		Auction int64     `arkflow:"auction"`
	}
	at := func(s float64) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
	}
	source := func(rec arrow.RecordBatch, err error) *mem.Source {
		if err != nil {
			log.Fatal(err)
		}
		src, err := mem.NewSourceFrom([]arrow.RecordBatch{rec})
		if err != nil {
			log.Fatal(err)
		}
		return src
	}
	persons := source(arkflow.Encode([]Person{{"p1", "ann", at(0.1)}, {"p2", "bob", at(0.7)}, {"p3", "cid", at(12.5)}}))
	auctions := source(arkflow.Encode([]Auction{{1, "p1", at(0.2)}, {2, "p1", at(9)}, {3, "p3", at(2)}, {4, "p3", at(13)}}))
	var sales []Sale
	// In order within each source: PerRow keeps every row on time.
	inOrder := arkflow.EventTime{Field: "ts", PerRow: true}
	j, err := arkflow.NewJob("q8").
		Source("persons", persons, inOrder).
		Source("auctions", auctions, inOrder).
		Join("sellers", job.Join{Type: job.JoinWindow,
			Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller",
			Size: 10 * time.Second}).
		Sink("out", funcsink.Func[Sale](func(_ context.Context, rows []Sale) error {
			sales = append(sales, rows...)
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	slices.SortFunc(sales, func(a, b Sale) int { return int(a.Auction - b.Auction) })
	for _, s := range sales {
		fmt.Printf("%s %s auction %d in the window from %s\n", s.Seller, s.Name, s.Auction, s.Start.UTC().Format(time.TimeOnly))
	}
	// Output:
	// p1 ann auction 1 in the window from 00:00:00
	// p1 ann auction 2 in the window from 00:00:00
	// p3 cid auction 4 in the window from 00:00:10
}

// clickSource is a bounded memory source holding clicks in one batch.
func clickSource(clicks ...Click) *mem.Source {
	rec, err := arkflow.Encode(clicks)
	if err != nil {
		log.Fatal(err)
	}
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{rec})
	if err != nil {
		log.Fatal(err)
	}
	return src
}

// A map over Go structs: each click is decoded into a Click and its
// receipt encoded as the operator's rows. Build knows the receipts'
// columns, so the KeyBy after the map is checked against them.
func ExampleMapRows() {
	type Receipt struct {
		User   string `arkflow:"user"`
		Cents  int64  `arkflow:"cents"`
		Coupon string `arkflow:"coupon"`
	}
	receipt := func(_ context.Context, c Click) (Receipt, error) {
		r := Receipt{User: c.User, Cents: int64(c.Amount * 100), Coupon: "none"}
		if c.Coupon != nil {
			r.Coupon = *c.Coupon
		}
		return r, nil
	}
	welcome := "WELCOME"
	src := clickSource(Click{User: "ann", Amount: 12.5, Coupon: &welcome}, Click{User: "bob", Amount: 3})

	b := arkflow.NewJob("receipts").Source("clicks", src)
	j, err := arkflow.MapRows(b, "receipt", receipt).
		KeyBy("user").
		Sink("out", funcsink.Func[Receipt](func(_ context.Context, rows []Receipt) error {
			for _, r := range rows {
				fmt.Printf("%s %d cents, coupon %s\n", r.User, r.Cents, r.Coupon)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ann 1250 cents, coupon WELCOME
	// bob 300 cents, coupon none
}

// A filter over Go structs. Its type needs only the columns it reads; the
// rows it keeps go on with all of theirs.
func ExampleFilterRows() {
	type withCoupon struct {
		Coupon *string `arkflow:"coupon"`
	}
	hasCoupon := func(_ context.Context, c withCoupon) (bool, error) { return c.Coupon != nil, nil }
	welcome := "WELCOME"
	src := clickSource(Click{User: "ann", Amount: 12.5, Coupon: &welcome}, Click{User: "bob", Amount: 3}, Click{User: "cid", Amount: 1, Coupon: &welcome})

	b := arkflow.NewJob("coupons").Source("clicks", src)
	j, err := arkflow.FilterRows(b, "with-coupon", hasCoupon).
		Sink("out", funcsink.Func[Click](func(_ context.Context, rows []Click) error {
			for _, c := range rows {
				fmt.Println(c.User, c.Amount, *c.Coupon)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ann 12.5 WELCOME
	// cid 1 WELCOME
}

// A running count per user over Go structs, kept in keyed state: st is
// the state of the click's user (KeyBy("user")), and each click emits one
// row.
func ExampleProcessRows() {
	type UserCount struct {
		User   string  `arkflow:"user"`
		Clicks int64   `arkflow:"clicks"`
		Spent  float64 `arkflow:"spent"`
	}
	clicks := state.NewValue[int64]("clicks")
	spent := state.NewValue[float64]("spent")
	count := func(_ context.Context, st *state.Keyed, c Click) ([]UserCount, error) {
		n, _, err := clicks.Get(st) // 0 for a new user
		if err != nil {
			return nil, err
		}
		total, _, err := spent.Get(st)
		if err != nil {
			return nil, err
		}
		n, total = n+1, total+c.Amount
		if err := clicks.Set(st, n); err != nil {
			return nil, err
		}
		if err := spent.Set(st, total); err != nil {
			return nil, err
		}
		return []UserCount{{User: c.User, Clicks: n, Spent: total}}, nil
	}
	src := clickSource(Click{User: "ann", Amount: 10}, Click{User: "bob", Amount: 3}, Click{User: "ann", Amount: 2.5})

	b := arkflow.NewJob("counts").Source("clicks", src).KeyBy("user")
	j, err := arkflow.ProcessRows(b, "count", count).
		Sink("out", funcsink.Func[UserCount](func(_ context.Context, rows []UserCount) error {
			for _, r := range rows {
				fmt.Printf("%s: %d clicks, %.1f spent\n", r.User, r.Clicks, r.Spent)
			}
			return nil
		})).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// ann: 1 clicks, 10.0 spent
	// bob: 1 clicks, 3.0 spent
	// ann: 2 clicks, 12.5 spent
}
