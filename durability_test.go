package arkflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A durable source resumes after what its WAL holds: a second run of the
// same job over the same WAL path reads nothing new from a bounded source
// that the first run finished, and the spec carries the block.
func TestDurableSourceResumes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	build := func(out *mem.Sink) *arkflow.Job {
		j, err := arkflow.NewJob("durable").
			Durability(job.Durability{Path: dir, Sync: job.SyncAlways}).
			Source("in", clickConfig(), arkflow.Durable(job.Durability{Sync: job.SyncGroupCommit})).
			Columns("cents", job.Columns{Set: []job.Column{{Name: "cents", Expr: "to_int(amount * 100)"}}}).
			Sink("out", out).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	out := mem.NewSink()
	j := build(out)
	raw, _ := j.Spec().JSON()
	spec, err := job.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(spec.Durability), `"sync":"always"`) || !strings.Contains(string(spec.Sources[0].Durability), `"sync":"group_commit"`) {
		t.Fatalf("durability missing from the spec: %s", raw)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := out.NumRows(); n != 4000 {
		t.Fatalf("first run wrote %d rows, want 4000", n)
	}
	var cursor int64
	for _, m := range j.Metrics().Tasks {
		if m.Task == "in-0" {
			cursor = m.Gauges["wal_cursor"]
		}
	}
	if cursor != 40 { // 4 partitions of 1000 rows in batches of 100
		t.Fatalf("WAL cursor after the run: %d, want 40", cursor)
	}
	// Behind its WAL the source still reports how far through its input
	// it is: all 4 partitions of 1000 rows.
	for _, m := range j.Metrics().Tasks {
		if m.Task == "in-0" && (m.Gauges["source_position_rows"] != 4000 || m.Gauges["source_end_rows"] != 4000) {
			t.Fatalf("source gauges after the run: %v, want source_position_rows and source_end_rows 4000", m.Gauges)
		}
	}
	again := mem.NewSink()
	if err := build(again).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := again.NumRows(); n != 0 {
		t.Fatalf("second run re-read %d rows; it should resume after the WAL", n)
	}
}

// Bad durability blocks are reported with the call and their field.
// (Durable is an option of sources only: passing it to another operator
// does not compile.)
func TestDurableMistakes(t *testing.T) {
	t.Parallel()
	_, err := arkflow.NewJob("bad").
		Source("in", clickConfig(), arkflow.Durable(job.Durability{Sync: "sometimes"})).
		Columns("cents", job.Columns{Set: []job.Column{{Name: "cents", Expr: "to_int(amount * 100)"}}}).
		Sink("out", mem.NewSink()).
		Build()
	if err == nil {
		t.Fatal("no error")
	}
	var ve job.ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("%T: %v", err, err)
	}
	text := err.Error()
	for _, want := range []string{"Durable(job.Durability{...}): sync: ", `"sometimes"`} {
		if !strings.Contains(text, want) {
			t.Errorf("error does not mention %q:\n%s", want, text)
		}
	}
}

// A bad value is reported with the call and the field's spec key: the
// same check, and the same key, as in a spec file.
func TestDurabilityBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    job.Durability
		want string
	}{
		{job.Durability{Sync: job.SyncPeriodic, SyncIntervalMS: -1}, "sync_interval_ms: must not be negative (got -1)"},
		{job.Durability{ParkLeaseMS: -2}, "park_lease_ms: must not be negative (got -2)"},
		{job.Durability{DrainTimeoutMS: -3}, "drain_timeout_ms: must not be negative (got -3)"},
		{job.Durability{SegmentBytes: 100}, "segment_bytes: must be at least 4096 (got 100)"},
	} {
		tc.d.Path = t.TempDir()
		j := arkflow.NewJob("j").Source("in", clickConfig()).Sink("out", mem.NewSink()).Durability(tc.d)
		if _, err := j.Build(); err == nil || !strings.Contains(err.Error(), ".Durability(job.Durability{...}): "+tc.want) {
			t.Errorf("Durability: %v, want %q", err, tc.want)
		}
		src := arkflow.NewJob("j").Source("in", clickConfig(), arkflow.Durable(tc.d)).Sink("out", mem.NewSink())
		if _, err := src.Build(); err == nil || !strings.Contains(err.Error(), `operator "in": Durable(job.Durability{...}): `+tc.want) {
			t.Errorf("Durable: %v, want %q", err, tc.want)
		}
	}
	ok := job.Durability{Path: t.TempDir(), Sync: job.SyncPeriodic, SyncIntervalMS: 1}
	if _, err := arkflow.NewJob("j").Source("in", clickConfig()).Sink("out", mem.NewSink()).Durability(ok).Build(); err != nil {
		t.Errorf("1ms: %v", err)
	}
}
