// Package windowop is the window operator: tumbling, sliding and session
// windows with aggregates, fired by the watermark, and the late-event
// policies drop, route and update. Users define windows
// with the public window package, whose Definition marshals to Config;
// internal/build maps job.KindWindow to Build.
//
// Windows are half-open, [start, end); tumbling and sliding windows start
// at multiples of their size or slide; a session window spans [first
// event, last event + gap) and merges with any session an event bridges.
// A window fires once the operator's watermark (the minimum over its
// inputs) reaches its end. An event is late for a window when the
// watermark has already reached that window's end; it is past the deadline
// once the watermark reaches end + allowed_lateness_ms. Late events are
// dropped (counted and warned about), routed to the sink named by
// late_event_route (ops.PortLate), or, under update, change the window's
// aggregate and re-emit its row with ColumnUpdate = true until the
// deadline. Given the same input in the same order, a window operator
// produces the same output, byte for byte.
//
// By default the watermark moves with a whole batch before its rows are
// classified, so with out_of_orderness_ms 0 the batch [900, 1100] with 1 s
// windows makes 900 late; advance "per_row" cuts batches instead
// (eventtime.Tracker.Cuts).
//
// Input acknowledgements are held until every window a batch fed has
// fired and its output was acknowledged; the watermark floor (floor.go)
// keeps rows replayed after a restart out of windows that already fired.
// Such rows are skipped and counted as replays (MetricReplayedSkipped),
// not as late: the floor puts their windows behind the operator's
// watermark, the input's own watermark does not (base.replayOf). The
// runtime keeps the floors across restores and rescales through
// ops.Carrier, which Build's result carries.
//
// The rules in full are in ARCHITECTURE.md ("Event time").
package windowop
