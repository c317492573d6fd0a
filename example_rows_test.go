package arkflow_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Click is an input row: each field is a column, named by its tag.
type Click struct {
	User   string    `arkflow:"user"`
	At     time.Time `arkflow:"ts"` // timestamp[ms, tz=UTC]
	Amount float64   `arkflow:"amount"`
	Coupon *string   `arkflow:"coupon"` // nullable: nil is null
}

// UserMinute is a window's output row. User and Clicks match the columns
// "user" and "clicks" ignoring case; the window's other columns
// (__arkflow_window_update) are ignored.
type UserMinute struct {
	User   string
	Start  time.Time `arkflow:"window_start"`
	End    time.Time `arkflow:"window_end"`
	Clicks int64
	Total  float64
}

func ExampleSchemaOf() {
	type Base struct {
		ID int64 `arkflow:"id"`
	}
	type Order struct {
		Base                            // embedded: its fields are Order's columns
		Customer string                 `arkflow:"customer"`
		Placed   time.Time              `arkflow:"placed,unit=us"`
		Shipped  *time.Time             `arkflow:"shipped"`
		Note     sql.NullString         `arkflow:"note"`
		Wait     time.Duration          `arkflow:"wait,unit=s"`
		Lines    map[string]int         `arkflow:"-"` // skipped
		cache    map[string]interface{} // unexported: skipped
	}
	schema, err := arkflow.SchemaOf[Order]()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range schema.Fields() {
		fmt.Printf("%s %s nullable=%v\n", f.Name, f.Type, f.Nullable)
	}
	// Output:
	// id int64 nullable=false
	// customer utf8 nullable=false
	// placed timestamp[us, tz=UTC] nullable=false
	// shipped timestamp[ms, tz=UTC] nullable=true
	// note utf8 nullable=true
	// wait duration[s] nullable=false
}

// A field the mapping cannot hold is refused with its Go path and type.
func ExampleSchemaOf_refused() {
	type Geo struct{ Lat, Lon float64 }
	type Visit struct {
		User string
		Geo  Geo
	}
	_, err := arkflow.SchemaOf[Visit]()
	fmt.Println(err)
	// Output:
	// typed: Visit.Geo (arkflow_test.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"
}

func ExampleEncode() {
	coupon := "WELCOME"
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rec, err := arkflow.Encode([]Click{
		{User: "ann", At: at, Amount: 12.5, Coupon: &coupon},
		{User: "bob", At: at.Add(time.Second), Amount: 3},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Release()
	fmt.Println(rec.NumRows(), "rows")
	for i, col := range rec.Columns() {
		fmt.Printf("%s %s: %v\n", rec.ColumnName(i), col.DataType(), col)
	}
	// Output:
	// 2 rows
	// user utf8: ["ann" "bob"]
	// ts timestamp[ms, tz=UTC]: [1796115600000 1796115601000]
	// amount float64: [12.5 3]
	// coupon utf8: ["WELCOME" (null)]
}

// Typed rows in and out of a job: clicks are encoded into the source's
// batches, and the window's results decoded from the sink's.
func ExampleDecode() {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var in []arrow.RecordBatch
	for _, clicks := range [][]Click{
		{
			{User: "ann", At: at.Add(5 * time.Second), Amount: 10},
			{User: "bob", At: at.Add(20 * time.Second), Amount: 4},
			{User: "ann", At: at.Add(50 * time.Second), Amount: 2.5},
		},
		{{User: "ann", At: at.Add(70 * time.Second), Amount: 1}}, // the watermark passes 09:01
	} {
		rec, err := arkflow.Encode(clicks)
		if err != nil {
			log.Fatal(err)
		}
		in = append(in, rec)
	}
	src, err := mem.NewSourceFrom(in)
	if err != nil {
		log.Fatal(err)
	}
	out := mem.NewSink()
	j, err := arkflow.NewJob("clicks").
		Source("clicks", src, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("per-minute", window.Tumbling(time.Minute, job.Count("clicks"), job.Sum("amount", "total"))).
		Sink("out", out).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, rec := range out.Records() {
		rows, err := arkflow.Decode[UserMinute](rec)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range rows {
			fmt.Printf("%s %s-%s clicks=%d total=%.1f\n", r.User, r.Start.Format("15:04"), r.End.Format("15:04"), r.Clicks, r.Total)
		}
	}
	// Output:
	// ann 09:00-09:01 clicks=2 total=12.5
	// bob 09:00-09:01 clicks=1 total=4.0
	// ann 09:01-09:02 clicks=1 total=1.0
}

// DecodeInto appends to a slice, so one buffer serves every batch.
func ExampleDecodeInto() {
	type Reading struct {
		Sensor string
		Value  *float64 // null when the sensor had no reading
	}
	v := 21.5
	batches := make([]arrow.RecordBatch, 0, 2)
	for _, rows := range [][]Reading{{{"a", &v}, {"b", nil}}, {{"c", &v}}} {
		rec, err := arkflow.Encode(rows)
		if err != nil {
			log.Fatal(err)
		}
		defer rec.Release()
		batches = append(batches, rec)
	}
	var buf []Reading
	for _, rec := range batches {
		var err error
		if buf, err = arkflow.DecodeInto(rec, buf[:0]); err != nil {
			log.Fatal(err)
		}
		for _, r := range buf {
			if r.Value == nil {
				fmt.Println(r.Sensor, "null")
			} else {
				fmt.Println(r.Sensor, *r.Value)
			}
		}
	}
	// Output:
	// a 21.5
	// b null
	// c 21.5
}
