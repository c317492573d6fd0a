package windowop

import (
	"math/rand/v2"
	"testing"
)

// sortByEnd against a reference: the rows ordered by (end, seq) by a
// plain insertion sort, over spans that take either of its paths.
func TestSortByEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var counts []int32
	for trial := range 500 {
		n := 1 + rng.IntN(300)
		span := int64(1 + rng.IntN(8*n))
		base := rng.Int64N(1<<62) - 1<<61
		if trial%50 == 0 {
			base = -1 << 63 // ends at the bottom of the range
		}
		rows := make([]*keptRow, n)
		for i := range rows {
			rows[i] = &keptRow{end: base + rng.Int64N(span), seq: int64(i)}
		}
		want := append([]*keptRow(nil), rows...)
		for i := 1; i < len(want); i++ {
			for j := i; j > 0 && (want[j].end < want[j-1].end || want[j].end == want[j-1].end && want[j].seq < want[j-1].seq); j-- {
				want[j], want[j-1] = want[j-1], want[j]
			}
		}
		got := sortByEnd(rows, &counts)
		for i := range got {
			if got[i].row != want[i] || got[i].end != want[i].end || got[i].seq != want[i].seq {
				t.Fatalf("trial %d (n %d, span %d): position %d holds (end %d, seq %d), want (end %d, seq %d)",
					trial, n, span, i, got[i].end, got[i].seq, want[i].end, want[i].seq)
			}
		}
	}
}
