package hub

import (
	"fmt"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// TestFixedParallelism: an upgrade may not change the parallelism of an
// operator keyed by co-partitioning (keyed_by), whose state is kept per
// subtask; other operators' may change.
func TestFixedParallelism(t *testing.T) {
	t.Parallel()
	spec := func(par int, keyedBy string) *job.Spec {
		s, err := job.Parse(fmt.Appendf(nil, `{"id":"j","parallelism":%d,"operators":[{"id":"in","kind":"source"},
		  {"id":"agg","kind":"aggregate","key_field":"user","config":{"aggregates":[{"function":"count"}]}},{"id":"out","kind":"sink"}],
		 "edges":[{"id":"1","from":"in","to":"agg","partitioned":%t},{"id":"2","from":"agg","to":"out"}],
		 "sources":[{"operator_id":"in","input_type":"memory","keyed_by":%q}],"sinks":[{"operator_id":"out","output_type":"drop"}]}`,
			par, keyedBy == "", keyedBy))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := fixedParallelism(spec(2, "user"), spec(3, "user")); fmt.Sprint(got) != "[agg from 2 to 3]" {
		t.Fatalf("co-partitioned 2 → 3: %v", got)
	}
	if got := fixedParallelism(spec(2, "user"), spec(2, "user")); len(got) != 0 {
		t.Fatalf("co-partitioned, same parallelism: %v", got)
	}
	if got := fixedParallelism(spec(2, ""), spec(3, "")); len(got) != 0 {
		t.Fatalf("partitioned edge 2 → 3: %v", got)
	}
}
