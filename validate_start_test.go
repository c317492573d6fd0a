package arkflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/job"
)

// startSpec is a keyed aggregate with Badger state, a job-wide WAL and
// checkpoints: every block whose start depends on paths and options.
const startSpec = `
id: starts
operators:
  - {id: in, kind: source}
  - {id: agg, kind: aggregate, key_field: user, config: {aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: agg, partitioned: true}
  - {id: b, from: agg, to: out}
sources:
  - operator_id: in
    input_type: generate
    config: {count: 50, fields: [{name: user, type: string, cardinality: 5}]}
sinks:
  - {operator_id: out, output_type: drop}
durability: {sync: none}
state: {backend: badger}
checkpoint: {interval_ms: 60000, object_store_uri: "file://CKPT"}
`

// What a start refuses before any data moves, validation with
// the same options refuses too, with the same text and the field path;
// and a spec that validates with its options starts.
func TestValidateRefusesWhatStartRefuses(t *testing.T) {
	t.Parallel()
	spec := func(t *testing.T, edit func(string) string) *job.Spec {
		t.Helper()
		s := strings.ReplaceAll(startSpec, "CKPT", "/"+strings.TrimPrefix(t.TempDir(), "/")+"/cp")
		if edit != nil {
			s = edit(s)
		}
		sp, err := job.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				panic("test spec has no " + old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	dataDir := func(t *testing.T) []arkflow.Option { return []arkflow.Option{arkflow.WithDataDir(t.TempDir())} }
	cases := []struct {
		name   string
		edit   func(string) string
		opts   func(t *testing.T) []arkflow.Option
		field  string
		reason string
	}{
		{"badger state without a directory", replace("durability: {sync: none}\n", ""), nil,
			"state.path", "the badger state needs a directory: set state.path, or give the job a data directory"},
		{"a WAL without a directory", replace("state: {backend: badger}", "state: {backend: memory}"), nil,
			"durability.path", "the write-ahead log needs a directory: set durability.path, or give the job a data directory"},
		{"a source's WAL without a directory", func(s string) string {
			s = replace("durability: {sync: none}\n", "")(s)
			s = replace("state: {backend: badger}", "state: {backend: memory}")(s)
			return replace("    input_type: generate\n", "    input_type: generate\n    durability: {sync: always}\n")(s)
		}, nil, "sources[0].durability.path", "the write-ahead log needs a directory: set sources[0].durability.path"},
		{"a relative file URI", replace(`"file:///`, `"file://`), dataDir,
			"checkpoint.object_store_uri", "a file URI needs an absolute path, file:///absolute/dir"},
		{"a file URI with a query", replace(`/cp"`, `/cp?x=1"`), dataDir,
			"checkpoint.object_store_uri", "a file URI takes no query or fragment"},
		{"an s3 URI without a bucket", func(s string) string {
			i := strings.Index(s, `"file://`)
			j := strings.Index(s[i+1:], `"`)
			return s[:i] + `"s3:///prefix"` + s[i+j+2:]
		}, dataDir, "checkpoint.object_store_uri", "no bucket (use s3://bucket/prefix)"},
		{"an s3 endpoint with another scheme", func(s string) string {
			i := strings.Index(s, `"file://`)
			j := strings.Index(s[i+1:], `"`)
			return s[:i] + `"s3://bucket/prefix"` + s[i+j+2:]
		}, func(t *testing.T) []arkflow.Option {
			return []arkflow.Option{arkflow.WithDataDir(t.TempDir()), arkflow.WithCheckpointStore(checkpoint.StoreOptions{Endpoint: "ftp://minio:9000"})}
		}, "checkpoint.object_store_uri", `endpoint "ftp://minio:9000": the scheme must be http or https`},
		{"checkpoint interval 0", replace("interval_ms: 60000", "interval_ms: 0"), dataDir,
			"checkpoint.interval_ms", "must be > 0 (got 0)"},
		{"retention 0", replace("interval_ms: 60000", "interval_ms: 60000, retention: 0"), dataDir,
			"checkpoint.retention", "must be > 0 (got 0)"},
		{"max_parallelism 0", replace("id: starts\n", "id: starts\nmax_parallelism: 0\n"), dataDir,
			"max_parallelism", "must be in [1, 32768] (got 0)"},
		{"a savepoint without a checkpoint block", replace("checkpoint: {", "#"), func(t *testing.T) []arkflow.Option {
			return []arkflow.Option{arkflow.WithDataDir(t.TempDir()), arkflow.WithSavepoint("v1")}
		}, "WithSavepoint(name)", `the job has no checkpoint block, so it has no savepoint "v1" to start from`},
		{"a savepoint name with a slash", nil, func(t *testing.T) []arkflow.Option {
			return []arkflow.Option{arkflow.WithDataDir(t.TempDir()), arkflow.WithSavepoint("a/b")}
		}, "WithSavepoint(name)", `savepoint name "a/b": use letters, digits`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts []arkflow.Option
			if c.opts != nil {
				opts = c.opts(t)
			}
			sp := spec(t, c.edit)
			verr := arkflow.Validate(sp, opts...)
			found := false
			for _, e := range job.AsValidationErrors(verr) {
				found = found || (e.Field == c.field && strings.Contains(e.Reason, c.reason))
			}
			if !found {
				t.Fatalf("Validate: want %s: ~%q, got:\n%v", c.field, c.reason, verr)
			}
			// The start refuses it with the same text, before anything runs.
			j, err := arkflow.FromSpec(sp, opts...)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err = j.Run(ctx)
			}
			if err == nil || err.Error() != verr.Error() {
				t.Fatalf("start: got %v\nvalidate said %v", err, verr)
			}
		})
	}
	t.Run("valid with its options, so it starts", func(t *testing.T) {
		sp := spec(t, nil)
		opts := []arkflow.Option{arkflow.WithDataDir(t.TempDir())}
		if err := arkflow.Validate(sp, opts...); err != nil {
			t.Fatal(err)
		}
		j, err := arkflow.FromSpec(sp, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := j.Metrics().Operator("out").RowsIn; got != 5 {
			t.Fatalf("the job ran and wrote %d rows, want 5 (one per user)", got)
		}
	})
}
