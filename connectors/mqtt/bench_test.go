package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/job"
)

// QoS 1 consume of 128-byte JSON messages, through the engine (mqtt
// source → a sink function that counts rows; PUBACK once the sink has the
// row, or with a durability block once the write-ahead log holds it) and
// through a bare paho subscriber (PUBACK once its handler returned), of
// benchMsgs messages on a fresh topic that each client's persistent
// session has queued. The clock runs from connecting until the sink
// (engine) or handler (bare) had the last message. ratio and ratio-wal
// are the engine's events/s, without and with the durability block, over
// the bare subscriber's.
//
//	ARKFLOW_TEST_MQTT_ADDR=127.0.0.1:1883 go test -run '^$' -bench MQTTConsume -benchtime 3x ./connectors/mqtt/
//
// Sub-benchmarks: raw (the payload as bytes) and json (decoded into four
// columns; the bare loop decodes into a struct with encoding/json).
const (
	benchMsgs  = 20_000
	benchBytes = 128
)

type benchRow struct {
	ID     int64  `json:"id"`
	User   string `json:"user"`
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

func benchValue(i int) []byte {
	head := fmt.Sprintf(`{"id":%d,"user":"user-%d","amount":%d,"note":"`, i, i%1000, i%100)
	return []byte(head + strings.Repeat("x", benchBytes-len(head)-2) + `"}`)
}

// benchSession creates a persistent session of clientID subscribed to
// topic at QoS 1.
func benchSession(b *testing.B, clientID, topic string) {
	c := client(b, func(o *paho.ClientOptions) { o.SetClientID(clientID).SetCleanSession(false) })
	if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		b.Fatalf("subscribing: %v", tok.Error())
	}
	c.Disconnect(250)
}

// benchPublish publishes benchMsgs messages to topic at QoS 1.
func benchPublish(b *testing.B, topic string) {
	c := client(b, nil)
	toks := make([]paho.Token, 0, benchMsgs)
	for i := 0; i < benchMsgs; i++ {
		toks = append(toks, c.Publish(topic, 1, false, benchValue(i)))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
			b.Fatalf("publishing: %v", tok.Error())
		}
	}
}

func BenchmarkMQTTConsume(b *testing.B) {
	broker(b)
	for _, format := range []string{FormatRaw, FormatJSON} {
		b.Run(format, func(b *testing.B) {
			b.StopTimer() // the iterations time themselves
			var engine, bare, wal time.Duration
			for i := 0; i < b.N; i++ {
				topic, bareID, engineID, walID := uniqueName(b, "bench"), uniqueName(b, "bare"), uniqueName(b, "engine"), uniqueName(b, "wal")
				for _, id := range []string{bareID, engineID, walID} {
					benchSession(b, id, topic)
				}
				benchPublish(b, topic)
				bare += benchBare(b, bareID, topic, format == FormatJSON)
				engine += benchEngine(b, engineID, topic, format, false)
				wal += benchEngine(b, walID, topic, format, true)
			}
			per := func(d time.Duration) float64 { return float64(b.N*benchMsgs) / d.Seconds() }
			b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(per(engine), "events/s")
			b.ReportMetric(per(bare), "bare-events/s")
			b.ReportMetric(per(engine)/per(bare), "ratio")
			b.ReportMetric(per(wal), "wal-events/s")
			b.ReportMetric(per(wal)/per(bare), "ratio-wal")
		})
	}
}

// benchBare reads the session's messages with a bare paho subscriber and
// returns the time it took.
func benchBare(b *testing.B, clientID, topic string, decode bool) time.Duration {
	var n, sum atomic.Int64
	done := make(chan struct{})
	handle := func(_ paho.Client, m paho.Message) {
		if decode {
			var r benchRow
			if err := json.Unmarshal(m.Payload(), &r); err != nil {
				b.Error(err)
			}
			sum.Add(r.Amount + 1)
		} else {
			sum.Add(int64(len(m.Payload())))
		}
		if n.Add(1) == benchMsgs {
			close(done)
		}
	}
	start := time.Now()
	c := client(b, func(o *paho.ClientOptions) {
		o.SetClientID(clientID).SetCleanSession(false).SetDefaultPublishHandler(handle)
	})
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d messages in 5 minutes", n.Load(), benchMsgs)
	}
	d := time.Since(start)
	c.Disconnect(250)
	if sum.Load() == 0 {
		b.Fatal("nothing read")
	}
	return d
}

// benchEngine reads the session's messages through a job and returns the
// time from its start until the sink had every row.
func benchEngine(b *testing.B, clientID, topic, format string, durable bool) time.Duration {
	h, p := broker(b)
	cfg := SourceConfig{Host: h, Port: p, ClientID: clientID, Topics: []string{topic}}
	if format == FormatJSON {
		cfg.Schema = connectors.Schema{{Name: "id", Type: "int64"}, {Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}, {Name: "note", Type: "string"}}
	}
	var rows atomic.Int64
	done := make(chan struct{})
	var opts []arkflow.SourceOption
	if durable {
		opts = append(opts, arkflow.Durable(job.Durability{}))
	}
	j, err := arkflow.NewJob("mqtt-bench").
		Source("in", cfg, opts...).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			if rows.Add(rec.NumRows()) == benchMsgs {
				close(done)
			}
			return nil
		})).
		Build(arkflow.WithDataDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- j.Run(context.Background()) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("the job ended before reading the messages: %v", err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d rows in 5 minutes", rows.Load(), benchMsgs)
	}
	d := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := j.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	if n := rows.Load(); n != benchMsgs {
		b.Fatalf("the sink had %d rows, want %d", n, benchMsgs)
	}
	return d
}
