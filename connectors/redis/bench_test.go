package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
)

// Stream consume → acknowledge of 128-byte JSON entries, through the
// engine (the redis streams source → a sink function that counts rows)
// and through a bare go-redis loop (XREADGROUP of batch_size entries,
// then XACK of their IDs), on the same stream and server. Each iteration
// reads the whole stream (benchMsgs entries) with a fresh consumer group
// in each: the clock runs from connecting until the last entry was
// handed to the sink (engine) or processed and acknowledged (bare).
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -run XXX -bench . -count 3 ./connectors/redis/
//
// Sub-benchmarks: raw (the payload as bytes, format raw) and json
// (decoded into three columns; the bare loop decodes into a struct with
// encoding/json). ratio = engine events/s over bare events/s.

const (
	benchMsgs  = 100_000
	benchBatch = 1024
	benchBytes = 128
)

var benchInput struct {
	once sync.Once
	key  string
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
		key := fmt.Sprintf("arkflow-bench:%d", time.Now().UnixNano())
		c := newClient(b)
		payloads := make([][]byte, 0, 10_000)
		for i := 0; i < benchMsgs; i++ {
			payloads = append(payloads, benchValue(i))
			if len(payloads) == cap(payloads) {
				xadd(b, c, key, payloads...)
				payloads = payloads[:0]
			}
		}
		xadd(b, c, key, payloads...)
		benchInput.key = key
	})
	return benchInput.key
}

func BenchmarkStreamConsume(b *testing.B) {
	serverURL(b)
	key := setupBenchStream(b)
	b.Cleanup(func() { newClient(b).Del(context.Background(), key) })
	for _, format := range []string{FormatRaw, FormatJSON} {
		b.Run(format, func(b *testing.B) {
			var engine, bare time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer() // the benchmark's own clock runs for the engine only
				bare += benchBare(b, key, format == FormatJSON)
				b.StartTimer()
				engine += benchEngine(b, key, format)
			}
			per := func(d time.Duration) float64 { return float64(b.N*benchMsgs) / d.Seconds() }
			b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(per(engine), "events/s")
			b.ReportMetric(per(bare), "bare-events/s")
			b.ReportMetric(per(engine)/per(bare), "ratio")
		})
	}
}

var benchGroups atomic.Int64

func benchGroup(b *testing.B, c *goredis.Client, key string) string {
	g := fmt.Sprintf("bench-%d", benchGroups.Add(1))
	b.Cleanup(func() { c.XGroupDestroy(context.Background(), key, g) })
	return g
}

// benchBare reads the stream once with a bare loop and returns the time
// it took.
func benchBare(b *testing.B, key string, decode bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c := newClient(b)
	group := benchGroup(b, c, key)
	if err := c.XGroupCreate(ctx, key, group, "0").Err(); err != nil {
		b.Fatal(err)
	}
	var sum int64
	n := 0
	ids := make([]string, 0, benchBatch)
	for n < benchMsgs {
		res, err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: group, Consumer: "bare", Streams: []string{key, ">"}, Count: benchBatch, Block: 5 * time.Second}).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			b.Fatal(err)
		}
		ids = ids[:0]
		for _, st := range res {
			for _, m := range st.Messages {
				v := m.Values[DefaultField].(string)
				if decode {
					var r benchRow
					if err := json.Unmarshal([]byte(v), &r); err != nil {
						b.Fatal(err)
					}
					sum += r.Amount
				} else {
					sum += int64(len(v))
				}
				ids = append(ids, m.ID)
				n++
			}
		}
		if len(ids) > 0 {
			if err := c.XAck(ctx, key, group, ids...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	d := time.Since(start)
	if sum == 0 {
		b.Fatal("nothing read")
	}
	return d
}

// benchEngine reads the stream once through a job and returns the time
// from its start until the sink had every row.
func benchEngine(b *testing.B, key, format string) time.Duration {
	c := newClient(b)
	cfg := SourceConfig{Mode: single(b), RedisType: SourceType{Type: TypeStream, Streams: []string{key}, Group: benchGroup(b, c, key)}, BatchSize: benchBatch}
	if format == FormatJSON {
		cfg.Schema = connectors.Schema{{Name: "id", Type: "int64"}, {Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}}
	}
	var rows atomic.Int64
	done := make(chan struct{})
	j, err := arkflow.NewJob("redis-bench").
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
	return d
}
