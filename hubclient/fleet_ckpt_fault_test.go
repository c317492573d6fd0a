package hubclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore/ckpttest"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// userCount is a row of the keyed window's output.
type userCount struct {
	User   string
	Start  time.Time `arkflow:"window_start"`
	Clicks int64
}

// keyedFleetJob is generate (3 partitions, KeyedBy User) → keyed 1 s
// tumbling count → funcsink: the window is co-partitioned with the
// source, so the plan has three placement units, each with window state.
func keyedFleetJob(clicks *atomic.Int64, storeURI string) *arkflow.Builder {
	return arkflow.NewJob("keyed").Parallelism(3).
		Source("gen", generate.Config{Partitions: 3, RatePerSec: 2000, BatchSize: 100, Fields: []generate.Field{
			{Name: "User", Type: "string", Cardinality: 50},
			{Name: "TS", Type: "timestamp"},
		}}, arkflow.KeyedBy("User"), arkflow.EventTime{Field: "TS", PerRow: true}).
		KeyBy("User").
		Window("w", window.Tumbling(time.Second, job.Count("Clicks"))).
		Sink("out", funcsink.Func[userCount](func(_ context.Context, rows []userCount) error {
			for _, r := range rows {
				clicks.Add(r.Clicks)
			}
			return nil
		})).
		State(job.State{Backend: "memory"}).
		Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: storeURI})
}

// testStore is the checkpoint store of a test: a MinIO bucket when
// ARKFLOW_TEST_S3_ENDPOINT is set (with ARKFLOW_TEST_S3_ACCESS_KEY and
// _SECRET_KEY), else a file:// directory. It returns the store's URI, the
// options the Agents open it with, and the store opened for the test.
func testStore(t *testing.T) (string, checkpoint.StoreOptions, ckptstore.Store) {
	t.Helper()
	uri, opts := "file://"+t.TempDir(), checkpoint.StoreOptions{}
	var in ckptstore.StoreOptions
	if endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT"); endpoint != "" {
		access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
		c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
		if err != nil {
			t.Fatal(err)
		}
		bucket := fmt.Sprintf("fleet-fault-%d", time.Now().UnixNano())
		if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
		uri = "s3://" + bucket + "/ckpt"
		opts = checkpoint.StoreOptions{Endpoint: endpoint, AccessKeyID: access, SecretAccessKey: secret, AllowHTTP: true}
		in.Options = blob.Options{Endpoint: endpoint, AccessKeyID: access, SecretAccessKey: secret, AllowHTTP: true}
	}
	st, err := ckptstore.OpenStore(context.Background(), uri, in)
	if err != nil {
		t.Fatal(err)
	}
	return uri, opts, st
}

// hubAPI is a Hub on loopback with operator auth off.
type hubAPI struct {
	t   *testing.T
	url string // the server's base URL
}

func newHubAPI(t *testing.T, lease time.Duration) *hubAPI {
	t.Helper()
	h, err := hub.New(hub.Config{DataDir: t.TempDir(), InsecureNoAuth: true, Lease: lease,
		PollInterval: 20 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: logLevel}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &hubAPI{t: t, url: srv.URL}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// do sends a JSON request to the operator API and decodes the reply into
// out (nil: ignore it); it fails the test on a status other than want.
func (h *hubAPI) do(method, path string, body, out any, want int) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.url+"/api/v1"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		h.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

func (h *hubAPI) detail(jobID string) hubwire.JobDetail {
	var d hubwire.JobDetail
	h.do("GET", "/jobs/"+jobID+"/detail", nil, &d, 200)
	return d
}

// records are the job's checkpoint records, newest first.
func (h *hubAPI) records(jobID string) []hubwire.JobCheckpointRecord {
	var r []hubwire.JobCheckpointRecord
	h.do("GET", "/jobs/"+jobID+"/checkpoints", nil, &r, 200)
	return r
}

func (h *hubAPI) record(jobID, id string) hubwire.JobCheckpointRecord {
	for _, r := range h.records(jobID) {
		if r.CheckpointID == id {
			return r
		}
	}
	return hubwire.JobCheckpointRecord{}
}

// startAgent runs an Agent until the test ends.
func startAgent(t *testing.T, h *hubAPI, node string, b *arkflow.Builder, store checkpoint.StoreOptions, setup func(*hubclient.Agent)) {
	t.Helper()
	a, err := hubclient.New(hubclient.Config{HubURL: h.url, NodeID: node, DataDir: t.TempDir(), Jobs: []*arkflow.Builder{b}, CheckpointStore: store,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: logLevel}))})
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// sameID says the catalog's id dir (no leading zeros) names the Hub's id.
func sameID(dir, hubID string) bool {
	a, err1 := strconv.ParseUint(dir, 10, 64)
	b, err2 := strconv.ParseUint(hubID, 10, 64)
	return err1 == nil && err2 == nil && a == b
}

