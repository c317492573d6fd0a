package eventtime_test

import (
	"fmt"

	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Where a batch splits under advance per_row: 100 comes after 2100 made
// the watermark 2100, and 150 meets the same watermark, so one cut is
// enough; the in-order rows around them need none.
func ExampleTracker_Cuts() {
	tr := eventtime.NewTracker(&job.Watermark{Strategy: job.BoundedOutOfOrderness, Advance: job.AdvancePerRow}, []int{0}, 0)
	fmt.Println("per row:", tr.PerRow())
	ts := []int64{900, 2100, 100, 150, 2200}
	valid := []bool{true, true, true, true, true}
	for _, c := range tr.Cuts(0, ts, valid, nil) {
		fmt.Printf("before row %d (ts %d): watermark %d\n", c.Row, ts[c.Row], c.WM)
	}
	wm, _ := tr.Observe(0, 2200, 0) // then the whole batch, as under advance batch
	fmt.Println("after the batch:", wm)
	// Output:
	// per row: true
	// before row 2 (ts 100): watermark 2100
	// after the batch: 2200
}

// With all_idle advance, a tick while every partition is idle moves the
// watermark to now - all_idle_delay_ms - out_of_orderness_ms.
func ExampleTracker_Tick() {
	idle := int64(1000)
	tr := eventtime.NewTracker(&job.Watermark{Strategy: job.BoundedOutOfOrderness, OutOfOrdernessMS: 200,
		IdleTimeoutMS: &idle, AllIdle: job.AllIdleAdvance, AllIdleDelayMS: 5000}, []int{0}, 0)
	fmt.Println(tr.Observe(0, 10_000, 0))
	fmt.Println(tr.Tick(1_000))  // idle, but the clock is behind: held
	fmt.Println(tr.Tick(20_000)) // 20,000 - 5,000 - 200
	// Output:
	// 9800 true
	// 9800 false
	// 14800 true
}
