package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// A window holds more QoS 1 messages than the broker sends without a
// PUBACK (Mosquitto: 20): behind a durability block the source
// acknowledges them once the write-ahead log holds them, and the windows
// fire with every message counted.
func TestWindowBehindWAL(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.Schema = connectors.Schema{{Name: "user", Type: "string"}, {Name: "ts", Type: "int64"}}
	// A batch's 20 messages span 400 ms, less than the out-of-orderness.
	cfg.BatchSize = 20
	session(t, cfg.ClientID, topic)
	var mu sync.Mutex
	var got []string
	fired := make(chan struct{}, 16)
	j, err := arkflow.NewJob("mqtt-window").
		Source("in", cfg, arkflow.Durable(job.Durability{}), arkflow.EventTime{Field: "ts", OutOfOrderness: 2 * time.Second}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			mu.Lock()
			defer mu.Unlock()
			start := rec.Column(rec.Schema().FieldIndices(window.ColumnStart)[0]).(*array.Timestamp)
			n := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
			for i := 0; i < int(rec.NumRows()); i++ {
				got = append(got, fmt.Sprintf("%d:%d", start.Value(i), n.Value(i)))
				fired <- struct{}{}
			}
			return nil
		})).
		Build(arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- j.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	// 400 messages, 20 ms apart: eight windows of 50; the watermark
	// passes the first five.
	const base = int64(1_700_000_000_000)
	var payloads [][]byte
	for i := 0; i < 400; i++ {
		payloads = append(payloads, []byte(fmt.Sprintf(`{"user":"u","ts":%d}`, base+int64(i)*20)))
	}
	publish(t, topic, 1, payloads...)
	for i := 0; i < 5; i++ {
		select {
		case <-fired:
		case err := <-ran:
			t.Fatalf("the job ended: %v", err)
		case <-time.After(30 * time.Second):
			mu.Lock()
			t.Fatalf("%d of 5 windows fired in 30 s: %v", len(got), got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var want []string
	for w := int64(0); w < 5; w++ {
		want = append(want, fmt.Sprintf("%d:50", base+w*1000))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("windows %v, want %s", got, want)
	}
}

// session creates the persistent session of clientID, subscribed to
// topic at QoS 1, so that the broker keeps what is published to it
// before a source of that client ID connects.
func session(t *testing.T, clientID, topic string) {
	t.Helper()
	c := client(t, func(o *paho.ClientOptions) { o.SetClientID(clientID).SetCleanSession(false) })
	if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	c.Disconnect(100)
}

// Without a write-ahead log, messages read wait for the sinks before
// their PUBACK; when the broker stops sending because of them, Read warns
// that a job holding rows needs a durability block.
func TestSourceWarnsWhenAcknowledgementsStall(t *testing.T) {
	defer func(d time.Duration) { stallWarning = d }(stallWarning)
	stallWarning = 200 * time.Millisecond
	var logs bytes.Buffer
	var logMu sync.Mutex
	lg := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	topic := uniqueName(t, "t")
	in := buildInput(t, sourceConfig(t, uniqueName(t, "src"), topic))
	src, err := in.NewSource(connectors.TaskInfo{JobID: "test", OperatorID: "src", Parallelism: 1, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*source)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	connectSource(t, s)
	_, payloads := rowsOf(25, 1)
	publish(t, topic, 1, payloads...)
	readBatches(t, s, 20) // Mosquitto sends 20 without a PUBACK
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if b, err := s.Read(ctx); err == nil {
		t.Fatalf("read %d rows beyond the broker's in-flight limit", b.Record.NumRows())
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "needs a durability block") || !strings.Contains(logs.String(), "unacknowledged=20") {
		t.Fatalf("no warning about the stalled acknowledgements in the logs:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
