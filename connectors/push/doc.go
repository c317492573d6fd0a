// Package push is the source a Go service feeds: its handlers push typed
// rows (structs mapped to columns as arkflow.Encode maps them) and the job
// reads them. With arkflow.Durable on the source, a nil return from Push
// means the rows are in the write-ahead log and survive a crash; the
// sections below say what it means without, and for rows without an event
// time.
//
//	clicks := push.New(push.Config[Click]{Partitions: 4})
//	j, err := arkflow.NewJob("clicks").
//		Source("clicks", clicks, arkflow.Durable(job.Durability{})).
//		...
//	// in an HTTP handler:
//	err := clicks.Push(r.Context(), click)
//
// # What a nil return from Push means
//
// Push returns nil once the job has taken every row of the call. What that
// promises depends on the source's durability:
//
//   - with arkflow.Durable(...) on the source, the rows are in the write-ahead log:
//     they survive a crash (SIGKILL) of the process, and are replayed after
//     a restart until processed. A handler may answer "accepted" after Push.
//   - without it, the job has taken the rows into its pipeline. A crash
//     loses the rows taken and not yet processed (and, with checkpoints,
//     the rows processed since the last checkpoint); a graceful Stop does
//     not.
//
// PushWait returns only once the rows were processed: acknowledged by every
// sink they reached (or filtered away).
//
// # Rows without an event time
//
// Whatever the durability, a row the job would drop on arrival is not
// taken: when the job reads the source under event time
// (arkflow.EventTime), a row whose event-time field has no value — a nil
// pointer, or Go's zero time.Time, which is never read as 0001-01-01 —
// makes Push return an error naming the field and the row's index in the
// call, and nothing of that call is taken. Unless the job routes rows
// without an event time to a sink (EventTime.RouteLate): then they are
// taken, and that sink receives them with the column null (decode it into a
// *time.Time). Rows that are late are another matter: whether a row is late
// depends on the rows before it, so Push takes it and the job handles it by
// its late policy.
//
// # Idempotent pushes
//
// A client that loses the answer to a request cannot tell whether its rows
// were taken, and retries; without more, a retry of rows that were taken
// counts them twice. Config.IdempotencyKey gives each row a key (an ID
// the client chose, a request ID with the row's index): a row whose key
// was accepted before is then acknowledged again, with a nil error,
// without entering the job. PushDedup says how many rows of a call were
// such duplicates.
//
//   - A key counts as seen exactly when its row is accepted: in the
//     write-ahead log, fsynced, before Push returns nil. A Push that fails
//     (ErrStopped, a row without an event time, a row that does not
//     encode) marks none of its keys; a Push whose ctx ended first may
//     still have its rows accepted, and then its keys are seen.
//   - Rows of one call are judged one by one: a row whose key is seen, or
//     repeats an earlier row's of the call, is skipped; the others go in. A
//     row whose key is "" has none and always goes in.
//   - Retries that race (the same key pushed twice at once) go in once: the
//     second waits for the first's outcome, and goes in only if the first
//     was not accepted.
//   - The keys seen survive a crash at any point, SIGKILL included, and
//     restores of checkpoints: the WAL's records carry their keys (in
//     __meta_key), and before the WAL lets go of a record its key is
//     appended, fsynced, to a file beside the log
//     ({durability path}/{source}/KEYS), compacted as it grows. That is
//     why IdempotencyKey needs arkflow.Durable, on a local path. (A
//     checkpoint restored on a machine without that directory starts with
//     no keys seen.)
//   - The newest IdempotencyRetention keys are remembered (default
//     DefaultIdempotencyRetention): memory and the file are bounded by
//     it, about 55 bytes of heap and 16 to 32 bytes of file a key.
//
// # Order, offsets and memory
//
// The rows of a partition are read in push order. Each row gets the usual
// __meta_source, __meta_partition and __meta_offset columns (and, with an
// IdempotencyKey, __meta_key: the row's key, null for none); offsets are
// unique and grow across restarts, also of the process, but are not dense
// (each run starts at the clock in nanoseconds, or later), so that a
// restored position never skips rows pushed to a new process.
//
// Memory: the source holds rows only until the job takes them, Push blocks
// while MaxPending rows wait, and the job takes rows only as fast as its
// bounded channels drain, so the heap stays flat however many rows go
// through. (A window keeps its rows as aggregates in its state, and holds
// their acknowledgement until it fires: PushWait on rows that go into a
// window returns once the window fired and its result was written.)
//
// Push copies the rows of the call, so the caller may reuse its slice as
// soon as Push returns. When T's fields are all numbers, bools, strings,
// times and durations (no pointer or []byte), that copy, its times
// rounded to their columns' units, is what the job reads: typed
// operators (arkflow.MapRows, FilterRows, ProcessRows) and a
// funcsink.Func read the Go values, and only what reads columns (the
// WAL, the event time, a key, a window) has them encoded into Arrow.
//
// A Source is meant for one job at a time. Rows pushed before the job
// starts wait for it (Push blocks until they are taken); rows pushed after
// the job stopped fail with ErrStopped until a job using the source starts
// again.
package push
