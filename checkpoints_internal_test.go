package arkflow

import (
	"reflect"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/runtime"
)

// CheckpointStatus is the runtime's, field for field: a field the runtime
// adds and the conversion forgets fails here.
func TestCheckpointStatusCarriesEveryField(t *testing.T) {
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
