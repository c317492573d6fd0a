//go:build cgo

package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go/stream"
)

// runConfig parses and runs a Stream config to its end.
func runConfig(t *testing.T, yaml string) {
	t.Helper()
	cfg, err := stream.Parse([]byte(yaml), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Run(context.Background(), cfg, stream.WithDataDir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
}

// readLines reads a JSON-lines file into one map per line.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// Output order is input order whatever thread_num is: 8 workers run a
// query over 500 one-row batches and the file gets them in order.
func TestRunKeepsInputOrder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	var msgs []string
	for i := range 500 {
		msgs = append(msgs, fmt.Sprintf("%q", fmt.Sprint(i)))
	}
	runConfig(t, fmt.Sprintf(`
streams:
  - input:
      type: memory
      messages: [%s]
    pipeline:
      thread_num: 8
      processors:
        - type: sql
          query: "SELECT CAST(CAST(__value__ AS VARCHAR) AS BIGINT) AS n, CAST(CAST(__value__ AS VARCHAR) AS BIGINT) * 2 AS twice FROM flow WHERE CAST(CAST(__value__ AS VARCHAR) AS BIGINT) %% 7 <> 3"
    output:
      type: file
      path: %s
`, strings.Join(msgs, ", "), out))
	var want []float64
	for i := range 500 {
		if i%7 != 3 {
			want = append(want, float64(i))
		}
	}
	got := readLines(t, out)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m["n"] != want[i] || m["twice"] != 2*want[i] {
			t.Fatalf("row %d: %v, want n=%v twice=%v", i, m, want[i], 2*want[i])
		}
	}
}

// The connectors' cross-component checks hold for streams as for jobs: a
// transactional kafka input no output commits for, an exactly-once output
// without a WAL in front of its input, an idempotent http input without
// one.
func TestValidateRunsConnectorJobChecks(t *testing.T) {
	cfg, err := stream.Parse([]byte(`
streams:
  - input: {type: kafka, brokers: [a], topics: [t], consumer_group: g, start_from_latest: false, transactional_offsets: true}
    pipeline: {processors: []}
    output: {type: kafka, brokers: [a], topic: {type: value, value: o}, exactly_once: true, transactional_id: x}
  - input: {type: http, address: "127.0.0.1:1", path: /, idempotency: {}}
    pipeline: {processors: []}
    output: {type: drop}
  - input: {type: http, address: "127.0.0.1:2", path: /, idempotency: {}}
    durability: {path: ./wal}
    pipeline: {processors: []}
    output: {type: drop}
`), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range stream.Validate(cfg).(stream.Errors) {
		got = append(got, e.Path)
	}
	want := []string{"streams[0].input.transactional_offsets", "streams[0].output.exactly_once", "streams[1].input.idempotency"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %q, want %q", got, want)
	}
}

// health_check serves its three routes while the streams run; readiness
// says 200 once the inputs are connected.
func TestHealthRoutes(t *testing.T) {
	health, in := freeAddr(t), freeAddr(t)
	cfg, err := stream.Parse([]byte(fmt.Sprintf(`
health_check: {enabled: true, address: %q, readiness_path: /ready}
streams:
  - id: ingest
    input: {type: http, address: %q, path: /rows}
    pipeline: {processors: []}
    output: {type: drop}
`, health, in)), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- stream.Run(ctx, cfg) }()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for code, _ := get("/ready"); code != http.StatusOK && time.Now().Before(deadline); code, _ = get("/ready") {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{"/health", "/liveness", "/ready"} {
		if code, body := get(p); code != http.StatusOK || !strings.Contains(body, `"ingest":"running"`) {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	if code, _ := get("/readiness"); code != http.StatusNotFound {
		t.Errorf("GET /readiness (moved to /ready): %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/health"); code != 0 {
		t.Errorf("the routes are still served after Run returned: %d", code)
	}
}

// The durability block's object_store backend keeps the stream's log in
// the bucket (MinIO from ARKFLOW_TEST_S3_*): the stream runs through it,
// and the bucket holds the log under the prefix, node and stream.
func TestDurableStreamInObjectStore(t *testing.T) {
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -run TestDurableStreamInObjectStore ./stream/ starts MinIO")
	}
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("stream-wal-%d", time.Now().UnixNano())
	if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	runConfig(t, fmt.Sprintf(`
streams:
  - id: s3-durable
    input: {type: generate, context: '{"v": 1}', interval: 1ms, batch_size: 10, count: 100}
    durability:
      sync: group_commit
      backend:
        type: object_store
        node_id: node-a
        stream_id: main
        s3: {bucket: %s, endpoint: "http://%s", access_key_id: %s, secret_access_key: %s, allow_http: true}
        segment: {max_entries: 1000}
    pipeline: {processors: [{type: json_to_arrow}]}
    output: {type: file, path: %s}
`, bucket, endpoint, access, secret, out))
	if n := len(readLines(t, out)); n != 100 {
		t.Fatalf("%d rows written, want 100", n)
	}
	var keys []string
	for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	if len(keys) == 0 || !strings.HasPrefix(keys[0], "arkflow/wal/node-a/") {
		t.Fatalf("objects in the bucket: %q", keys)
	}
}

// ArkFlow's file input form reads a CSV file (its columns inferred) into
// the stream; a missing file fails validation naming input_type.path.
func TestFileInputArkFlowForm(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csvPath, []byte("sensor,value\nt1,20\nt2,25\nt1,30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	y := `
streams:
  - input: {type: file, input_type: {type: csv, path: %q}}
    pipeline:
      processors:
        - {type: sql, query: "SELECT sensor, sum(value)::BIGINT AS total FROM flow GROUP BY sensor ORDER BY sensor"}
    output: {type: stdout}
`
	cfg, err := stream.Parse(fmt.Appendf(nil, y, csvPath), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Run(context.Background(), cfg, stream.WithStdout(&out)); err != nil {
		t.Fatal(err)
	}
	if want := "{\"sensor\":\"t1\",\"total\":50}\n{\"sensor\":\"t2\",\"total\":25}\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	cfg, err = stream.Parse(fmt.Appendf(nil, y, filepath.Join(dir, "missing.csv")), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Validate(cfg)
	var es stream.Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Path != "streams[0].input.input_type.path" {
		t.Fatalf("a missing file: %v", err)
	}
}
