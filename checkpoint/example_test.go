package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A job that checkpoints to a MinIO bucket: the spec names the bucket and
// prefix, StoreOptions name the endpoint and credentials. Validation
// checks them without any I/O; the bucket must exist before the job runs.
func ExampleStoreOptions() {
	spec, err := job.Parse([]byte(`
id: orders
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: e, from: in, to: out}
sources:
  - {operator_id: in, input_type: generate, config: {count: 10, fields: [{name: n, type: int64}]}}
sinks:
  - {operator_id: out, output_type: drop}
state: {backend: memory}
checkpoint: {interval_ms: 10000, object_store_uri: "s3://arkflow/orders"}
`))
	if err != nil {
		panic(err)
	}
	minio := checkpoint.StoreOptions{
		Endpoint:        "http://127.0.0.1:9000", // plain HTTP only because it says so
		AccessKeyID:     "minioadmin",
		SecretAccessKey: "minioadmin",
	}
	fmt.Println("valid:", arkflow.Validate(spec, arkflow.WithCheckpointStore(minio)))

	// A secret key without its key id is refused, not replaced by the
	// environment's credentials.
	err = arkflow.Validate(spec, arkflow.WithCheckpointStore(checkpoint.StoreOptions{Endpoint: "127.0.0.1:9000", SecretAccessKey: "minioadmin"}))
	var ve job.ValidationErrors
	if errors.As(err, &ve) {
		fmt.Println("field:", ve[0].Field)
	}
	// Output:
	// valid: <nil>
	// field: checkpoint.object_store_uri
}

// Reading a store: the checkpoints and savepoints a job took, and
// whether the next version of the job may start from its savepoint.
func ExampleCheck() {
	dir, err := os.MkdirTemp("", "ckpt-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	spec := func(version int, format int) *job.Spec {
		s, err := job.Parse(fmt.Appendf(nil, `
id: orders
version: %d
state: {backend: memory, format_version: %d}
checkpoint: {interval_ms: 3600000, object_store_uri: "file://%s"}
operators:
  - {id: in, kind: source}
  - {id: per-user, kind: window, key_field: user, config: {window: {type: tumbling, size_ms: 1000}, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: per-user, partitioned: true}
  - {id: b, from: per-user, to: out}
sources:
  - operator_id: in
    input_type: generate
    config: {rate_per_sec: 1000, fields: [{name: user, type: string, cardinality: 5}, {name: ts, type: timestamp, step_ms: 1}]}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 100}}
sinks:
  - {operator_id: out, output_type: drop}
`, version, format, dir))
		if err != nil {
			panic(err)
		}
		return s
	}

	// Version 1 runs, takes a checkpoint and the savepoint "before-v2".
	j, err := arkflow.FromSpec(spec(1, 1))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	for j.Status() < arkflow.Running {
		time.Sleep(time.Millisecond)
	}
	if _, err := j.Checkpoint(ctx); err != nil {
		panic(err)
	}
	if err := j.Savepoint(ctx, "before-v2"); err != nil {
		panic(err)
	}
	j.Stop(ctx)
	<-done

	store, err := checkpoint.Open(ctx, "file://"+dir, checkpoint.StoreOptions{})
	if err != nil {
		panic(err)
	}
	list, err := store.List(ctx, "orders")
	if err != nil {
		panic(err)
	}
	for _, a := range list {
		fmt.Println(a.Kind, a.ID, "version", a.JobVersion, "completed", a.Completed, "latest", a.Latest, "tasks", len(a.Tasks))
	}
	fmt.Println("version 2:", checkpoint.Check(ctx, store, checkpoint.KindSavepoint, "before-v2", spec(2, 1), checkpoint.CheckOptions{}))
	err = checkpoint.Check(ctx, store, checkpoint.KindSavepoint, "before-v2", spec(2, 2), checkpoint.CheckOptions{})
	var refused *checkpoint.RefusedError
	if errors.As(err, &refused) {
		fmt.Println("version 2 with state format 2:", refused.Reason)
	}
	// Output:
	// checkpoint 00000000000000000001 version 1 completed true latest true tasks 3
	// savepoint before-v2 version 1 completed true latest false tasks 3
	// version 2: <nil>
	// version 2 with state format 2: selecting a checkpoint to restore: checkpoint: savepoint "before-v2" was written by job version 1 with state format 1; this job is version 2 with format 2: a state format change has no migration path (start without state, or run the version that wrote it)
}
