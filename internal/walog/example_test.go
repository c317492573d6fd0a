package walog_test

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// ExampleOpenDir appends three entries, acknowledges two of them out of
// order, and shows what a restart replays: only the entry after the
// cursor.
func ExampleOpenDir() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := walog.OpenDir(dir, walog.LocalOptions{Options: walog.Options{Sync: walog.SyncGroupCommit}})
	if err != nil {
		panic(err)
	}
	for _, msg := range []string{"first", "second", "third"} {
		seq, err := l.Append(ctx, []byte(msg)) // durable when it returns
		if err != nil {
			panic(err)
		}
		fmt.Println("appended", seq, msg)
	}
	l.Ack(2)
	fmt.Println("cursor after ack 2:", l.Cursor()) // 1 is still in flight
	l.Ack(1)
	fmt.Println("cursor after ack 1:", l.Cursor())
	if err := l.Close(); err != nil { // syncs and persists the cursor
		panic(err)
	}

	l, err = walog.OpenDir(dir, walog.LocalOptions{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	r, err := l.Replay()
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("replayed %d %s\n", e.Seq, e.Payload)
	}
	// Output:
	// appended 1 first
	// appended 2 second
	// appended 3 third
	// cursor after ack 2: 0
	// cursor after ack 1: 2
	// replayed 3 third
}

// With Options.Hold, entries the cursor has passed stay until the floor
// passes them too: a restore that needs them (its checkpoint is older than
// the cursor) reads them with ReplayFrom.
func ExampleLog_ReplayFrom() {
	dir, err := os.MkdirTemp("", "wal-hold")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	l, err := walog.OpenDir(dir, walog.LocalOptions{Options: walog.Options{Hold: true}})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for _, msg := range []string{"a", "b", "c"} {
		if _, err := l.Append(ctx, []byte(msg)); err != nil {
			panic(err)
		}
	}
	l.Ack(1)
	l.Ack(2)
	l.SetFloor(2) // a checkpoint holds entry 1: it may go; 2 stays
	fmt.Println("cursor", l.Cursor(), "floor", l.Floor())
	r, err := l.ReplayFrom(l.Floor())
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("kept %d %s\n", e.Seq, e.Payload)
	}
	// Output:
	// cursor 2 floor 2
	// kept 2 b
	// kept 3 c
}
