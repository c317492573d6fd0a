package arkflow

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// CheckpointStatus is the runtime's, field for field: a field the runtime
// adds and the conversion forgets fails here.
func TestCheckpointStatusCarriesEveryField(t *testing.T) {
	t.Parallel()
	in := runtime.CheckpointStatus{Enabled: true, Healthy: true, Completed: 1, Failures: 2, ConsecutiveFailures: 2, LastError: "e", LastID: "7",
		LastDuration: time.Second, LastPause: time.Millisecond, LastBytes: 3, LastCompleted: time.Unix(1, 0), Restored: "checkpoint 6",
		Recovery: runtime.RecoveryProgress{BytesRestored: 1, BytesTotal: 2, KeysRestored: 3, SnapshotsRestored: 4, SnapshotsTotal: 5, Done: true}}
	rv := reflect.ValueOf(in)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Fatalf("the test leaves runtime.CheckpointStatus.%s zero: set it", rv.Type().Field(i).Name)
		}
	}
	out := reflect.ValueOf(checkpointStatus(in))
	if out.NumField() != rv.NumField() {
		t.Fatalf("CheckpointStatus has %d fields, the runtime's %d", out.NumField(), rv.NumField())
	}
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		f := out.FieldByName(name)
		if !f.IsValid() || f.IsZero() {
			t.Errorf("CheckpointStatus.%s is not carried over", name)
		}
	}
}

// The checkpoint status's JSON, as /status serves it: snake_case names,
// durations in nanoseconds, no last_completed before a commit; and a job
// without checkpoints has nothing to restore (recovery done).
func TestCheckpointStatusJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(CheckpointStatus{Enabled: true, Healthy: true, Completed: 2, LastID: "7", LastDuration: 1500 * time.Millisecond, Recovery: RecoveryProgress{BytesTotal: 10, Done: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"enabled":true,"healthy":true,"completed":2,"failures":0,"consecutive_failures":0,"last_id":"7","last_duration_ns":1500000000,"last_pause_ns":0,"last_bytes":0,` +
		`"recovery":{"bytes_restored":0,"bytes_total":10,"keys_restored":0,"snapshots_restored":0,"snapshots_total":0,"done":true}}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	var back CheckpointStatus
	if err := json.Unmarshal(b, &back); err != nil || back.LastDuration != 1500*time.Millisecond || back.Recovery.BytesTotal != 10 {
		t.Errorf("round trip: %+v, %v", back, err)
	}

	j, err := NewJob("plain").Source("in", generate.Config{Count: 10, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).Sink("out", drop.Config{}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Metrics().Checkpoints; c.Enabled || !c.Recovery.Done {
		t.Errorf("a job without checkpoints, before Run: %+v; want not enabled, recovery done", c)
	}
}
