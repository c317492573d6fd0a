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
// that defines them. They take Arrow batches; MapRows, FilterRows and
// ProcessRows take a function of one row instead, a Go struct (see Typed
// rows), and Build checks the struct's columns against the job:
//
//	arkflow.MapRows(arkflow.NewJob("j").Source("in", src), "enrich", enrich).Sink("out", sink)
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
//   - task: a task ID ("operator-subtask", as job.Task.ID names it), only
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
//
// # Typed rows
//
// SchemaOf, Encode, Decode and DecodeInto (and push.New and funcsink.Func,
// which use them) map a Go struct T to Arrow columns as follows.
//
// Columns. Every exported field is a column, in declaration order, named
// after the field ("UserID"), or after its tag: `arkflow:"user_id"`.
// `arkflow:"-"` skips a field (`arkflow:"-,"` names a column "-").
// Unexported fields are skipped. Embedded structs are flattened as
// encoding/json does: their fields become columns of T (an embedded
// struct with a tag name is a nested struct instead, see below), a
// shallower field hides a deeper one of the same name, and two columns of
// the same name at the same depth are refused, naming both fields.
// Embedded time.Time and database/sql Null values are columns named after
// their type ("Time").
//
// Types. Go's int8, int16, int32, int64, uint8, uint16, uint32 and uint64
// map to the Arrow integer of the same width; int and uint to int64 and
// uint64 on every platform; float32 and float64 to float32 and float64;
// bool to bool; string to utf8; []byte to binary. time.Time is a
// timestamp in milliseconds with time zone UTC, and time.Duration a
// duration in milliseconds; the tag option unit= changes the unit to s,
// ms, us or ns: `arkflow:"at,unit=us"` (or `arkflow:",unit=ns"` to keep
// the field's name). Named types take their underlying type's mapping
// (type UserID string is utf8) except time.Duration, which is a duration.
//
// Nulls. A field is nullable, and its column too, when it is a pointer to
// one of those types (*int64, *string, *time.Time, *[]byte, ...; nil is
// null) or a database/sql Null type: NullString, NullInt64, NullInt32,
// NullInt16, NullByte (uint8), NullFloat64, NullBool, NullTime, and the
// generic Null[V] of any supported V (Valid false is null). Every other
// field's column is not nullable.
//
// Refusals. SchemaOf returns an error, and Encode and Decode return the
// same error, when T is not a struct, when it has no column, or when a
// field cannot be mapped: a named nested struct or a pointer to one, a
// slice other than []byte, an array, a map, a channel, a func, an
// interface, a complex number, a uintptr, an unsafe.Pointer, a pointer to
// a pointer or to a database/sql Null type, or an embedded pointer to a
// struct. So do an unknown tag option, a unit that is not s, ms, us or ns,
// and unit= on a field that is not a time.Time or time.Duration. The error
// names the Go field path and its type, and says what to do:
//
//	typed: Click.Geo (main.Geo): nested structs are not supported; flatten it or tag it arkflow:"-"
//
// Tag such fields `arkflow:"-"` to keep them in T.
//
// Decoding: matching. Each field takes the column of its name (its tag's
// name, or the field's): an exact match first, else the one column whose
// name equals it ignoring case (so field User reads column "user").
// Columns no field asks for are ignored, such as a source's __meta_*
// columns or a window's __arkflow_window_update. A field without a column
// is an error naming the field and listing the batch's columns; so is a
// name that several columns match.
//
// Decoding: types. A column decodes into a field when every value it can
// hold fits; otherwise it is an error naming the column's Arrow type and
// the field's Go type. Besides the column type SchemaOf gives the field:
//   - integer fields take narrower integer columns of the same signedness
//     (int32 into int64) and narrower unsigned ones (uint32 into int64);
//     int and uint take int64 and uint64 columns on every platform
//     (range-checked where they are 32 bits);
//   - int64 and int fields take timestamp and duration columns as their
//     raw value in the column's unit;
//   - float64 fields take float32 columns;
//   - time.Time fields take timestamp columns of any unit and time zone;
//     the time decoded is the same instant, in UTC;
//   - time.Duration fields take duration columns of any unit (a value
//     past ±292 years is an error naming the row);
//   - string fields take utf8, large_utf8 and utf8_view columns and
//     dictionaries of them; []byte fields take those and binary,
//     large_binary and binary_view.
//
// Other conversions, such as int64 into int32, float64 into float32,
// signed into unsigned, or integers into floats or times, are refused.
//
// Decoding: nulls. A null decodes into a pointer field as nil and into a
// database/sql Null field as Valid false. A null in a column whose field
// cannot hold one is an error naming the field and the row, never a
// silent zero.
//
// Decoding: memory. The rows never point into the batch, which the caller
// may release at once: the strings (or []byte values) of one column are
// copied into one allocation that they share, and the values of a pointer
// field point into one array per column. Keeping one value keeps that
// allocation alive. Fields with no column (skipped or unexported) are
// zero in the rows appended.
//
// Rows as Go values. When every field of T is a number, a bool, a string,
// a time.Time or a time.Duration (no pointer, database/sql Null, []byte,
// or skipped or unexported field), a push source of T and a MapRows, FilterRows or
// ProcessRows emitting T hand the job batches that hold the rows as Go
// values and encode a column into Arrow only when something reads it (the
// write-ahead log, the event time, a key, a window, an Arrow operator or
// sink). A typed operator whose input type is that T, and a funcsink.Func
// of T, read the values themselves: a chain of them from Push to the
// sink never encodes a row. Times and durations are rounded to their
// columns' units on the way in (a time in UTC, as Decode gives it), so
// the values read are those the columns hold. Push copies the rows of its
// call; the rows a funcsink.Func gets are its own, as always.
package arkflow
