package windowop_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/datadriven"
)

// Advance per_row classifies each row as if it had come in a
// batch of its own. Every one-partition golden case, run per row on its
// batches, writes what it writes under advance batch on one-row batches:
// the same rows (late rows the same, routed the same) and the same
// counters. Under the update policy only the counters are compared: a
// window updated by two late rows of one batch is emitted once, by two
// one-row batches twice, whatever the advance.
func TestPerRowIsOneRowAtATime(t *testing.T) {
	t.Parallel()
	skipIfRewriting(t)
	compared := 0
	runGolden(t, func(t *testing.T, d *datadriven.TestData, c goldenCase) string {
		p := c.p
		if len(p.parts) != 1 {
			return d.Expected // round robin over partitions depends on the batches
		}
		perRow := p
		perRow.perRow = true
		oneByOne := p
		oneByOne.perRow = false
		oneByOne.parts = [][]arrow.RecordBatch{nil}
		for _, b := range p.parts[0] {
			for i := int64(0); i < b.NumRows(); i++ {
				oneByOne.parts[0] = append(oneByOne.parts[0], b.NewSlice(i, i+1))
			}
		}
		a, b := perRow.run(t), oneByOne.run(t)
		if a.err != nil || b.err != nil {
			if (a.err == nil) != (b.err == nil) {
				t.Fatalf("per row: %v; one row at a time: %v", a.err, b.err)
			}
			return d.Expected
		}
		compared++
		if ga, gb := gaugeLine(a.gauges), gaugeLine(b.gauges); ga != gb {
			t.Errorf("metrics:\nper row         %s\none at a time   %s", ga, gb)
		}
		if c.policy == "update" {
			return d.Expected
		}
		for _, x := range []struct {
			what string
			a, b []arrow.RecordBatch
		}{{"output", a.out, b.out}, {"late rows", a.late, b.late}} {
			ra, rb := strings.Join(rowsOf(t, x.a), "\n"), strings.Join(rowsOf(t, x.b), "\n")
			if ra != rb {
				t.Errorf("%s:\n--- per row\n%s\n--- one row at a time\n%s", x.what, ra, rb)
			}
		}
		// The golden output is checked by TestGolden; here it is only
		// passed through.
		return d.Expected
	})
	if compared < 20 {
		t.Fatalf("only %d cases compared", compared)
	}
}
