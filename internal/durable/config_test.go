package durable

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

func boolp(b bool) *bool { return &b }

// specWith builds a spec whose job-wide durability block is jobBlock and
// whose sources carry the given blocks ("" means no block).
func specWith(jobBlock string, srcBlocks ...string) *job.Spec {
	s := &job.Spec{ID: "j"}
	if jobBlock != "" {
		s.Durability = json.RawMessage(jobBlock)
	}
	for i, b := range srcBlocks {
		src := job.Source{OperatorID: fmt.Sprintf("src%d", i), InputType: "generate"}
		if b != "" {
			src.Durability = json.RawMessage(b)
		}
		s.Sources = append(s.Sources, src)
	}
	return s
}

func resolveAll(s *job.Spec) ([]*job.Durability, [][]*job.FieldError) {
	cfgs := make([]*job.Durability, len(s.Sources))
	probs := make([][]*job.FieldError, len(s.Sources))
	for i := range s.Sources {
		cfgs[i], probs[i] = Resolve(s, &s.Sources[i], fmt.Sprintf("sources[%d]", i))
	}
	return cfgs, probs
}

// TestResolveEffectiveConfig covers which sources get a WAL and with what
// settings: the job-wide block applies to every source and a source's block
// is merged over it field by field.
func TestResolveEffectiveConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		jobBlock string
		src      []string
		want     []*job.Durability
	}{
		{
			name: "no blocks: durability off",
			src:  []string{"", ""},
			want: []*job.Durability{nil, nil},
		},
		{
			name:     "job-wide only: every source gets it",
			jobBlock: `{"sync":"always","park_lease_ms":250}`,
			src:      []string{"", ""},
			want: []*job.Durability{
				{Sync: "always", ParkLeaseMS: 250},
				{Sync: "always", ParkLeaseMS: 250},
			},
		},
		{
			name:     "empty job-wide block: on with defaults",
			jobBlock: `{}`,
			src:      []string{""},
			want:     []*job.Durability{{Sync: "group_commit"}},
		},
		{
			name: "source block only: only that source",
			src:  []string{"", `{"path":"/w"}`},
			want: []*job.Durability{nil, {Path: "/w", Sync: "group_commit"}},
		},
		{
			name:     "source block merged over job-wide field by field",
			jobBlock: `{"sync":"always","park_lease_ms":100,"drain_timeout_ms":7}`,
			src:      []string{`{"path":"/x","park_lease_ms":200}`, ""},
			want: []*job.Durability{
				{Path: "/x", Sync: "always", ParkLeaseMS: 200, DrainTimeoutMS: 7},
				{Sync: "always", ParkLeaseMS: 100, DrainTimeoutMS: 7},
			},
		},
		{
			name:     "source overrides a bad job-wide value",
			jobBlock: `{"sync":"bogus"}`,
			src:      []string{`{"sync":"none"}`},
			want:     []*job.Durability{{Sync: "none"}},
		},
		{
			name:     "enabled false in a source block turns it off for that source only",
			jobBlock: `{"sync":"always"}`,
			src:      []string{`{"enabled":false}`, ""},
			want:     []*job.Durability{nil, {Sync: "always"}},
		},
		{
			name:     "enabled false job-wide, a source turns it back on",
			jobBlock: `{"enabled":false,"sync":"periodic","sync_interval_ms":20}`,
			src:      []string{"", `{"enabled":true}`},
			want:     []*job.Durability{nil, {Enabled: boolp(true), Sync: "periodic", SyncIntervalMS: 20}},
		},
		{
			name: "per_entry is always",
			src:  []string{`{"sync":"per_entry"}`},
			want: []*job.Durability{{Sync: "always"}},
		},
		{
			name: "every sync mode",
			src:  []string{`{"sync":"always"}`, `{"sync":"group_commit"}`, `{"sync":"periodic"}`, `{"sync":"none"}`},
			want: []*job.Durability{{Sync: "always"}, {Sync: "group_commit"}, {Sync: "periodic"}, {Sync: "none"}},
		},
		{
			name: "segment_bytes 4096 is the minimum",
			src:  []string{`{"segment_bytes":4096,"retain":true}`},
			want: []*job.Durability{{Sync: "group_commit", SegmentBytes: 4096, Retain: true}},
		},
		{
			name: "no_recycle",
			src:  []string{`{"no_recycle":true}`},
			want: []*job.Durability{{Sync: "group_commit", NoRecycle: true}},
		},
		{
			name: "local backend named explicitly or defaulted",
			src:  []string{`{"backend":{"type":"local"}}`, `{"backend":{}}`},
			want: []*job.Durability{
				{Sync: "group_commit", Backend: &job.WALBackend{Type: job.WALBackendLocal}},
				{Sync: "group_commit", Backend: &job.WALBackend{Type: job.WALBackendLocal}},
			},
		},
		{
			name:     "object store, backend merged field by field",
			jobBlock: `{"backend":{"type":"object_store","node_id":"n1","s3":{"bucket":"b","region":"r"}}}`,
			src:      []string{`{"backend":{"stream_id":"st","s3":{"endpoint":"https://e"}}}`},
			want: []*job.Durability{{Sync: "group_commit", Backend: &job.WALBackend{
				Type: job.WALBackendObjectStore, NodeID: "n1", StreamID: "st",
				S3: &job.WALObjectStore{Bucket: "b", Region: "r", Endpoint: "https://e"},
			}}},
		},
		{
			name: "plain-HTTP endpoint with allow_http",
			src:  []string{`{"backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b","endpoint":"http://minio:9000","allow_http":true}}}`},
			want: []*job.Durability{{Sync: "group_commit", Backend: &job.WALBackend{
				Type: job.WALBackendObjectStore, NodeID: "n",
				S3: &job.WALObjectStore{Bucket: "b", Endpoint: "http://minio:9000", AllowHTTP: true},
			}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := resolveAll(specWith(tc.jobBlock, tc.src...))
			for i := range got {
				if len(probs[i]) > 0 {
					t.Fatalf("source %d: unexpected problems %+v", i, probs[i])
				}
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("source %d: got %s, want %s", i, dump(got[i]), dump(tc.want[i]))
				}
			}
		})
	}
}

