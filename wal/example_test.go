package wal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// A job whose source has a write-ahead log: a second run over the same
// log resumes after what the first one read, and a log whose cursor is
// damaged stops the job with an error matching ErrCorrupt.
func Example() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	run := func() (int64, error) {
		out := mem.NewSink()
		j, err := arkflow.NewJob("durable").
			Durability(job.Durability{Path: dir, Sync: job.SyncGroupCommit}).
			Source("in", generate.Config{Count: 100, BatchSize: 10, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
			Sink("out", out).
			Build()
		if err != nil {
			return 0, err
		}
		err = j.Run(context.Background())
		return out.NumRows(), err
	}
	n, err := run()
	fmt.Println("first run:", n, "rows", err)
	n, err = run()
	fmt.Println("second run:", n, "rows", err)

	// Damage both cursor slots of subtask 0's log (see ARCHITECTURE.md
	// for the layout).
	for _, slot := range []string{"CURSOR.0", "CURSOR.1"} {
		if err := os.WriteFile(filepath.Join(dir, "in", "0", slot), []byte("junk"), 0o644); err != nil {
			panic(err)
		}
	}
	_, err = run()
	fmt.Println("damaged:", errors.Is(err, wal.ErrCorrupt))
	// Output:
	// first run: 100 rows <nil>
	// second run: 0 rows <nil>
	// damaged: true
}

// Inspect describes the logs of a job's WAL directory as a restart would
// find them: here, after a run that acknowledged everything it read.
func ExampleInspect() {
	dir, err := os.MkdirTemp("", "wal-inspect")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	j, err := arkflow.NewJob("durable").
		Durability(job.Durability{Path: dir}).
		Source("in", generate.Config{Count: 100, BatchSize: 25, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		panic(err)
	}
	if err := j.Run(context.Background()); err != nil {
		panic(err)
	}

	logs, err := wal.Inspect(context.Background(), dir, wal.InspectOptions{Entries: true})
	if err != nil {
		panic(err)
	}
	for _, l := range logs {
		fmt.Printf("source %s subtask %d: entries %d..%d, cursor %d, %d pending, resume at offset %d\n",
			l.Source, l.Subtask, l.First, l.Last, l.Cursor, l.Pending, l.Positions[0].Offset)
		fmt.Println("first entry:", l.Entries[0].Seq, l.Entries[0].Source)
	}
	// Output:
	// source in subtask 0: entries 1..4, cursor 4, 0 pending, resume at offset 100
	// first entry: 1 in
}
