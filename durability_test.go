package arkflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// A durable source resumes after what its WAL holds: a second run of the
// same job over the same WAL path reads nothing new from a bounded source
// that the first run finished (R-WAL-3), and the spec carries the block.
func TestDurableSourceResumes(t *testing.T) {
	dir := t.TempDir()
	build := func(out *mem.Sink) *arkflow.Job {
		j, err := arkflow.NewJob("durable").
			Durability(arkflow.Durability{Path: dir, Sync: wal.SyncAlways}).
			Source("in", clickConfig(), arkflow.Durable(arkflow.Durability{Sync: wal.SyncGroupCommit})).
			Map("cents", arkflow.Set("cents", "to_int(amount * 100)")).
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
	_, err := arkflow.NewJob("bad").
		Source("in", clickConfig(), arkflow.Durable(arkflow.Durability{Sync: "sometimes"})).
		Map("cents", arkflow.Set("cents", "to_int(amount * 100)")).
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
	for _, want := range []string{"Durable(arkflow.Durability{...}): sync: ", `"sometimes"`} {
		if !strings.Contains(text, want) {
			t.Errorf("error does not mention %q:\n%s", want, text)
		}
	}
}

// A duration below the spec's millisecond used to become 0, the default
// (SyncInterval 500µs ran with 100 ms); Build reports it instead.
func TestDurabilitySubMillisecond(t *testing.T) {
	for _, tc := range []struct {
		d    arkflow.Durability
		want string
	}{
		{arkflow.Durability{Sync: wal.SyncPeriodic, SyncInterval: 500 * time.Microsecond}, "SyncInterval: must be 0 (the default) or at least 1ms (got 500µs)"},
		{arkflow.Durability{ParkLease: time.Microsecond}, "ParkLease: must be 0 (the default) or at least 1ms (got 1µs)"},
		{arkflow.Durability{DrainTimeout: time.Nanosecond}, "DrainTimeout: must be 0 (the default) or at least 1ms (got 1ns)"},
	} {
		tc.d.Path = t.TempDir()
		job := arkflow.NewJob("j").Source("in", clickConfig()).Sink("out", mem.NewSink()).Durability(tc.d)
		if _, err := job.Build(); err == nil || !strings.Contains(err.Error(), ".Durability(arkflow.Durability{...}): "+tc.want) {
			t.Errorf("Durability: %v, want %q", err, tc.want)
		}
		src := arkflow.NewJob("j").Source("in", clickConfig(), arkflow.Durable(tc.d)).Sink("out", mem.NewSink())
		if _, err := src.Build(); err == nil || !strings.Contains(err.Error(), `operator "in": Durable(arkflow.Durability{...}): `+tc.want) {
			t.Errorf("Durable: %v, want %q", err, tc.want)
		}
	}
	ok := arkflow.Durability{Path: t.TempDir(), Sync: wal.SyncPeriodic, SyncInterval: time.Millisecond}
	if _, err := arkflow.NewJob("j").Source("in", clickConfig()).Sink("out", mem.NewSink()).Durability(ok).Build(); err != nil {
		t.Errorf("1ms: %v", err)
	}
}