func dump(c *job.Durability) string {
	if c == nil {
		return "nil"
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// TestResolveProblems checks that each mistake is reported with the full
// path of its field in the spec, and that problems of the job-wide block are
// marked JobWide.
func TestResolveProblems(t *testing.T) {
	t.Parallel()
	type want struct {
		field   string
		jobWide bool
		reason  string // a substring of the reason
	}
	cases := []struct {
		name     string
		jobBlock string
		src      string
		want     []want
	}{
		{
			name: "bad sync in a source block",
			src:  `{"sync":"sometimes"}`,
			want: []want{{"sources[0].durability.sync", false, `must be one of always, group_commit, periodic, none (got "sometimes")`}},
		},
		{
			name:     "bad sync in the job-wide block",
			jobBlock: `{"sync":"sometimes"}`,
			want:     []want{{"durability.sync", true, `(got "sometimes")`}},
		},
		{
			name:     "bad job-wide sync is reported job-wide even with a source block",
			jobBlock: `{"sync":"sometimes"}`,
			src:      `{"path":"/x"}`,
			want:     []want{{"durability.sync", true, `(got "sometimes")`}},
		},
		{
			name: "unknown field in a source block",
			src:  `{"synk":"always"}`,
			want: []want{{"sources[0].durability.synk", false, "unknown field"}},
		},
		{
			name:     "unknown field in the job-wide block",
			jobBlock: `{"pth":"/x"}`,
			want:     []want{{"durability.pth", true, "unknown field"}},
		},
		{
			name:     "unknown fields in both blocks are all reported",
			jobBlock: `{"a":1}`,
			src:      `{"b":2}`,
			want: []want{
				{"durability.a", true, "unknown field"},
				{"sources[0].durability.b", false, "unknown field"},
			},
		},
		{
			name: "unknown nested field",
			src:  `{"backend":{"type":"object_store","s3":{"bucket":"b","secret":"x"}}}`,
			want: []want{{"sources[0].durability.backend.s3.secret", false, "unknown field"}},
		},
		{
			name: "wrong type",
			src:  `{"park_lease_ms":"soon"}`,
			want: []want{{"sources[0].durability.park_lease_ms", false, "integer"}},
		},
		{
			name: "negative ms values and segment size",
			src:  `{"sync_interval_ms":-1,"park_lease_ms":-2,"drain_timeout_ms":-3,"segment_bytes":-4}`,
			want: []want{
				{"sources[0].durability.sync_interval_ms", false, "must not be negative (got -1)"},
				{"sources[0].durability.park_lease_ms", false, "must not be negative (got -2)"},
				{"sources[0].durability.drain_timeout_ms", false, "must not be negative (got -3)"},
				{"sources[0].durability.segment_bytes", false, "must not be negative (got -4)"},
			},
		},
		{
			name:     "negative job-wide value",
			jobBlock: `{"drain_timeout_ms":-5}`,
			want:     []want{{"durability.drain_timeout_ms", true, "must not be negative (got -5)"}},
		},
		{
			name: "segment_bytes below 4096",
			src:  `{"segment_bytes":4095}`,
			want: []want{{"sources[0].durability.segment_bytes", false, "must be at least 4096 (got 4095)"}},
		},
		{
			name: "several problems at once",
			src:  `{"sync":"x","segment_bytes":1}`,
			want: []want{
				{"sources[0].durability.sync", false, `(got "x")`},
				{"sources[0].durability.segment_bytes", false, "at least 4096"},
			},
		},
		{
			name: "object_store without node_id",
			src:  `{"backend":{"type":"object_store","s3":{"bucket":"b"}}}`,
			want: []want{{"sources[0].durability.backend.node_id", false, "is required for object_store"}},
		},
		{
			name: "object_store with an empty node_id",
			src:  `{"backend":{"type":"object_store","node_id":"","s3":{"bucket":"b"}}}`,
			want: []want{{"sources[0].durability.backend.node_id", false, "is required"}},
		},
		{
			name: "object_store without s3",
			src:  `{"backend":{"type":"object_store","node_id":"n"}}`,
			want: []want{{"sources[0].durability.backend.s3.bucket", false, "is required for object_store"}},
		},
		{
			name: "object_store without s3.bucket",
			src:  `{"backend":{"type":"object_store","node_id":"n","s3":{"region":"r"}}}`,
			want: []want{{"sources[0].durability.backend.s3.bucket", false, "is required for object_store"}},
		},
		{
			name: "object_store with path",
			src:  `{"path":"/x","backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b"}}}`,
			want: []want{{"sources[0].durability.path", false, "object_store"}},
		},
		{
			name:     "job-wide object_store without node_id",
			jobBlock: `{"backend":{"type":"object_store","s3":{"bucket":"b"}}}`,
			want:     []want{{"durability.backend.node_id", true, "is required"}},
		},
		{
			name:     "source path over a job-wide object_store is the source's problem",
			jobBlock: `{"backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b"}}}`,
			src:      `{"path":"/x"}`,
			want:     []want{{"sources[0].durability.path", false, "object_store"}},
		},
		{
			name: "plain-HTTP endpoint without allow_http",
			src:  `{"backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b","endpoint":"http://minio:9000"}}}`,
			want: []want{{"sources[0].durability.backend.s3.endpoint", false, `"http://minio:9000" is plain HTTP: set allow_http`}},
		},
		{
			name: "endpoint of another scheme",
			src:  `{"backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b","endpoint":"ftp://minio:9000"}}}`,
			want: []want{{"sources[0].durability.backend.s3.endpoint", false, `"ftp://minio:9000": the scheme must be http or https`}},
		},
		{
			name: "unknown backend type",
			src:  `{"backend":{"type":"nfs"}}`,
			want: []want{{"sources[0].durability.backend.type", false, `must be local or object_store (got "nfs")`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := specWith(tc.jobBlock, tc.src)
			cfg, probs := Resolve(s, &s.Sources[0], "sources[0]")
			if cfg != nil {
				t.Errorf("config %s with problems, want nil", dump(cfg))
			}
			if len(probs) != len(tc.want) {
				t.Fatalf("got %d problems %+v, want %d %+v", len(probs), probs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				p := probs[i]
				jobWide := strings.HasPrefix(p.Path, "durability.")
				if p.Path != w.field || jobWide != w.jobWide || !strings.Contains(p.Reason, w.reason) {
					t.Errorf("problem %d: got {Path:%q Reason:%q} (job-wide %v), want path %q jobWide %v reason containing %q",
						i, p.Path, p.Reason, jobWide, w.field, w.jobWide, w.reason)
				}
			}
		})
	}
}

// TestResolveJobWideProblemIsIdenticalPerSource: every source inheriting a
// bad job-wide block reports the same Problem value, so the validator can
// report it once (it dedups by value).
func TestResolveJobWideProblemIsIdenticalPerSource(t *testing.T) {
	t.Parallel()
	s := specWith(`{"sync":"bogus"}`, "", "", `{"path":"/y"}`)
	_, probs := resolveAll(s)
	for i := range probs {
		if len(probs[i]) != 1 {
			t.Fatalf("source %d: problems %+v, want 1", i, probs[i])
		}
		if *probs[i][0] != *probs[0][0] {
			t.Errorf("source %d reports %+v, source 0 %+v", i, probs[i][0], probs[0][0])
		}
	}
}

// TestResolveDoesNotAlias checks that resolving one source does not change
// the configuration resolved for another (the job-wide block is decoded
// afresh for each).
func TestResolveDoesNotAlias(t *testing.T) {
	t.Parallel()
	s := specWith(`{"backend":{"type":"object_store","node_id":"n","s3":{"bucket":"b"}}}`, `{"backend":{"node_id":"m"}}`, "")
	cfgs, probs := resolveAll(s)
	if len(probs[0])+len(probs[1]) > 0 {
		t.Fatalf("problems %+v", probs)
	}
	if cfgs[0].Backend.NodeID != "m" || cfgs[1].Backend.NodeID != "n" {
		t.Fatalf("node IDs %q, %q; want m, n", cfgs[0].Backend.NodeID, cfgs[1].Backend.NodeID)
	}
	if cfgs[0].Backend == cfgs[1].Backend || cfgs[0].Backend.S3 == cfgs[1].Backend.S3 {
		t.Fatal("sources share a backend value")
	}
	if !ObjectStore(cfgs[0]) || !ObjectStore(cfgs[1]) {
		t.Fatal("ObjectStore() false for an object_store backend")
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	dir, err := Dir(&job.Durability{Path: "/x"}, "/data", "job1", "src", 3)
	if err != nil || dir != filepath.Join("/x", "src", "3") {
		t.Errorf("with path: %q, %v; want /x/src/3", dir, err)
	}
	dir, err = Dir(&job.Durability{Path: "/x"}, "", "job1", "src", 0)
	if err != nil || dir != filepath.Join("/x", "src", "0") {
		t.Errorf("with path, no data dir: %q, %v; want /x/src/0", dir, err)
	}
	dir, err = Dir(&job.Durability{}, "/data", "job1", "src", 2)
	if err != nil || dir != filepath.Join("/data", "job1", "wal", "src", "2") {
		t.Errorf("from the data dir: %q, %v; want /data/job1/wal/src/2", dir, err)
	}
	_, err = Dir(&job.Durability{}, "", "job1", "src", 0)
	if err == nil {
		t.Fatal("no path and no data dir: no error")
	}
	for _, s := range []string{"src", "durability.path", "data directory", "--data-dir", "WithDataDir"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	c := &job.Durability{Sync: "periodic", SyncIntervalMS: 5, ParkLeaseMS: 6, DrainTimeoutMS: 7}
	got := Options(c)
	want := walog.Options{Sync: walog.SyncPeriodic, SyncInterval: 5 * time.Millisecond, ParkLease: 6 * time.Millisecond, DrainTimeout: 7 * time.Millisecond}
	if got.Sync != want.Sync || got.SyncInterval != want.SyncInterval || got.ParkLease != want.ParkLease || got.DrainTimeout != want.DrainTimeout {
		t.Errorf("Options() = %+v, want %+v", got, want)
	}
	if ObjectStore(&job.Durability{}) || ObjectStore(&job.Durability{Backend: &job.WALBackend{Type: job.WALBackendLocal}}) {
		t.Error("ObjectStore() true for a local backend")
	}
}
