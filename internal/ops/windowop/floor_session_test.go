package windowop

import (
	"time"

	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A session still open when another key's session fired and moved the
// floor past its first rows: after a restart its rows are replayed (they
// were never acknowledged) and must all count again, although some lie
// below the floor. The floor marks what fired; an open session did not.
func TestFloorKeepsRowsOfOpenSessions(t *testing.T) {
	t.Parallel()
	store := statestore.NewMemory()
	d := Session(500*time.Millisecond, job.Count("n"))
	inst := newInstanceOn(t, d, job.LateDrop, 0, store)
	var out collector
	watermark(t, inst, &out, 0)
	process(t, inst, &out, row{k: "b", ts: at(0), v: 1})
	aRows := []row{{k: "a", ts: at(100), v: 1}, {k: "a", ts: at(400), v: 1}, {k: "a", ts: at(700), v: 1}}
	held := process(t, inst, &out, aRows...)
	watermark(t, inst, &out, 600) // b's session [0, 500) fires; a's [100, 1200) stays open
	if main, _ := out.write(); main != 1 {
		t.Fatalf("%d rows fired at watermark 600, want b's", main)
	}
	held.wantPending(t, "a's session is open")
	if wm, _, err := newFloor(store, "j", "w", 0).load(0); err != nil || wm != 600 {
		t.Fatalf("floor %d, %v; want 600", wm, err)
	}
	// The restart: a new instance on the same store replays a's batch.
	_ = inst.Close()
	inst = newInstanceOn(t, d, job.LateDrop, 0, store)
	defer inst.Close()
	process(t, inst, &out, aRows...)
	watermark(t, inst, &out, 5000)
	var n int64 = -1
	for _, b := range out.got {
		ks := b.Rec.Column(0).(*array.String)
		cnt := b.Rec.Column(b.Rec.Schema().FieldIndices("n")[0]).(*array.Int64)
		for i := 0; i < ks.Len(); i++ {
			if ks.Value(i) == "a" {
				n = cnt.Value(i)
			}
		}
	}
	out.write()
	if n != 3 {
		t.Fatalf("after the restart a's session counted %d rows, want 3 (dropped as late against the floor of another key's firing?)", n)
	}
}