// faultyStores wraps every checkpoint store an Agent opens in a
// ckpttest.FaultStore and arms or heals them all at once (a job's runtime
// and a commit of a job the Agent does not run open their own).
type faultyStores struct {
	mu     sync.Mutex
	armed  bool
	stores []*ckpttest.FaultStore
}

func (fs *faultyStores) wrap(s ckptstore.Store) ckptstore.Store {
	f := ckpttest.NewFaultStore(s)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.armed {
		arm(f)
	}
	fs.stores = append(fs.stores, f)
	return f
}

// arm fails every upload: puts and creates, state objects and manifests.
func arm(f *ckpttest.FaultStore) {
	f.Fail(ckpttest.OpPut, nil)
	f.Fail(ckpttest.OpCreate, nil)
}

func (fs *faultyStores) set(on bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.armed = on
	for _, f := range fs.stores {
		if f.Heal(); on {
			arm(f)
		}
	}
}

// puts counts the uploads tried through the wrapped stores.
func (fs *faultyStores) puts() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := 0
	for _, f := range fs.stores {
		n += f.Calls(ckpttest.OpPut) + f.Calls(ckpttest.OpCreate)
	}
	return n
}

// TestFleetCheckpointPartFault runs a Hub and three real Agents, each
// running one placement unit of a keyed job (source → co-partitioned
// window → Go sink), with one file:// checkpoint store. One Agent's store
// refuses every upload for one round: its part fails, so the Hub fails
// the round and never sends the commit; no manifest is sealed for that
// id, LATEST stays on the previous checkpoint, which stays the newest
// completed, and the job's checkpoint health is degraded with one
// failure. With the fault lifted, the next round
// completes: health healthy, LATEST moved, and its manifest lists every
// task of the plan.
func TestFleetCheckpointPartFault(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs three Agents and a Hub")
	}
	h := newHubAPI(t, 0)
	storeURI, storeOpts, store := testStore(t)
	ctx := context.Background()
	const jobID = "keyed"
	var clicks [3]atomic.Int64
	faulty := &faultyStores{}
	var spec json.RawMessage
	for i, n := range []string{"a", "b", "c"} {
		b := keyedFleetJob(&clicks[i], storeURI)
		if spec == nil {
			spec, _ = json.Marshal(b.Spec())
		}
		var setup func(*hubclient.Agent)
		if n == "c" {
			setup = func(a *hubclient.Agent) { hubclient.SetWrapStore(a, faulty.wrap) }
		}
		startAgent(t, h, n, b, storeOpts, setup)
	}
	polltest.Eventually(t, "three Agents online", func() bool {
		var p hubwire.Page[hubwire.HubNode]
		h.do("GET", "/nodes", nil, &p, 200)
		on := 0
		for _, n := range p.Items {
			if n.State == hubwire.NodeOnline {
				on++
			}
		}
		return on == 3
	})
	h.do("POST", "/jobs", map[string]any{"spec": spec, "desired_state": "running"}, nil, 202)
	polltest.Eventually(t, "the job running on three Agents", func() bool {
		d := h.detail(jobID)
		if d.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job failed: %+v", d.Job)
		}
		return d.Job.ObservedState == hubwire.JobRunning && len(d.Assignments) == 3
	})
	polltest.Eventually(t, "rows out of every unit", func() bool {
		return clicks[0].Load() > 0 && clicks[1].Load() > 0 && clicks[2].Load() > 0
	})

	latest := func() string {
		rd, err := store.Get(ctx, jobID+"/checkpoints/LATEST")
		if err != nil {
			return ""
		}
		defer rd.Close()
		b, _ := io.ReadAll(rd)
		return strings.TrimSpace(string(b))
	}
	sealed := func(id string) bool { // a committed manifest.json for the Hub's id
		keys, err := store.List(ctx, jobID+"/checkpoints/")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if dir, ok := strings.CutSuffix(k, "/manifest.json"); ok && sameID(path.Base(dir), id) {
				return true
			}
		}
		return false
	}
	checkpoint := func() string {
		var rec hubwire.JobRecord
		h.do("POST", "/jobs/"+jobID+"/checkpoints", nil, &rec, 202)
		if rec.CheckpointID == "" {
			t.Fatal("the trigger returned no checkpoint id")
		}
		return rec.CheckpointID
	}
	finished := func(id string) hubwire.JobCheckpointRecord {
		var r hubwire.JobCheckpointRecord
		polltest.Eventually(t, "checkpoint "+id+" finished", func() bool {
			r = h.record(jobID, id)
			return r.Status == "completed" || r.Status == "failed"
		})
		return r
	}

	// The Hub's first periodic round starts once the job runs; the next
	// is an hour away. Wait for it to end, so that the rounds below are
	// the only ones (a manual round beside it would race it: the lower id
	// fails when the higher commits first).
	polltest.Eventually(t, "the first periodic round ended", func() bool {
		r := h.records(jobID)
		return len(r) > 0 && r[0].Status != "pending"
	})
	cp1 := checkpoint()
	if r := finished(cp1); r.Status != "completed" {
		t.Fatalf("first round: %+v", r)
	}
	if !sealed(cp1) || !sameID(latest(), cp1) {
		t.Fatalf("after round %s: sealed %v, LATEST %q", cp1, sealed(cp1), latest())
	}
	if hl := h.detail(jobID).CheckpointHealth; hl == nil || hl.State != "healthy" || hl.ConsecutiveFailures != 0 {
		t.Fatalf("health after the first round: %+v", hl)
	}

	// Agent c's store refuses uploads for one round.
	faulty.set(true)
	before := faulty.puts()
	cp2 := checkpoint()
	r2 := finished(cp2)
	if r2.Status != "failed" {
		t.Fatalf("the round with c's uploads failing: %+v", r2)
	}
	if faulty.puts() == before {
		t.Fatal("c never tried to upload its part: the fault was not exercised")
	}
	if !strings.Contains(r2.Error, "job_checkpoint on c") {
		t.Fatalf("the failed record does not name c's part: %q", r2.Error)
	}
	t.Logf("failed round %s: %s", cp2, r2.Error)
	if sealed(cp2) {
		t.Fatalf("checkpoint %s was sealed without c's part", cp2)
	}
	if !sameID(latest(), cp1) {
		t.Fatalf("LATEST moved to %q after the failed round, want %s", latest(), cp1)
	}
	var newest string
	for _, r := range h.records(jobID) { // newest first
		if r.Kind == "checkpoint" && r.Status == "completed" {
			newest = r.CheckpointID
			break
		}
	}
	if newest != cp1 {
		t.Fatalf("newest completed checkpoint %s, want %s", newest, cp1)
	}
	d := h.detail(jobID)
	if hl := d.CheckpointHealth; hl == nil || hl.State != "degraded" || hl.ConsecutiveFailures != 1 || hl.LastCompletedCheckpointID != cp1 {
		t.Fatalf("health after the failed round: %+v", hl)
	}
	if d.Job.ObservedState != hubwire.JobRunning {
		t.Fatalf("the job is %s after a failed round, want running", d.Job.ObservedState)
	}

	// The fault lifted, the next round completes.
	faulty.set(false)
	cp3 := checkpoint()
	if r := finished(cp3); r.Status != "completed" {
		t.Fatalf("the round after the fault: %+v", r)
	}
	if hl := h.detail(jobID).CheckpointHealth; hl == nil || hl.State != "healthy" || hl.ConsecutiveFailures != 0 || hl.LastCompletedCheckpointID != cp3 {
		t.Fatalf("health after the fault was lifted: %+v", hl)
	}
	if !sameID(latest(), cp3) {
		t.Fatalf("LATEST %q, want %s", latest(), cp3)
	}
	var m ckptstore.Manifest
	rd, err := store.Get(ctx, jobID+"/checkpoints/"+latest()+"/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"gen-0", "gen-1", "gen-2", "out-0", "out-1", "out-2", "w-0", "w-1", "w-2"}
	var got []string
	for _, a := range m.TaskAttempts {
		got = append(got, a.TaskID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || !slices.Equal(m.PlannedTasks, want) {
		t.Fatalf("manifest of %s: attempts %v, planned %v, want %v", cp3, got, m.PlannedTasks, want)
	}
	if len(m.StateSnapshots) != 3 {
		t.Fatalf("manifest of %s has %d state snapshots, want the three windows'", cp3, len(m.StateSnapshots))
	}
}

var logLevel = func() slog.Level {
	if os.Getenv("ARKFLOW_TEST_DEBUG") != "" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}()
