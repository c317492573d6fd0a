package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// The server of the integration tests: ARKFLOW_TEST_REDIS_URL
// (.ci/test.sh starts a redis-server and sets it).
const noServer = "no Redis server: bash .ci/test.sh starts redis-server and sets ARKFLOW_TEST_REDIS_URL " +
	"(or start one yourself: `redis-server --port 6379 --save ''`, then ARKFLOW_TEST_REDIS_URL=redis://127.0.0.1:6379)"

// serverURL returns the test server's URL, or skips the test.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("ARKFLOW_TEST_REDIS_URL")
	if u == "" {
		t.Skip(noServer)
	}
	return u
}

var nameSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// uniqueKey returns a key unique to this test and run; the keys of the
// test (the key and everything starting with it) are deleted at its end.
func uniqueKey(t testing.TB, what string) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	key := fmt.Sprintf("arkflow-test:%s:%s:%d:%d", what, name, time.Now().UnixNano()%1e9, nameSeq.Add(1))
	if u := os.Getenv("ARKFLOW_TEST_REDIS_URL"); u != "" {
		t.Cleanup(func() {
			c := newClient(t)
			keys, _ := c.Keys(context.Background(), key+"*").Result()
			if len(keys) > 0 {
				c.Del(context.Background(), keys...)
			}
		})
	}
	return key
}

// newClient returns a client of the test server, closed at the end of the
// test.
func newClient(t testing.TB) *goredis.Client {
	t.Helper()
	o, err := goredis.ParseURL(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// xadd appends entries {value: payload} to a stream and returns their IDs.
func xadd(t testing.TB, c *goredis.Client, key string, payloads ...[]byte) []string {
	t.Helper()
	pipe := c.Pipeline()
	cmds := make([]*goredis.StringCmd, len(payloads))
	for i, p := range payloads {
		cmds[i] = pipe.XAdd(context.Background(), &goredis.XAddArgs{Stream: key, Values: []any{DefaultField, p}})
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(cmds))
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids
}

// single is the test server's mode.
func single(t testing.TB) Mode { return Mode{Type: ModeSingle, URL: serverURL(t)} }

// buildInput builds a redis input from a config.
func buildInput(t testing.TB, cfg SourceConfig) *input {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("redis input not registered")
	}
	in, err := f(connectors.BuildContext{OperatorID: "src", Config: raw})
	if err != nil {
		t.Fatalf("building the input: %v", err)
	}
	return in.(*input)
}

// buildOutput builds a redis output from a config for rows of schema.
func buildOutput(t testing.TB, cfg SinkConfig, schema *arrow.Schema) *output {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("redis output not registered")
	}
	out, err := f(connectors.BuildContext{OperatorID: "snk", Config: raw}, schema)
	if err != nil {
		t.Fatalf("building the output: %v", err)
	}
	return out.(*output)
}

// openSource creates, seeks (when seek is not nil) and connects subtask
// sub of par; it is closed at the end of the test.
func openSource(t testing.TB, in *input, sub, par int, seek []connectors.Position) connectors.Source {
	t.Helper()
	src, err := in.NewSource(connectors.TaskInfo{JobID: "j", OperatorID: "src", Subtask: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(context.Background()) })
	if seek != nil {
		if err := src.(connectors.Positioner).Seek(seek); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := src.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return src
}

// readBatch reads one batch (30 s at most).
func readBatch(t testing.TB, s connectors.Source) (connectors.Batch, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Read(ctx)
}
