package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/redis"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Two Redis streams → per-user totals every minute → a Redis hash per
// user, over TLS, with checkpoints: every order counted once in the
// state, and each total written with HSET, which a restart writes again
// with the same value (compile-only: it needs a server).
func Example() {
	mode := redis.Mode{Type: redis.ModeSingle, URL: "rediss://redis.example.com:6380"}
	tls := &redis.TLS{CA: "/etc/redis/ca.pem"}
	j, err := arkflow.NewJob("order-totals").
		Source("orders", redis.SourceConfig{
			Mode: mode, TLS: tls,
			RedisType: redis.SourceType{Type: redis.TypeStream, Streams: []string{"orders:eu", "orders:us"}, Group: "order-totals"},
			Schema:    connectors.Schema{{Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}},
		}).
		KeyBy("user").
		Window("per-minute", window.Tumbling(time.Minute, job.Count("n"), job.Sum("amount", "total"))).
		Sink("totals", redis.SinkConfig{
			Mode: mode, TLS: tls,
			RedisType: redis.SinkType{
				Type:  redis.TypeHashes,
				Key:   &redis.Expr{Expr: "concat('totals:', user)"},
				Field: &redis.Expr{Expr: window.ColumnStart},
			},
		}).
		State(job.State{Backend: "badger"}).
		Checkpoint(job.Checkpoint{IntervalMS: 10_000}).
		Build(arkflow.WithDataDir("./data"))
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// A source config is the spec's config of input_type redis, field for
// field.
func ExampleSourceConfig() {
	cfg := redis.SourceConfig{
		Mode:      redis.Mode{Type: redis.ModeSingle, URL: "redis://localhost:6379"},
		RedisType: redis.SourceType{Type: redis.TypeSubscribe, Subscribe: &redis.Subscribe{Type: "channels", Channels: []string{"clicks"}}},
		Schema:    connectors.Schema{{Name: "user", Type: "string"}},
	}
	b, _ := json.Marshal(cfg)
	fmt.Println(string(b))
	// Output:
	// {"mode":{"type":"single","url":"redis://localhost:6379"},"redis_type":{"type":"subscribe","subscribe":{"type":"channels","channels":["clicks"]}},"schema":[{"name":"user","type":"string"}]}
}

// A lookup of JSON documents by key, as a Stream config's redis temporary
// does for its sql processor's temporary_list (compile-only: it needs a
// server). A bad config is refused without I/O, naming the field.
func ExampleNewLookup() {
	var cfg redis.LookupConfig
	cfg.Mode = redis.Mode{Type: redis.ModeSingle, URL: "redis://127.0.0.1:6379"}
	cfg.RedisType.Type = "hash"
	if _, err := redis.NewLookup(cfg); err != nil {
		fmt.Println(err)
	}
	cfg.RedisType.Type = "string"
	l, err := redis.NewLookup(cfg)
	if err != nil {
		log.Fatal(err)
	}
	_ = func(ctx context.Context) ([][]byte, error) {
		if err := l.Connect(ctx); err != nil {
			return nil, err
		}
		defer l.Close()
		return l.Get(ctx, []string{"user:1", "user:2"}) // the values of the keys that exist
	}
	// Output:
	// redis_type.type: must be string or list (got "hash")
}
