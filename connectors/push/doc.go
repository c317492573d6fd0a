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
// # Order, offsets and memory
//
// The rows of a partition are read in push order. Each row gets the usual
// __meta_source, __meta_partition and __meta_offset columns; offsets are
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
// A Source is meant for one job at a time. Rows pushed before the job
// starts wait for it (Push blocks until they are taken); rows pushed after
// the job stopped fail with ErrStopped until a job using the source starts
// again.
package push
