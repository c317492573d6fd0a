package eventtime

// Advance raises the watermark candidate of some of a source subtask's
// partitions to Watermark (Unix ms), as if they had delivered an event
// whose time makes that their candidate: the source promises no earlier
// event on them. Partitions nil means every partition of the subtask. It
// is ignored by sources without event time.
//
// Sources deliver advances in band with their batches (the test harness's
// inputs do, through the runtime's ControlReader); it lives here, with the
// watermarks it moves, so that a wrapper of a source (the write-ahead log
// of internal/durable) can pass advances through without importing the
// runtime.
type Advance struct {
	Partitions []int
	Watermark  int64
}
