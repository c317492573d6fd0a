package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliStartSpec is a keyed aggregate with Badger state, a WAL and
// checkpoints: every block whose start depends on paths and flags.
const cliStartSpec = `id: cli-starts
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
    config: {count: 40, fields: [{name: user, type: string, cardinality: 4}]}
sinks:
  - {operator_id: out, output_type: drop}
durability: {sync: none}
state: {backend: badger}
checkpoint: {interval_ms: 60000, object_store_uri: "file:///CKPT"}
`

// Every spec (and flag) that `arkflow run` refuses before data
// moves, `arkflow validate` with the same flags refuses too, with the same
// lines, each naming the field; and what validates, runs.
func TestValidateRefusesWhatRunRefuses(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // an edit of cliStartSpec
		flags    []string
		env      []string
		field    string // every case's lines name it
	}{
		{name: "a state block without a directory", old: "durability: {sync: none}\n", new: "", flags: []string{"--data-dir="}, field: "state.path"},
		{name: "a WAL without a directory", old: "state: {backend: badger}", new: "state: {backend: memory}", flags: []string{"--data-dir="}, field: "durability.path"},
		{name: "a relative file URI", old: "file:///CKPT", new: "file://CKPT", field: "checkpoint.object_store_uri"},
		{name: "an s3 URI without a bucket", old: "file:///CKPT", new: "s3:///prefix", field: "checkpoint.object_store_uri"},
		{name: "an s3 endpoint of another scheme", old: "file:///CKPT", new: "s3://bucket/prefix", env: []string{"AWS_ENDPOINT_URL=ftp://minio:9000"}, field: "checkpoint.object_store_uri"},
		{name: "interval_ms 0", old: "interval_ms: 60000", new: "interval_ms: 0", field: "checkpoint.interval_ms"},
		{name: "retention 0", old: "interval_ms: 60000", new: "interval_ms: 60000, retention: 0", field: "checkpoint.retention"},
		{name: "max_parallelism 0", old: "id: cli-starts\n", new: "id: cli-starts\nmax_parallelism: 0\n", field: "max_parallelism"},
		{name: "a bad sync mode", old: "sync: none", new: "sync: sometimes", field: "durability.sync"},
		{name: "an unknown state backend", old: "backend: badger", new: "backend: rocks", field: "state.backend"},
		{name: "a savepoint name with a slash", flags: []string{"--from-savepoint", "a/b"}, field: "--from-savepoint"},
		{name: "an unknown input type", old: "input_type: generate", new: "input_type: kafkaa", field: "sources[0].input_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := cliStartSpec
			if c.old != "" {
				if !strings.Contains(spec, c.old) {
					t.Fatalf("the spec has no %q", c.old)
				}
				spec = strings.Replace(spec, c.old, c.new, 1)
			}
			spec = strings.ReplaceAll(spec, "/CKPT", filepath.Join(dir, "cp"))
			path := filepath.Join(dir, "job.yaml")
			if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, e := range c.env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			args := append(append([]string{}, c.flags...), path)
			vcode, _, verr := runCLI(append([]string{"validate"}, args...)...)
			rcode, _, rerr := runCLI(append([]string{"run", "--data-dir", filepath.Join(dir, "data")}, args...)...)
			if vcode != 1 || rcode != 1 {
				t.Fatalf("validate exited %d, run %d; want 1 and 1\nvalidate: %s\nrun: %s", vcode, rcode, verr, rerr)
			}
			if verr != rerr {
				t.Fatalf("validate and run say different things:\nvalidate:\n%s\nrun:\n%s", verr, rerr)
			}
			for _, l := range strings.Split(strings.TrimSpace(verr), "\n") {
				if !strings.Contains(l, ": "+c.field+": ") {
					t.Errorf("a line does not name %s: %s", c.field, l)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
				t.Errorf("the refused run created its data directory")
			}
		})
	}
	t.Run("what validates runs", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "job.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(cliStartSpec, "/CKPT", filepath.Join(dir, "cp"))), 0o644); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		if code, _, errOut := runCLI("validate", "--data-dir", data, path); code != 0 {
			t.Fatalf("validate: exit %d: %s", code, errOut)
		}
		if code, _, errOut := runCLI("run", "--data-dir", data, path); code != 0 {
			t.Fatalf("run: exit %d: %s", code, errOut)
		}
	})
}
