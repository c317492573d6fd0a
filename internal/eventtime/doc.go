// Package eventtime is the event-time arithmetic shared by the runtime and
// the window operator: converting time columns to Unix milliseconds
// (flooring sub-millisecond digits, failing on overflow), the
// per-partition watermark tracker of a source subtask (idle partitions,
// all_idle advance, per-row cuts), and window boundary arithmetic that
// floors toward −∞ and enumerates every sliding window of a timestamp.
//
// Watermarks are int64 milliseconds; NoWatermark is the watermark before
// any is known and EndOfTime that of an ended input. They are the only
// watermark sentinels: the runtime and the operators use these.
package eventtime
