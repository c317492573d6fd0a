package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// The broker of the integration tests: ARKFLOW_TEST_MQTT_ADDR, host:port of
// a Mosquitto accepting anonymous clients (.ci/test.sh starts one and sets
// it).
const noBroker = "no MQTT broker: bash .ci/test.sh starts Mosquitto and sets ARKFLOW_TEST_MQTT_ADDR " +
	"(or start one yourself, `mosquitto -c CONF` with `listener 1883 127.0.0.1` and `allow_anonymous true`, " +
	"then ARKFLOW_TEST_MQTT_ADDR=127.0.0.1:1883)"

// broker returns the test broker's host and port, or skips the test.
func broker(t testing.TB) (string, int) {
	t.Helper()
	addr := os.Getenv("ARKFLOW_TEST_MQTT_ADDR")
	if addr == "" {
		t.Skip(noBroker)
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("ARKFLOW_TEST_MQTT_ADDR %q: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("ARKFLOW_TEST_MQTT_ADDR %q: %v", addr, err)
	}
	return h, port
}

var nameSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// uniqueName returns a topic level or client ID unique to this test and
// run.
func uniqueName(t testing.TB, what string) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("%s_%s_%d_%d", what, name, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

// client returns a bare paho client connected to the test broker with a
// clean session, disconnected at the end of the test.
func client(t testing.TB, o func(*paho.ClientOptions)) paho.Client {
	t.Helper()
	h, p := broker(t)
	opts := paho.NewClientOptions().AddBroker("tcp://" + net.JoinHostPort(h, strconv.Itoa(p))).
		SetClientID(uniqueName(t, "c")).SetCleanSession(true).SetAutoReconnect(false)
	if o != nil {
		o(opts)
	}
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting a test client: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// publish publishes payloads to topic with qos from a test client and
// waits for the broker's acknowledgement of each.
func publish(t testing.TB, topic string, qos byte, payloads ...[]byte) {
	t.Helper()
	c := client(t, nil)
	for _, p := range payloads {
		tok := c.Publish(topic, qos, false, p)
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publishing to %s: %v", topic, tok.Error())
		}
	}
}

// collector subscribes to a topic filter and keeps what arrives.
type collector struct {
	mu   sync.Mutex
	msgs []paho.Message
}

func collect(t testing.TB, filter string, qos byte) *collector {
	t.Helper()
	col := &collector{}
	c := client(t, nil)
	tok := c.Subscribe(filter, qos, func(_ paho.Client, m paho.Message) {
		col.mu.Lock()
		col.msgs = append(col.msgs, m)
		col.mu.Unlock()
	})
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing to %s: %v", filter, tok.Error())
	}
	return col
}

// wait returns the messages once at least n arrived (30 s at most).
func (c *collector) wait(t testing.TB, n int) []paho.Message {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got := append([]paho.Message(nil), c.msgs...)
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

// sourceConfig is an input config for the test broker.
func sourceConfig(t testing.TB, clientID string, topics ...string) SourceConfig {
	h, p := broker(t)
	return SourceConfig{Host: h, Port: p, ClientID: clientID, Topics: topics}
}

// sinkConfig is an output config for the test broker.
func sinkConfig(t testing.TB, topic string) SinkConfig {
	h, p := broker(t)
	return SinkConfig{Host: h, Port: p, ClientID: uniqueName(t, "sink"), Topic: Topic{Value: topic}}
}

// buildInput builds an mqtt input from a config.
func buildInput(t testing.TB, cfg SourceConfig) *input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("mqtt input not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "src", Config: raw})
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in.(*input)
}

// buildOutput builds an mqtt output from a config for rows of schema.
func buildOutput(t testing.TB, cfg SinkConfig, schema *arrow.Schema) *output {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("mqtt output not registered")
	}
	out, err := f(connectors.BuildContext{OperatorID: "snk", Config: raw}, schema)
	if err != nil {
		t.Fatalf("building the output: %v", err)
	}
	return out.(*output)
}

// newTestSource creates subtask sub of par, not connected; closed at the
// end of the test.
func newTestSource(t testing.TB, in *input, sub, par int) *source {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*source)
}

// openSource creates and connects subtask sub of par.
func openSource(t testing.TB, in *input, sub, par int) *source {
	t.Helper()
	s := newTestSource(t, in, sub, par)
	connectSource(t, s)
	return s
}

func connectSource(t testing.TB, s connectors.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
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

// expectNothing checks that a Read finds no message within a moment (the
// broker has nothing for the source).
func expectNothing(t testing.TB, s connectors.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	b, err := s.Read(ctx)
	if err == nil {
		t.Fatalf("read %d more rows, want none", b.Record.NumRows())
	}
}
