package specpath

import (
	"slices"
	"testing"
)

// Less orders paths as a spec lays them out: job fields, then each section
// in order, by index within it; "operators[10]" after "operators[9]".
func TestLessOrdersAsTheSpec(t *testing.T) {
	t.Parallel()
	want := []string{"id", "parallelism", "operators", "operators[2].config", "operators[9]", "operators[10].id",
		"edges[0].to", "sources[1].time", "sinks[0]", "state.backend", "checkpoint.interval_ms", "recovery"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortStableFunc(got, func(a, b string) int {
		switch {
		case Less(a, b):
			return -1
		case Less(b, a):
			return 1
		}
		return 0
	})
	// "id" and "parallelism" rank equal; the stable sort keeps them reversed.
	if got[0] != "parallelism" || got[1] != "id" || !slices.Equal(got[2:], want[2:]) {
		t.Fatalf("sorted %q, want %q (job fields in any order first)", got, want)
	}
}
