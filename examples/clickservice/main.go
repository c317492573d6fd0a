// Clickservice is an HTTP service with a stream job inside it: clients POST
// click events, the job counts and sums them per user in tumbling windows of
// 10 seconds of event time, and each window's result is appended to a file
// that GET /results serves.
//
//	HTTP POST /clicks → Push → KeyBy user → 10 s window → funcsink.Func → results.jsonl
//
// A 200 from POST /clicks means the clicks are in the job's write-ahead log,
// on disk: kill the process with SIGKILL, start it again on the same -data
// directory, and every accepted click is still counted. Checkpoints every
// 2 s keep the restart short. SIGINT or SIGTERM stop it gracefully.
//
// A click with an "id" is counted once however often it is sent: a client
// that lost an answer sends the request again, and the clicks the service
// had accepted are acknowledged as duplicates instead of counted twice,
// also across crashes.
//
//	go run ./examples/clickservice
//	curl -s localhost:8080/clicks -d '{"id":"c1","user":"ann","amount":3,"ts":"2026-01-01T00:00:01Z"}'
//	curl -s localhost:8080/clicks -d '{"id":"c1","user":"ann","amount":3,"ts":"2026-01-01T00:00:01Z"}'   # {"accepted":1,"duplicates":1}
//	curl -s localhost:8080/results
//
// A window fires once event time has passed its end: when a click at least
// 2 s (the allowed out-of-orderness) past the window's end arrives.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Click is one event as clients send it and as the job reads it. Its
// fields are the job's columns, named as the fields are: ID, User, Amount
// and TS (a timestamp column, the event time). ID, chosen by the client and
// the same in every retry, is the click's idempotency key; a click without
// one is counted each time it is accepted.
type Click struct {
	ID     string    `json:"id,omitempty"`
	User   string    `json:"user"`
	Amount int64     `json:"amount"`
	TS     time.Time `json:"ts"`
}

