package durable_test

import (
	"encoding/json"
	"strings"
	"testing"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// TestValidateReportsJobWideProblemOnce: a bad job-wide durability block is
// inherited by every source, but the validator reports it once, at
// durability.sync and without an operator.
func TestValidateReportsJobWideProblemOnce(t *testing.T) {
	t.Parallel()
	gen := json.RawMessage(`{"fields":[{"name":"k","type":"int64"}]}`)
	spec := &job.Spec{
		ID: "j",
		Operators: []job.Operator{
			{ID: "a", Kind: job.KindSource}, {ID: "b", Kind: job.KindSink},
			{ID: "x", Kind: job.KindSource}, {ID: "y", Kind: job.KindSink},
		},
		Edges: []job.Edge{{ID: "ab", From: "a", To: "b"}, {ID: "xy", From: "x", To: "y"}},
		Sources: []job.Source{
			{OperatorID: "a", InputType: "generate", Config: gen},
			{OperatorID: "x", InputType: "generate", Config: gen},
		},
		Sinks: []job.Sink{
			{OperatorID: "b", OutputType: "drop"},
			{OperatorID: "y", OutputType: "drop"},
		},
		Durability: json.RawMessage(`{"sync":"sometimes"}`),
	}
	err := arkflow.Validate(spec)
	if err == nil {
		t.Fatal("Validate accepted a bad job-wide sync")
	}
	ves := job.AsValidationErrors(err)
	if len(ves) == 0 {
		t.Fatalf("error is not ValidationErrors: %v", err)
	}
	var hits []*job.ValidationError
	for _, ve := range ves {
		if strings.Contains(ve.Field, "durability") {
			hits = append(hits, ve)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("durability problems reported %d times, want once:\n%v", len(hits), err)
	}
	if hits[0].Field != "durability.sync" || hits[0].Operator != "" || !strings.Contains(hits[0].Reason, `"sometimes"`) {
		t.Errorf("problem %+v, want field durability.sync, no operator, reason naming the value", *hits[0])
	}
	if len(ves) != 1 {
		t.Errorf("other problems reported too:\n%v", err)
	}

	// The same spec with a good block validates.
	spec.Durability = json.RawMessage(`{"sync":"per_entry"}`)
	if err := arkflow.Validate(spec, arkflow.WithDataDir(t.TempDir())); err != nil {
		t.Fatalf("valid spec rejected: %v", err)
	}
}
