// Package arkflow runs stateful stream jobs inside a Go program: a small
// Flink that embeds like a library, speaks ArkFlow's job format, and can
// join a fleet managed by a Hub control plane.
//
// A job is a graph of operators with stable IDs — sources, maps, filters,
// keyed aggregates and windows, sinks — over Apache Arrow record batches.
// Build one in Go with NewJob, or load a declarative spec (JSON or YAML,
// wire-compatible with ArkFlow v1's JobSpec) with Load; both compile to the
// same validated plan and run the same way.
//
// # Usage
//
//	j, err := arkflow.NewJob("clicks").
//		Source("in", generate.Config{Count: 1_000_000, Fields: fields}).
//		Filter("engaged", arkflow.Where("action != 'view'")).
//		KeyBy("user").
//		Aggregate("per-user", arkflow.Aggregates(arkflow.Count("n"), arkflow.Sum("amount", "spent")).Final()).
//		Sink("out", stdout.Config{}).
//		Build()
//	if err != nil {
//		// every problem at once, each naming the operator and the field
//	}
//	err = j.Run(ctx) // until the bounded source ends, Stop, or ctx is done
//
// Build and Validate run the same side-effect-free deep build as a real
// start: unknown components, bad configs, missing key fields and illegal
// graph edges are reported before anything runs, each as a ValidationError
// naming the job, the operator and the field path
// ("operators[2].config.aggregates[0].function: unknown aggregate function"),
// or, in a job made by the Builder, the call that made the mistake
// (".Checkpoint(job.Checkpoint{...}): interval_ms: must be > 0").
//
// # Metrics
//
// Job.Metrics is a snapshot per task: rows and batches in and out, the
// input watermark, and the operator's own Counters (totals such as
// windows_fired, late_dropped, wal_replayed) and Gauges (values now, such
// as open_windows, wal_cursor). Metrics.Operator sums an operator's tasks;
// see it for which gauges are summed.
//
// # Event time
//
// EventTime declares a source's event-time field and watermark; windows
// downstream fire when the watermark passes their end (see the window
// package for the exact rules). By default the watermark moves with a whole
// batch before its rows are classified (ArkFlow's rule): with
// OutOfOrderness 0, an in-order row that shares a batch with a later row
// across a window boundary is late. Dropped rows are never silent: the
// window operator counts them (late_dropped, null_timestamp_dropped in
// Metrics) and warns in the job's log at most every 10 s, naming the
// source, the window and the fix. The fixes, all opt-in: OutOfOrderness
// above the event-time span of a batch; PerRowWatermark (each row meets
// the watermark before it, so in-order input is never late); RouteLate.
// AdvanceWhenIdle lets a quiet source's watermark follow the clock so its
// last windows close; Job.Drain ends a running job firing every open
// window.
//
// # Execution
//
// The plan fuses operators connected by forward edges of equal parallelism
// into chains; each chain subtask runs as one goroutine, and chains talk
// over bounded channels, so a slow sink slows the sources (backpressure).
// A keyed edge (KeyBy, or "partitioned": true in a spec) splits each batch
// column-wise and sends every row to the subtask owning its key group:
// FNV-1a-64 of the key modulo max_parallelism, with ranges
// [s·M/P, (s+1)·M/P − 1] as in ArkFlow v1. Watermarks and end-of-input
// travel in-band with the data; a bounded source's end is a final watermark
// of +∞, so windows fire and the job ends by itself.
//
// Every batch carries an acknowledgement: sources learn that rows were
// written by every sink they reached (or filtered away) and advance their
// positions only over a contiguous acknowledged prefix, so a restart
// replays exactly what was not acknowledged.
//
// # Expressions
//
// Declarative maps and filters use a small expression language over the
// columns of a batch, evaluated a column at a time: arithmetic (+ - * / %),
// comparisons, and/or/not with SQL null semantics, "is [not] null",
// "[not] in (…)", and functions such as lower, upper, length, concat,
// contains, starts_with, abs, round, coalesce, if, to_int, to_float,
// to_string and to_millis. For example
//
//	arkflow.Set("cents", "to_int(round(price * 100))")
//	arkflow.Where("amount > 10 and country in ('DE', 'FR')")
//
// Go functions (MapFunc, MapTo, FilterFunc) work too, but exist only in
// the program that defines them: a spec names them, and only that program
// can run it.
//
// # Connectors
//
// A service feeds a job with NewPush and takes its results with SinkFunc,
// both over Go structs (see Encode for how fields map to columns):
//
//	clicks := arkflow.NewPush(arkflow.PushConfig[Click]{})
//	… Source("clicks", clicks, arkflow.Durable(arkflow.Durability{})) …
//	… Sink("out", arkflow.SinkFunc[PerUser](store)) …
//	err := clicks.Push(ctx, click) // with Durable: in the WAL, survives a crash
//
// Built in besides: memory (batches from tests, capturing sinks), generate
// (deterministic synthetic rows), file (JSON lines), stdout and drop.
// Others register when their package is imported; connectors/kafka is the
// only package that needs cgo, and importing arkflow does not pull it in.
package arkflow