// Result is one window's result. The window operator's output columns are
// the key (User), window_start, window_end and one per aggregate (Clicks,
// Total); fields are matched to columns by name or by their arkflow tag.
type Result struct {
	User   string    `json:"user"`
	Start  time.Time `json:"window_start" arkflow:"window_start"`
	End    time.Time `json:"window_end" arkflow:"window_end"`
	Clicks int64     `json:"clicks"`
	Total  int64     `json:"total"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve HTTP on")
	data := flag.String("data", "./clickservice-data", "directory of the write-ahead log, the state, the checkpoints and results.jsonl")
	segment := flag.Int64("wal-segment-bytes", 0, "size of the write-ahead log's segment files (0: the default 32 MiB); smaller ones let go of acknowledged clicks sooner")
	flag.Parse()
	if err := run(*addr, *data, *segment); err != nil {
		log.Fatal(err)
	}
}

func run(addr, data string, segment int64) error {
	data, err := filepath.Abs(data) // file:// checkpoint URIs must be absolute
	if err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	results, err := openResults(filepath.Join(data, "results.jsonl"))
	if err != nil {
		return err
	}
	defer results.Close()

	// The source the HTTP handler feeds. One partition: clicks are read in
	// the order Push calls return, under one watermark. A click whose ID
	// was accepted before is acknowledged without entering the job (the
	// newest 1,000,000 IDs are remembered, beside the write-ahead log).
	clicks := push.New(push.Config[Click]{IdempotencyKey: func(c Click) string { return c.ID }})

	j, err := buildJob(clicks, results, data, segment)
	if err != nil {
		return err // every problem at once, each naming its operator and field
	}
	jobDone := make(chan error, 1)
	go func() { jobDone <- j.Run(context.Background()) }()

	srv := &http.Server{Handler: newMux(j, clicks, results), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		stopWithin(j, 30*time.Second)
		return err
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	log.Printf("clickservice: listening on http://%s, data in %s", ln.Addr(), data)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		log.Print("clickservice: stopping")
	case err := <-jobDone: // the job failed: nothing would take the clicks
		srv.Close()
		return fmt.Errorf("job: %w", err)
	case err := <-serveDone:
		stopWithin(j, 30*time.Second)
		return err
	}

	// A graceful stop, in this order. First the HTTP server: it stops
	// accepting connections and waits for the requests in flight, whose
	// Push calls the still running job completes, so no click is left
	// half-accepted.
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	// Then the job: clicks in flight are processed and acknowledged, and
	// the state and the log are closed. Open windows keep their contents
	// (they fire after the next start, when event time passes their end).
	// j.Drain instead would fire them now, for a service being retired:
	// a later click for one of them would be late.
	if err := j.Stop(shutdown); err != nil {
		return fmt.Errorf("job stop: %w", err)
	}
	if err := <-jobDone; err != nil {
		return fmt.Errorf("job: %w", err)
	}
	log.Print("clickservice: stopped")
	return nil
}

// buildJob builds the job: the clicks, made durable and timed by their TS
// column, counted and summed per user in tumbling 10 s windows, written
// to results; checkpointed every 2 s under data. segment is the WAL's
// segment size (0: the default).
func buildJob(clicks *push.Source[Click], results *resultFile, data string, segment int64) (*arkflow.Job, error) {
	return arkflow.NewJob("clicks").
		Source("clicks", clicks,
			// A write-ahead log in front of the source: Push returns once
			// the clicks are appended and fsynced (group commit), and a
			// restart replays what the job had not finished with.
			arkflow.Durable(job.Durability{SegmentBytes: segment}),
			// Event time is the TS column; clicks may arrive up to 2 s
			// behind the newest one before they count as late (dropped).
			// PerRow places each click against the watermark of
			// the clicks before it, so one request's clicks in order are
			// never late, however far apart. (With wall-clock timestamps,
			// IdleTimeout and AdvanceWhenIdle would also close the last
			// windows when traffic stops.)
			arkflow.EventTime{Field: "TS", OutOfOrderness: 2 * time.Second, PerRow: true}).
		KeyBy("User").
		Window("per-user", window.Tumbling(10*time.Second, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("results", funcsink.Func[Result](results.Write)).
		// Checkpoints of the window state every 2 s: a restart restores
		// the newest one and replays only the log after it.
		Checkpoint(job.Checkpoint{IntervalMS: 2000, ObjectStoreURI: "file://" + filepath.Join(data, "checkpoints")}).
		Build(arkflow.WithDataDir(data)) // the WAL and the Badger state live under data/clicks/
}

// newMux routes the service's HTTP API: POST /clicks pushes clicks,
// GET /results lists the windows written, GET /healthz says whether the
// job runs.
func newMux(j *arkflow.Job, clicks *push.Source[Click], results *resultFile) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /clicks", clickHandler(clicks))
	mux.HandleFunc("GET /results", results.ServeHTTP)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s := j.Status(); s != arkflow.Running {
			http.Error(w, "job is "+s.String(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// clickHandler accepts one click or an array of clicks as JSON and pushes
// them to the job.
func clickHandler(clicks *push.Source[Click]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		batch, err := decodeClicks(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Push returns once the job took the clicks. With Durable on the
		// source that means they are in the write-ahead log, on disk: they
		// survive a crash of this process and are counted after a restart.
		// Only now may the client hear "accepted". (Without durability they
		// would only be in memory, and a crash would lose them; PushWait
		// would wait until the window they fall in had fired, which is
		// event time away.) Push blocks while the job is behind
		// (backpressure), so a slow job slows its clients down. PushDedup
		// is Push that also counts the clicks whose ID was accepted before:
		// acknowledged again, not counted again.
		dups, err := clicks.PushDedup(r.Context(), batch...)
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, "{\"accepted\":%d,\"duplicates\":%d}\n", len(batch), dups)
		case errors.Is(err, push.ErrStopped):
			// The job stopped before taking the clicks: none of them was
			// processed, so the client can safely send them again.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "stopping; retry", http.StatusServiceUnavailable)
		default:
			// The client went away (r.Context() ended) or the job failed.
			// The clicks may or may not have been taken: a client that
			// retries with the same IDs has them counted once (without
			// IDs, maybe twice: at least once).
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
}

// decodeClicks reads one click object or an array of them. Errors name
// the field ("clicks[2]: field \"ts\": ...").
func decodeClicks(body io.Reader) ([]Click, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errors.New("body: no clicks")
	}
	array := raw[0] == '['
	items := []json.RawMessage{raw}
	if array {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
	}
	out := make([]Click, len(items))
	for i, item := range items {
		if err := decodeClick(item, &out[i]); err != nil {
			if array {
				err = fmt.Errorf("clicks[%d]: %w", i, err)
			}
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("body: no clicks")
	}
	return out, nil
}

func decodeClick(raw []byte, c *Click) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a misspelt field is an error, not a zero value
	err := dec.Decode(c)
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("field %q: want %s, got a JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &timeErr):
		return fmt.Errorf("field \"ts\": want an RFC 3339 time such as \"2026-01-01T00:00:01.5Z\": %w", err)
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("field %s: unknown (the fields are id, user, amount and ts)", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case err != nil:
		return err
	case c.User == "":
		return errors.New("field \"user\": required")
	case c.TS.IsZero():
		return errors.New("field \"ts\": required")
	}
	return nil
}

// resultFile is the job's sink: each window result becomes a JSON line of
// results.jsonl.
type resultFile struct {
	path string
	mu   sync.Mutex // the sink may be called by several subtasks at once
	f    *os.File
}

func openResults(path string) (*resultFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// A crash in the middle of a write may leave a torn last line. Its
	// rows were never acknowledged, so the job writes them again: cut it.
	if err := cutTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &resultFile{path: path, f: f}, nil
}

// Write is the funcsink.Func. Its nil return acknowledges the rows: the job may
// then move the write-ahead log past their input and forget it. So it
// returns only once the lines are on disk (fsync): durable before the
// acknowledgement is the sink's half of "nothing accepted is lost".
//
// It is at least once: windows that fired after the last checkpoint before
// a crash fire again after the restart, and their lines are appended again
// (with the same values). Readers keep one line per (user, window_start).
func (r *resultFile) Write(_ context.Context, rows []Result) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, row := range rows {
		if err := enc.Encode(row); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(buf.Bytes()); err != nil {
		return err // the job fails; the rows are not acknowledged
	}
	return r.f.Sync()
}

// ServeHTTP serves results.jsonl.
func (r *resultFile) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	http.ServeFile(w, req, r.path)
}

func (r *resultFile) Close() error { return r.f.Close() }

// cutTornLine truncates f after its last newline.
func cutTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	// A torn line is shorter than one write; look at the last 64 KiB.
	from := max(st.Size()-64<<10, 0)
	tail := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(tail, from); err != nil {
		return err
	}
	nl := bytes.LastIndexByte(tail, '\n')
	if nl < 0 && from > 0 {
		return errors.New("last line is longer than 64 KiB: not written by this service")
	}
	keep := from + int64(nl) + 1
	if keep == st.Size() {
		return nil
	}
	return f.Truncate(keep)
}

// stopWithin stops the job gracefully, giving up after d.
func stopWithin(j *arkflow.Job, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = j.Stop(ctx)
}
