package arkflow

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Job.Plan hands out a copy: nothing reachable from it is memory of the
// plan the job runs, so a caller that edits it changes nothing.
func TestJobPlanIsACopy(t *testing.T) {
	t.Parallel()
	j, err := NewJob("plan-copy").Parallelism(2).
		Source("in", generate.Config{Seed: 1, Count: 10, Partitions: 2, Fields: []generate.Field{{Name: "user", Type: "string", Cardinality: 3}}}).
		KeyBy("user").
		Aggregate("n", job.Running(job.Count("n"))).
		Sink("out", memory.NewSink()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(j.plan)
	p := j.Plan()
	shared(t, "Plan", reflect.ValueOf(p), reflect.ValueOf(j.plan))

	// Edit everything an edit can reach.
	p.JobID, p.MaxParallelism = "other", 1
	p.Tasks[0].Partitions[0].KeyGroup.Start = 99
	p.Chains[0].Operators[0] = "x"
	p.Edges[0].Partitioned = !p.Edges[0].Partitioned
	p.PlacementUnits[0].Tasks[0] = "x"
	p.Spec.Operators[0].ID = "x"
	p.Spec.Sources[0].Config[0] = ' '
	if after, _ := json.Marshal(j.plan); string(after) != string(before) {
		t.Fatalf("editing the plan Job.Plan returned changed the job's plan:\n%s\n%s", before, after)
	}
}

// shared fails when a and b, of the same type, share a pointer, a slice's
// array or a map anywhere inside.
func shared(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares the pointer", path)
			return
		}
		shared(t, path, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares the slice's array", path)
			return
		}
		for i := range min(a.Len(), b.Len()) {
			shared(t, path+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			t.Errorf("%s: the copy shares the map", path)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				shared(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
			}
		}
	}
}
