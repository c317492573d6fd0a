package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// The server of the integration tests: ARKFLOW_TEST_NATS_URL, a
// `nats-server -js` (.ci/test.sh starts one and sets it).
const noServer = "no NATS server: bash .ci/test.sh starts nats-server -js and sets ARKFLOW_TEST_NATS_URL " +
	"(or start one yourself: `go install github.com/nats-io/nats-server/v2@v2.15.3` and " +
	"`nats-server -a 127.0.0.1 -p 4222 -js -sd $(mktemp -d)`, then ARKFLOW_TEST_NATS_URL=nats://127.0.0.1:4222)"

// serverURL returns the test server's URL, or skips the test.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("ARKFLOW_TEST_NATS_URL")
	if u == "" {
		t.Skip(noServer)
	}
	return u
}

var nameSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// uniqueName returns a stream, consumer or subject token unique to this
// test and run.
func uniqueName(t testing.TB, what string) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return fmt.Sprintf("%s_%s_%d_%d", what, name, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// conn returns a client connection, closed at the end of the test.
func conn(t testing.TB) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func jsOf(t testing.TB, nc *natsgo.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// newStream creates a stream capturing name.> (and deletes it at the end
// of the test); cfg adjusts its config.
func newStream(t testing.TB, cfg func(*jetstream.StreamConfig)) (name string, js jetstream.JetStream) {
	t.Helper()
	name = uniqueName(t, "S")
	js = jsOf(t, conn(t))
	sc := jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: 10 * time.Minute}
	if cfg != nil {
		cfg(&sc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatalf("creating stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return name, js
}

// publishJS publishes payloads to subject and waits for the stream's
// acknowledgements; it returns their stream sequences.
func publishJS(t testing.TB, js jetstream.JetStream, subject string, payloads ...[]byte) []uint64 {
	t.Helper()
	futs := make([]jetstream.PubAckFuture, len(payloads))
	for i, p := range payloads {
		f, err := js.PublishAsync(subject, p)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		futs[i] = f
	}
	seqs := make([]uint64, len(payloads))
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			seqs[i] = ack.Sequence
		case err := <-f.Err():
			t.Fatalf("publish: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish: no acknowledgement in 30s")
		}
	}
	return seqs
}

// streamMsgs reads every message of a stream, from its first, through an
// ordered consumer, waiting until at least n arrived (30 s at most) and
// then until settle passed without more.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream string, n int, settle time.Duration) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		wait := settle
		if len(out) < n {
			wait = time.Until(deadlineOf(ctx))
		}
		if wait <= 0 {
			wait = time.Millisecond
		}
		m, err := c.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			if len(out) >= n {
				return out
			}
			t.Fatalf("read %d of %d messages of stream %s: %v", len(out), n, stream, err)
		}
		out = append(out, m)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// coreCollector subscribes to a core subject and keeps what arrives.
type coreCollector struct {
	mu   sync.Mutex
	msgs []*natsgo.Msg
}

func collect(t testing.TB, subject string) *coreCollector {
	t.Helper()
	nc := conn(t)
	c := &coreCollector{}
	if _, err := nc.Subscribe(subject, func(m *natsgo.Msg) {
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// wait returns the messages once at least n arrived (30 s at most).
func (c *coreCollector) wait(t testing.TB, n int) []*natsgo.Msg {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got := append([]*natsgo.Msg(nil), c.msgs...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived in 30s", len(got), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// buildInput builds a nats input from a config.
func buildInput(t testing.TB, cfg SourceConfig) *input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("nats input not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "src", Config: raw})
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in.(*input)
}

// buildOutput builds a nats output from a config for rows of schema.
func buildOutput(t testing.TB, cfg SinkConfig, schema *arrow.Schema) *output {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("nats output not registered")
	}
	out, err := f(connectors.BuildContext{OperatorID: "snk", Config: raw}, schema)
	if err != nil {
		t.Fatalf("building the output: %v", err)
	}
	return out.(*output)
}

// openSource creates and connects subtask sub of par.
func openSource(t testing.TB, in *input, sub, par int, seek []connectors.Position) connectors.Source {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	if seek != nil {
		if err := s.(connectors.Positioner).Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// openSink creates and connects a sink.
func openSink(t testing.TB, out *output) connectors.Sink {
	t.Helper()
	s, err := out.NewSink(connectors.TaskInfo{JobID: "test", OperatorID: "snk", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// readBatches reads until n rows arrived (30 s at most) and returns the
// batches, unacknowledged.
func readBatches(t testing.TB, s connectors.Source, n int) []connectors.Batch {
	t.Helper()
	var out []connectors.Batch
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for total < n {
		b, err := s.Read(ctx)
		if err != nil {
			t.Fatalf("Read after %d of %d rows: %v", total, n, err)
		}
		out = append(out, b)
		total += int(b.Record.NumRows())
	}
	t.Cleanup(func() {
		for _, b := range out {
			b.Record.Release()
		}
	})
	return out
}
