package ckptstore_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// A checkpoint is written and committed, then selected and read back.
func ExampleCatalog() {
	dir, _ := os.MkdirTemp("", "ckpt-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := ckptstore.OpenStore(ctx, "file://"+dir, ckptstore.StoreOptions{})
	if err != nil {
		panic(err)
	}
	cat, err := ckptstore.NewCatalog(store, "orders", ckptstore.Options{Retention: 3})
	if err != nil {
		panic(err)
	}
	tasks := []string{"count-0", "src-0"}

	id, _ := cat.NextID(ctx)
	m := &ckptstore.Manifest{
		CheckpointID:  id.String(),
		Kind:          ckptstore.KindCheckpoint,
		JobVersion:    1,
		FormatVersion: 1,
		PlannedTasks:  tasks,
		TaskAttempts: []ckptstore.TaskAttempt{
			{TaskID: "count-0", AttemptID: "count-0:node-a:1", NodeID: "node-a"},
			{TaskID: "src-0", AttemptID: "src-0:node-a:1", NodeID: "node-a"},
		},
		SourcePositions: []ckptstore.SourcePosition{{TaskID: "src-0", Topic: "orders", Partition: 0, Offset: 42}},
		WatermarksMS:    map[string]int64{"count-0": 1000},
	}
	entry, err := cat.PutState(ctx, ckptstore.KindCheckpoint, id.String(), "count-0", strings.NewReader("state bytes"))
	if err != nil {
		panic(err)
	}
	m.StateSnapshots = append(m.StateSnapshots, entry)
	if err := cat.Commit(ctx, m); err != nil {
		panic(err)
	}

	got, skipped, err := cat.Select(ctx, ckptstore.Want{
		Target:        ckptstore.LatestCheckpoint,
		JobVersion:    2, // an upgrade restores an older version's checkpoint
		FormatVersion: 1,
		PlannedTasks:  tasks,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("selected", got.CheckpointID, "skipped", len(skipped))
	fmt.Println("resume src-0 at offset", got.SourcePositions[0].Offset)
	r, err := cat.OpenState(ctx, got.StateSnapshots[0])
	if err != nil {
		panic(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	fmt.Printf("%s: %q %v\n", got.StateSnapshots[0].URI, b, err)
	// Output:
	// selected 00000000000000000001 skipped 0
	// resume src-0 at offset 42
	// orders/checkpoints/00000000000000000001/state/count-0.snap: "state bytes" <nil>
}
