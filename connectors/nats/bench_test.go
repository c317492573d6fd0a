package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
)

// JetStream consume → acknowledge of 128-byte JSON messages, through the
// engine (nats source → a sink function that counts rows) and through
// bare nats.go loops, on the same stream and server. Each iteration reads
// the whole stream (benchMsgs messages, in memory on the server) with a
// fresh durable consumer (ack policy all) in each: the clock runs from
// connecting until the last message was handed to the sink (engine) or
// processed and acknowledged (bare).
//
//	ARKFLOW_TEST_NATS_URL=nats://127.0.0.1:4222 go test -run '^$' -bench JetStreamConsume -benchtime 3x ./connectors/nats/
//
// Sub-benchmarks: raw (the payload as bytes, format raw) and json
// (decoded into three columns; the bare loops decode into a struct with
// encoding/json). Baselines, both in every iteration: fetch (Fetch of
// batch_size messages, acknowledge the last of each batch) and consume
// (Messages, the continuous pull the source uses, with the same prefetch,
// acknowledging every batch_size-th). ratio = engine events/s over fetch
// events/s; ratio-consume over consume events/s.

const (
	benchMsgs  = 200_000
	benchBatch = 1024
	benchBytes = 128
)

var benchInput struct {
	once   sync.Once
	stream string
}

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

func setupBenchStream(b *testing.B) string {
	benchInput.once.Do(func() {
		name, js := newStream(b, func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage })
		payloads := make([][]byte, 0, 10_000)
		for i := 0; i < benchMsgs; i++ {
			payloads = append(payloads, benchValue(i))
			if len(payloads) == cap(payloads) {
				publishJS(b, js, name+".in", payloads...)
				payloads = payloads[:0]
			}
		}
		publishJS(b, js, name+".in", payloads...)
		benchInput.stream = name
	})
	return benchInput.stream
}

func BenchmarkJetStreamConsume(b *testing.B) {
	serverURL(b)
	stream := setupBenchStream(b)
	for _, format := range []string{FormatRaw, FormatJSON} {
		b.Run(format, func(b *testing.B) {
			b.StopTimer() // the iterations time themselves
			var engine, fetch, consume time.Duration
			for i := 0; i < b.N; i++ {
				fetch += benchBare(b, stream, format == FormatJSON, false)
				consume += benchBare(b, stream, format == FormatJSON, true)
				engine += benchEngine(b, stream, format)
			}
			per := func(d time.Duration) float64 { return float64(b.N*benchMsgs) / d.Seconds() }
			b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(per(engine), "events/s")
			b.ReportMetric(per(fetch), "fetch-events/s")
			b.ReportMetric(per(consume), "consume-events/s")
			b.ReportMetric(per(engine)/per(fetch), "ratio")
			b.ReportMetric(per(engine)/per(consume), "ratio-consume")
		})
	}
}

// benchBare reads the stream once with a bare loop and returns the time
// it took.
func benchBare(b *testing.B, stream string, decode, continuous bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	nc, err := natsgo.Connect(serverURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	name := uniqueName(b, "bare")
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckAllPolicy, MaxAckPending: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer js.DeleteConsumer(context.Background(), stream, name)
	var sum int64
	handle := func(m jetstream.Msg) {
		if decode {
			var r benchRow
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				b.Fatal(err)
			}
			sum += r.Amount
		} else {
			sum += int64(len(m.Data()))
		}
	}
	n := 0
	if continuous {
		it, err := cons.Messages(jetstream.PullMaxMessages(2 * benchBatch))
		if err != nil {
			b.Fatal(err)
		}
		for n < benchMsgs {
			m, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			handle(m)
			if n++; n%benchBatch == 0 || n == benchMsgs {
				_ = m.Ack()
			}
		}
		it.Stop()
	} else {
		for n < benchMsgs {
			// Never more than what is left: a fetch the stream cannot
			// fill waits for its MaxWait.
			batch, err := cons.Fetch(min(benchBatch, benchMsgs-n), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			var last jetstream.Msg
			for m := range batch.Messages() {
				handle(m)
				last = m
				n++
			}
			if err := batch.Error(); err != nil {
				b.Fatal(err)
			}
			if last != nil {
				_ = last.Ack()
			}
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if sum == 0 {
		b.Fatal("nothing read")
	}
	return d
}

// benchEngine reads the stream once through a job and returns the time
// from its start until the sink had every row.
func benchEngine(b *testing.B, stream, format string) time.Duration {
	cfg := SourceConfig{URL: serverURL(b), Mode: SourceMode{Type: ModeJetStream, Stream: stream, ConsumerName: uniqueName(b, "engine")}, BatchSize: benchBatch}
	if format == FormatJSON {
		cfg.Schema = connectors.Schema{{Name: "id", Type: "int64"}, {Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}}
	}
	var rows atomic.Int64
	done := make(chan struct{})
	j, err := arkflow.NewJob("nats-bench").
		Source("in", cfg).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			if rows.Add(rec.NumRows()) == benchMsgs {
				close(done)
			}
			return nil
		})).
		Build()
	if err != nil {
		b.Fatal(err)
	}
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- j.Run(context.Background()) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("the job ended before reading the stream: %v", err)
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
	js := jsOf(b, conn(b))
	_ = js.DeleteConsumer(ctx, stream, cfg.Mode.ConsumerName)
	return d
}
