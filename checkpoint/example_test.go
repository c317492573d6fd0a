package checkpoint_test

import (
	"errors"
	"fmt"

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
