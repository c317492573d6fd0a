package arkflow

import (
	"reflect"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// resolve is what the deep build makes of the blocks the builder wrote.
func resolve(t *testing.T, jobWide, own *job.Durability) *job.Durability {
	t.Helper()
	s := &job.Spec{ID: "j", Sources: []job.Source{{OperatorID: "in"}}}
	if jobWide != nil {
		s.Durability = durabilitySpec(*jobWide)
	}
	if own != nil {
		s.Sources[0].Durability = durabilitySpec(*own)
	}
	cfg, probs := durable.Resolve(s, &s.Sources[0], "sources[0]")
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	return cfg
}

// The builder and the spec decoder share job.Durability (the builder
// once mirrored the decoder's type by hand and lost no_recycle):
// every field the builder sets comes back from the decoder.
func TestDurabilityBlockRoundTrips(t *testing.T) {
	t.Parallel()
	on := true
	full := job.Durability{Enabled: &on, Path: "p", Sync: job.SyncPeriodic, SyncIntervalMS: 1, ParkLeaseMS: 2, DrainTimeoutMS: 3,
		SegmentBytes: 4096, Retain: true, NoRecycle: true, Backend: &job.WALBackend{Type: job.WALBackendLocal}}
	if got := resolve(t, nil, &full); !reflect.DeepEqual(*got, full) {
		t.Errorf("local block: got %+v, want %+v", *got, full)
	}
	remote := job.Durability{Sync: job.SyncAlways, Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "n", StreamID: "s", Prefix: "x",
		S3: &job.WALObjectStore{Bucket: "b", Endpoint: "http://e:9000", Region: "r", AccessKeyID: "a", SecretAccessKey: "k", AllowHTTP: true}}}
	if got := resolve(t, &remote, nil); !reflect.DeepEqual(*got, remote) {
		t.Errorf("object-store block: got %+v, want %+v", *got, remote)
	}
}

// A source's block is merged over the job-wide one key by key: what it
// sets wins, its zero fields inherit, inside the backend too; Enabled
// false turns an inherited block off.
func TestDurabilityMergesPerField(t *testing.T) {
	t.Parallel()
	jobWide := job.Durability{Sync: job.SyncAlways, Retain: true, DrainTimeoutMS: 10, Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "n",
		S3: &job.WALObjectStore{Bucket: "b", Region: "r"}}}
	own := job.Durability{ParkLeaseMS: 5, DrainTimeoutMS: 20, Backend: &job.WALBackend{S3: &job.WALObjectStore{Bucket: "mine"}}}
	want := job.Durability{Sync: job.SyncAlways, Retain: true, ParkLeaseMS: 5, DrainTimeoutMS: 20, Backend: &job.WALBackend{Type: job.WALBackendObjectStore, NodeID: "n",
		S3: &job.WALObjectStore{Bucket: "mine", Region: "r"}}}
	if got := resolve(t, &jobWide, &own); !reflect.DeepEqual(*got, want) {
		t.Errorf("merged: got %+v, want %+v", *got, want)
	}
	if got := resolve(t, &jobWide, nil); got.ParkLeaseMS != 0 || got.DrainTimeoutMS != 10 || got.Backend.S3.Bucket != "b" {
		t.Errorf("inherited: %+v", *got)
	}
	off := false
	if got := resolve(t, &jobWide, &job.Durability{Enabled: &off}); got != nil {
		t.Errorf("Enabled false: got %+v, want no WAL", *got)
	}
	if got := resolve(t, nil, &job.Durability{}); got == nil || got.Sync != job.SyncGroupCommit {
		t.Errorf("an empty block: got %+v, want a WAL with the default sync", got)
	}
}

// The public sync modes are the log's: the durable wrapper converts one
// into the other by value.
func TestSyncModesAreTheLogs(t *testing.T) {
	t.Parallel()
	for _, p := range [][2]string{
		{string(job.SyncAlways), string(walog.SyncAlways)},
		{string(job.SyncGroupCommit), string(walog.SyncGroupCommit)},
		{string(job.SyncPeriodic), string(walog.SyncPeriodic)},
		{string(job.SyncNone), string(walog.SyncNone)},
	} {
		if p[0] != p[1] {
			t.Errorf("wal sync mode %q, walog's %q", p[0], p[1])
		}
	}
}
