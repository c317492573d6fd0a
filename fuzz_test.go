package arkflow_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// FuzzSpec feeds arbitrary bytes to the spec parser and, when they parse,
// to the deep validation and the planner: no input may panic, and a spec
// that validates must plan and re-parse from its own JSON.
func FuzzSpec(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yaml", "job/testdata/*.json", "cmd/arkflow/testdata/*"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			if b, err := os.ReadFile(path); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"id":"x","operators":[{"id":"a","kind":"source"},{"id":"b","kind":"sink"}],"edges":[{"id":"e","from":"a","to":"b","partitioned":true}],"sources":[{"operator_id":"a","input_type":"generate","config":{"fields":[{"name":"k","type":"int64"}]}}],"sinks":[{"operator_id":"b","output_type":"drop"}]}`))
	f.Add([]byte("id: y\noperators: [{id: a, kind: window}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := job.Parse(data)
		if err != nil {
			if len(job.AsValidationErrors(err)) == 0 {
				t.Fatalf("Parse returned an error that is not ValidationErrors: %v", err)
			}
			return
		}
		plan, err := compile(spec)
		if err != nil {
			return
		}
		raw, err := plan.Spec.JSON()
		if err != nil {
			t.Fatalf("a valid spec does not encode: %v", err)
		}
		again, err := job.Parse(raw)
		if err != nil {
			t.Fatalf("a valid spec's JSON does not parse: %v\n%s", err, raw)
		}
		if _, err := compile(again); err != nil {
			t.Fatalf("a valid spec's JSON does not validate: %v\n%s", err, raw)
		}
	})
}
