package sql_test

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/sql"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Per-user totals per second of event time, upserted into an SQLite table
// on (user, window_start): the late event's update replaces its window's
// row instead of adding one.
func Example() {
	dir, err := os.MkdirTemp("", "sql-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "totals.db")
	db, err := dbsql.Open("sqlite", path) // the driver the package registers
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE totals (user TEXT, window_start TEXT, n INTEGER, total INTEGER,
		PRIMARY KEY (user, window_start))`); err != nil {
		log.Fatal(err)
	}

	j, err := arkflow.NewJob("totals").
		Source("payments", payments(), arkflow.EventTime{Field: "ts", AllowedLateness: 500 * time.Millisecond, LateUpdate: true}).
		KeyBy("user").
		Window("per-second", window.Tumbling(time.Second, job.Count("n"), job.Sum("amount", "total"))).
		Sink("out", sql.SinkConfig{
			Database:  sql.DB{Type: sql.SQLite, Path: path},
			TableName: "totals",
			Mode:      sql.ModeUpsert,
			Keys:      []string{"user", "window_start"},
			Columns:   []string{"user", "window_start", "n", "total"},
		}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	rows, err := db.Query("SELECT user, window_start, n, total FROM totals ORDER BY window_start, user")
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var user, start string
		var n, total int64
		if err := rows.Scan(&user, &start, &n, &total); err != nil {
			log.Fatal(err)
		}
		fmt.Println(user, start, n, total)
	}
	// Output:
	// ann 1970-01-01T00:00:00.000Z 3 16
	// bob 1970-01-01T00:00:00.000Z 1 7
	// bob 1970-01-01T00:00:01.000Z 1 3
}

// payments is a bounded source of (user, ts, amount) rows: the last one is
// late for its window, within the allowed lateness.
func payments() *mem.Source {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	batch := func(users []string, ts []int64, amounts []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues(users, nil)
		for _, t := range ts {
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t))
		}
		b.Field(2).(*array.Int64Builder).AppendValues(amounts, nil)
		return b.NewRecordBatch()
	}
	src, err := mem.NewSourceFrom([]arrow.RecordBatch{
		batch([]string{"ann", "bob", "ann"}, []int64{100, 300, 900}, []int64{5, 7, 1}),
		batch([]string{"bob"}, []int64{1200}, []int64{3}), // watermark 1200: [0,1s) fires
		batch([]string{"ann"}, []int64{400}, []int64{10}), // late: updates ann's [0,1s)
	})
	if err != nil {
		log.Fatal(err)
	}
	return src
}

// Events polled from PostgreSQL by their id, counted per user and minute,
// and upserted into another table over TLS: with checkpoints, a restart
// resumes the input at the checkpoint's ids and writes the windows after
// it again, into the same rows (compile-only: it needs a server).
func ExampleSourceConfig() {
	tls := &sql.SSL{SSLMode: "verify-full", RootCert: "/etc/ssl/db-ca.pem"}
	db := sql.DB{Type: sql.Postgres, URI: "postgres://app@db.example.com:5432/app", SSL: tls}
	j, err := arkflow.NewJob("clicks-per-minute").
		Checkpoint(job.Checkpoint{IntervalMS: 10_000, ObjectStoreURI: "file:///var/lib/arkflow/checkpoints"}).
		Source("clicks", sql.SourceConfig{
			Database:       db,
			TableName:      "clicks",
			TrackingColumn: "id",
			Schema: connectors.Schema{
				{Name: "id", Type: "int64"}, {Name: "user", Type: "string"}, {Name: "at", Type: "timestamp"},
			},
		}, arkflow.EventTime{Field: "at", OutOfOrderness: 5 * time.Second}).
		KeyBy("user").
		Window("per-minute", window.Tumbling(time.Minute, job.Count("clicks"))).
		Sink("out", sql.SinkConfig{
			Database:  db,
			TableName: "clicks_per_minute",
			Mode:      sql.ModeUpsert,
			Keys:      []string{"user", "window_start"},
			Columns:   []string{"user", "window_start", "window_end", "clicks"},
		}).
		Build(arkflow.WithDataDir("/var/lib/arkflow/data"))
	if err != nil {
		log.Fatal(err) // every config problem at once, e.g. .Sink("out", ...): keys
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
