package stream

import "testing"

func TestPathLessComparesIndicesAsNumbers(t *testing.T) {
	ordered := []string{"", "health_check.address", "streams", "streams[2].input", "streams[2].input.brokers", "streams[10].buffer", "streams[10].pipeline.processors[9]", "streams[10].pipeline.processors[10]"}
	for i := range ordered {
		for j := range ordered {
			if got := pathLess(ordered[i], ordered[j]); got != (i < j) {
				t.Errorf("pathLess(%q, %q) = %v", ordered[i], ordered[j], got)
			}
		}
	}
}
