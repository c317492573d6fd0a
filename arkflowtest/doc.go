// Package arkflowtest runs a job inside a Go test and moves it one step at a
// time, as Flink's operator test harness and Kafka Streams'
// TopologyTestDriver do: push typed rows with their event times to the
// partitions of an input, advance the watermark and a fake clock, read the
// typed rows the sinks wrote (late rows included), read an operator's keyed
// state for a key, and snapshot the job to restore it into a fresh harness.
// Every step returns once the job has handled it completely, so a test
// never sleeps and always sees the same thing.
//
// # Usage
//
// Build the job with an Input in place of each source and an Output in
// place of each sink, then give it to New:
//
//	type Click struct {
//		User string `arkflow:"user"`
//		TS   int64  `arkflow:"ts"` // event time, Unix ms
//	}
//	type Count struct {
//		User  string    `arkflow:"user"`
//		Start time.Time `arkflow:"window_start"`
//		N     int64     `arkflow:"n"`
//	}
//
//	func TestCounts(t *testing.T) {
//		in, out := arkflowtest.NewInput[Click](1), arkflowtest.NewOutput[Count]()
//		h := arkflowtest.New(t, arkflow.NewJob("clicks").
//			Source("in", in, arkflow.EventTime{Field: "ts"}).
//			KeyBy("user").
//			Window("w", window.Tumbling(10*time.Second, job.Count("n"))).
//			Sink("out", out))
//		in.Push(0, Click{"ann", 1_000}, Click{"ann", 4_000})
//		h.AdvanceWatermark(10_000) // [0 s, 10 s) fires
//		if rows := out.Take(); len(rows) != 1 || rows[0].N != 2 {
//			t.Fatalf("got %v", rows)
//		}
//	}
//
// Rows map to columns as arkflow's typed rows do: by field name
// or arkflow tag, pointers for nulls. A window's output has the key column,
// window_start and window_end (time.Time), its aggregates and the update
// marker __arkflow_window_update; an Output's type may leave out columns it
// does not need. Late rows of the route policy go to a LateSink, which may
// be an Output of the input's row type; dropped ones are counted
// (Harness.Counter(window, "late_dropped")).
//
// # How a step completes
//
// A harness call returns when the job is quiescent (Settle): every row
// pushed has been read, every watermark and clock tick has gone through
// every operator, and every row that produced has been written by the
// sinks. The harness waits for the engine's own signals, not for time:
// each Input knows when its readers have taken everything and wait for
// more; then a barrier, like a checkpoint's but recording nothing, leaves
// every source behind what it sent and is awaited at every sink. Barriers
// travel in band, after the rows and watermarks sent before them, so when
// the last sink has it every window the watermark reached has fired and
// its rows are written.
//
// Watermarks come from the rows' event times, per partition, as in
// production: a batch [2100, 100] makes 100 late at once, and a
// partition that never delivered holds the watermark back. AdvanceWatermark
// raises partitions' watermarks without data, in order with the rows
// pushed before. The clock starts at the Unix epoch and moves only with
// AdvanceClock; it drives processing time, idle partitions and state TTL.
//
// A job of several sources, such as a join's two sides, has an Input for
// each, each source with its own EventTime. An operator's watermark is
// the lowest of its inputs', so an Input that has not advanced holds a
// join's windows back: Harness.AdvanceWatermark advances every Input,
// Input.AdvanceWatermark only its own.
//
// Each Push (and AdvanceWatermark) settles before it returns, so the job
// sees the batches and watermark advances of all partitions in push
// order, whatever the parallelism. Only what is pushed before New may be
// read in another order: one source subtask (the default parallelism)
// reads it in push order too, several read their partitions concurrently.
//
// # State and snapshots
//
// State (and the typed Value and Map) read a Process operator's keyed state
// for one key with the operator's own state.Value and state.Map
// declarations: what its function would read now. A job without a
// checkpoint block runs with one and, without a state block, keeps its
// state in memory. Snapshot takes a savepoint into the harness's
// checkpoint store and keeps the rows the inputs hold; Restore starts a
// job from it, with the rows the savepoint had not acknowledged (held in
// open windows) replayed from the inputs, as a restore from a checkpoint
// would.
//
// # Isolation
//
// Every harness works in fresh temporary directories: its checkpoint
// store, its state and its write-ahead logs are its own, whatever the
// job's spec names, and nothing is written there. New replaces the
// checkpoint block's object_store_uri with the temporary store, and drops
// the state block's path and the durability blocks' path and backend, so
// that state and logs (local ones, whatever the backend) live in the
// temporary data directory; the rest of the spec (backends, sync modes,
// intervals) is kept, and the builder is not changed. A Restore reads the
// snapshot's store, which holds its savepoint. So a builder written for
// production is tested as it is, and no harness restores or replays what
// another left.
//
// New starts a run afresh: an Input or Output that an earlier harness
// used starts empty again, but for what was pushed to the Input after that
// harness's job ended, which the new job reads. A test run twice thus sees
// the same rows twice, and harnesses of one builder do not meet: one after
// the other, or at once when their sources are not Inputs (an Input
// belongs to one running harness at a time).
//
// # When the job has ended
//
// After Stop, Finish, or an end of the job's own, the calls that would
// move it (AdvanceWatermark, AdvanceClock, Snapshot) fail the test, and
// so does every call that cannot do what it says (an advance of an input
// without event time, AdvanceClock on a job in which nothing follows the
// clock, a Counter the operator does not keep). What is pushed to an
// Input then waits for the next harness of its builder, New or Restore,
// as what is pushed before New does; the test fails at its end if no
// harness read it.
//
// # Limits
//
// Sinks that write asynchronously (connectors.AsyncSink) may still have
// writes in flight when a step returns; Outputs and memory sinks do not.
// The harness's methods are for the test's goroutine.
package arkflowtest
