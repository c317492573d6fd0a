// Package arkflow runs stateful stream jobs inside a Go program: a small
// Flink that embeds like a library and speaks ArkFlow's job format.
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
//		Where("engaged", "action != 'view'").
//		KeyBy("user").
//		Aggregate("per-user", job.Final(job.Count("n"), job.Sum("amount", "spent"))).
//		Sink("out", stdout.Config{}).
//		Build()
//	if err != nil {
//		// every problem at once, each naming the operator and the field
//	}
//	err = j.Run(ctx) // until the bounded source ends, Stop, or ctx is done
//
// Build and Validate run the same side-effect-free deep build as a real
// start and report every problem at once, each as a ValidationError naming
// the job, the operator and, for a spec, the field path
// ("operators[2].config.aggregates[0].function: unknown aggregate function"),
// for a Builder, the call that made the mistake
// (`.Aggregate("per-user", ...): aggregates[0].function: …`,
// `.KeyBy("usr"): unknown column "usr" (…); did you mean "user"?`).
//
// Process runs a Go function with keyed state (state.Value, state.Map).
// With a Checkpoint block, Job.Savepoint saves the state under a name, and
// the next version of the job starts from it with WithSavepoint. Sources
// advance their positions only over rows every sink has written, so a
// restart replays what was not acknowledged; bounded channels between
// operators give backpressure. Job.Metrics is a snapshot per task;
// Job.Collector exposes the same numbers, and checkpoint health, as a
// prometheus.Collector for the service's own registry.
//
// # Event time
//
// EventTime declares a source's event-time field and watermark; windows
// fire when the watermark passes their end (see package window). The
// watermark moves with a whole batch by default; EventTime's PerRow
// classifies each row on its own, RouteLate keeps late rows,
// AdvanceWhenIdle lets a quiet source's watermark follow the clock, and
// Job.Drain fires every open window. Dropped rows are counted in Metrics and logged.
//
// # Expressions
//
// Builder.Columns and Builder.Where (and the spec's map and filter
// operators) use a small expression language, evaluated
// a column at a time: arithmetic, comparisons, and/or/not with SQL null
// semantics, "is [not] null", "[not] in (…)", and functions such as lower,
// upper, length, concat, contains, starts_with, abs, round, coalesce, if,
// to_int, to_float, to_string and to_millis:
//
//	Columns("cents", job.Columns{Set: []job.Column{{Name: "cents", Expr: "to_int(round(price * 100))"}}})
//	Where("eu", "amount > 10 and country in ('DE', 'FR')")
//
// Go functions (Map, Filter, Process) work too, but only in the program
// that defines them.
//
// # Connectors
//
// A service feeds a job with push.New and takes its results with funcsink.Func,
// both over Go structs (see Encode for how fields map to columns):
//
//	clicks := push.New(push.Config[Click]{})
//	… Source("clicks", clicks, arkflow.Durable(job.Durability{})) …
//	… Sink("out", funcsink.Func[PerUser](store)) …
//	err := clicks.Push(ctx, click) // with Durable: in the WAL, survives a crash
//
// Built in besides: memory, generate, file (JSON lines), stdout and drop.
// Others register when their package is imported (package connectors);
// connectors/kafka needs cgo, and importing arkflow does not pull it in.
//
// # Logging
//
// A job logs through the *slog.Logger given with WithLogger, and only
// through it: without one its logs are discarded, and no code of the
// library logs through slog.Default or package log (a test parses the
// sources to keep it so). Connectors, the write-ahead log, the state and
// checkpoint stores, and librdkafka's own log lines all get this logger.
// Its records use these keys, each at most once per record:
//
//   - job: the job ID, added once by the job itself (so do not add it to
//     the logger you pass).
//   - operator and subtask: the operator ID and the subtask index, on
//     what one operator or subtask logs.
//   - task: a task ID ("operator-subtask", as job.TaskID forms it), only
//     where the record names a task of a checkpoint rather than the
//     subtask logging (a snapshot being restored).
//   - checkpoint: the checkpoint ID (a savepoint's name for kind=savepoint),
//     with kind checkpoint or savepoint.
//   - error: the error, on every record that reports one.
//
// An event is logged once, where it is handled: an error the job returns
// (Run's, a failed Checkpoint's) is logged by the job, and a caller need
// not log it again. The arkflow command writes these records as text or,
// with --log-format json, one JSON object a line.
package arkflow
