package arkflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/file"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// One configuration vocabulary: a job built with every Builder
// call that writes a spec block goes builder → JSON (and YAML) → Parse →
// plan unchanged, and every JSON key of every spec block is written by
// some Builder call, so a new spec field the Builder cannot set, or a
// Builder option the decoder reads differently, fails here.

type rtClick struct {
	User   string  `arkflow:"user"`
	Amount float64 `arkflow:"amount"`
	TS     int64   `arkflow:"ts"`
}

// roundTripJob uses every Builder call that writes the spec.
func roundTripJob(dir string) *arkflow.Builder {
	// The two sources' blocks between them set every durability field:
	// a local log needs a path, which the object store refuses.
	on := true
	local := job.Durability{
		Enabled:        &on,
		Path:           filepath.Join(dir, "wal"),
		Sync:           job.SyncPeriodic,
		SyncIntervalMS: 50,
		ParkLeaseMS:    90_000,
		DrainTimeoutMS: 20_000,
		SegmentBytes:   1 << 20,
		Retain:         true,
		NoRecycle:      true,
	}
	remote := job.Durability{
		Sync:        job.SyncAlways,
		ParkLeaseMS: 45_000,
		Backend: &job.WALBackend{
			Type: job.WALBackendObjectStore, NodeID: "node-1", StreamID: "rt", Prefix: "wal/rt",
			S3: &job.WALObjectStore{
				Bucket: "bucket", Endpoint: "http://127.0.0.1:9", Region: "eu-west-1",
				AccessKeyID: "key", SecretAccessKey: "secret", AllowHTTP: true,
			},
		},
	}
	views := generate.Config{Seed: 1, Count: 100, BatchSize: 10, Fields: []generate.Field{
		{Name: "user", Type: "string", Cardinality: 5},
		{Name: "amount", Type: "float64"},
		{Name: "ts", Type: "int64"},
	}}
	every := []job.Aggregate{job.Count("n"), job.Sum("amount", "total"), job.Min("amount", "lo"), job.Max("amount", "hi"),
		job.Avg("amount", "mean"), job.First("amount", "first"), job.Last("amount", "last")}
	ns := int64(3_600_000)
	b := arkflow.NewJob("roundtrip").
		Version(7).
		Parallelism(2).
		MaxParallelism(64).
		State(job.State{Path: filepath.Join(dir, "state"), Namespace: "rt", TTLMS: &ns, FormatVersion: 1}).
		Checkpoint(job.Checkpoint{IntervalMS: 5000, Retention: 5, ObjectStoreURI: "file://" + filepath.Join(dir, "ckpt")}).
		Durability(job.Durability{Sync: job.SyncGroupCommit, DrainTimeoutMS: 10_000}).
		// Branch 1: a Go push source, every out-of-orderness option, late
		// rows routed to a late sink, its own durability block.
		Source("clicks", push.New(push.Config[rtClick]{Partitions: 2}),
			arkflow.EventTime{Field: "ts", OutOfOrderness: 2 * time.Second, IdleTimeout: 10 * time.Second, PerRow: true, AdvanceWhenIdle: time.Second, AllowedLateness: time.Minute, RouteLate: "late"},
			arkflow.Durable(remote),
			arkflow.WithParallelism(2)).
		LateSink("late", mem.NewSink()).
		Columns("cols", job.Columns{
			Set:    []job.Column{{Name: "cents", Expr: "amount * 100"}},
			Drop:   []string{"cents"},
			Select: []string{"user", "amount", "ts"},
		}).
		Where("big", "amount > 1").
		KeyBy("user").
		Window("tumbling", window.Tumbling(time.Minute, every...)).
		Sink("tumbling-out", mem.NewSink()).
		From("big").KeyBy("user").
		Window("sliding", window.Sliding(time.Minute, 10*time.Second, every...)).
		Sink("sliding-out", mem.NewSink()).
		From("big").KeyBy("user").
		Window("session", window.Session(30*time.Second, every...)).
		Sink("session-out", mem.NewSink()).
		// Go functions: they travel as names and need bindings.
		From("big").
		Map("gofn", arkflow.MapFunc(func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			rec.Retain()
			return rec, nil
		})).
		Filter("gofilter", arkflow.FilterFunc(func(_ context.Context, rec arrow.RecordBatch) ([]bool, error) {
			return make([]bool, rec.NumRows()), nil
		})).
		KeyBy("user").
		Process("proc", arkflow.ProcessFunc(func(_ context.Context, _ *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
			rec.Retain()
			return rec, nil
		}), arkflow.WithParallelism(1)).
		Sink("fn-out", funcsink.Func[rtClick](func(context.Context, []rtClick) error { return nil })).
		// Branch 2: a declarative source, monotonous, late updates, a
		// running aggregate with every function, emitting once at the end.
		Source("views", views,
			arkflow.EventTime{Field: "ts", Monotonous: true, AllowedLateness: time.Second, LateUpdate: true},
			arkflow.Durable(local), arkflow.KeyedBy("user")).
		KeyBy("user").
		Aggregate("totals", job.Final(every...)).
		Sink("totals-out", file.SinkConfig{Path: filepath.Join(dir, "totals-{subtask}.jsonl")}).
		// Branch 3: two sources joined three ways, between them setting
		// every key of a join's config.
		Source("persons", rtPersons, arkflow.EventTime{Field: "ts"}).
		Source("auctions", rtAuctions, arkflow.EventTime{Field: "ts"}).
		Join("window-join", job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller",
			Outer: true, Size: time.Minute, Slide: 10 * time.Second, LeftPrefix: "p_", RightPrefix: "a_"}).
		Sink("window-join-out", mem.NewSink()).
		Join("interval-join", job.Join{Type: job.JoinInterval, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id",
			Lower: -time.Minute, Upper: time.Second}).
		Sink("interval-join-out", mem.NewSink()).
		Join("temporal-join", job.Join{Type: job.JoinTemporal, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id",
			DeletedField: "gone", Retention: 30 * time.Second}).
		Sink("temporal-join-out", mem.NewSink())
	if sqlengine.Lookup() != nil {
		// A map running SQL, when the test links the engine (cgo).
		b.From("big").SQL("sql", "SELECT upper(user) AS user, amount, ts FROM flow").Sink("sql-out", mem.NewSink())
	}
	return b
}

// rtPersons and rtAuctions are the sides of the round-trip job's joins.
var (
	rtPersons = generate.Config{Seed: 2, Count: 10, Fields: []generate.Field{
		{Name: "id", Type: "string", Cardinality: 5},
		{Name: "gone", Type: "bool"},
		{Name: "ts", Type: "int64"},
	}}
	rtAuctions = generate.Config{Seed: 3, Count: 10, Fields: []generate.Field{
		{Name: "seller", Type: "string", Cardinality: 5},
		{Name: "ts", Type: "int64"},
	}}
)

// roundTripGoOperators are the operators whose Go value a decoded spec
// lacks (no bindings).
var roundTripGoOperators = []string{"clicks", "gofn", "gofilter", "proc", "fn-out"}

func TestRoundTripBuilderSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := roundTripJob(dir)
	if _, err := b.Build(arkflow.WithDataDir(filepath.Join(dir, "data"))); err != nil {
		t.Fatalf("the round-trip job does not validate with its bindings:\n%v", err)
	}
	built := b.Spec()
	builtVersion, err := planner.NewVersion(built)
	if err != nil {
		t.Fatal(err)
	}
	builtPlan, err := planner.NewPlan(built)
	if err != nil {
		t.Fatal(err)
	}

	for _, enc := range []struct {
		name   string
		encode func() ([]byte, error)
	}{{"JSON", built.JSON}, {"YAML", built.YAML}} {
		t.Run(enc.name, func(t *testing.T) {
			data, err := enc.encode()
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := job.Parse(data)
			if err != nil {
				t.Fatalf("Parse(%s) of the Builder's spec: %v\n%s", enc.name, err, data)
			}
			// (a) The same job: equal canonical forms, digests and specs.
			v, err := planner.NewVersion(decoded)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v.Canonical(), builtVersion.Canonical()) {
				t.Errorf("decoded canonical spec differs:\nbuilt   %s\ndecoded %s", builtVersion.Canonical(), v.Canonical())
			}
			if v.Digest != builtVersion.Digest || v.Number != builtVersion.Number {
				t.Errorf("decoded version %d %s, built %d %s", v.Number, v.Digest, builtVersion.Number, builtVersion.Digest)
			}
			if !reflect.DeepEqual(v.Spec(), builtVersion.Spec()) {
				t.Errorf("decoded canonical spec is not DeepEqual to the built one:\nbuilt   %+v\ndecoded %+v", builtVersion.Spec(), v.Spec())
			}
			// Decoding is a fixed point: the decoded spec re-encodes to
			// bytes that decode to it again. (Not the Builder's bytes:
			// Parse keeps component configs with their keys sorted.)
			again, err := decoded.JSON()
			if err != nil {
				t.Fatal(err)
			}
			twice, err := job.Parse(again)
			if err != nil {
				t.Fatal(err)
			}
			if again2, _ := twice.JSON(); !bytes.Equal(again, again2) {
				t.Errorf("the decoded spec is no fixed point of JSON → Parse:\nonce  %s\ntwice %s", again, again2)
			}
			// (c) The same plan.
			p, err := planner.NewPlan(decoded)
			if err != nil {
				t.Fatal(err)
			}
			if p.Digest != builtPlan.Digest {
				t.Errorf("plan digest %s, built %s", p.Digest, builtPlan.Digest)
			}
			if !reflect.DeepEqual(p, builtPlan) {
				t.Errorf("decoded plan differs:\nbuilt   %s\ndecoded %s", builtPlan, p)
			}
			// Go functions do not travel: without bindings the decoded
			// spec fails validation, naming each of them.
			err = arkflow.Validate(decoded, arkflow.WithDataDir(filepath.Join(dir, "data")))
			if err == nil {
				t.Fatal("the decoded spec validated without the bindings of its Go functions")
			}
			named := map[string]bool{}
			for _, e := range job.AsValidationErrors(err) {
				named[e.Operator] = true
			}
			for _, id := range roundTripGoOperators {
				if !named[id] {
					t.Errorf("validation without bindings does not name %q:\n%v", id, err)
				}
			}
			for id := range named {
				if !contains(roundTripGoOperators, id) {
					t.Errorf("validation without bindings names %q, which has no Go value:\n%v", id, err)
				}
			}
		})
	}
}

// roundTripUnset are the spec keys the Builder deliberately does not set
// (or sets only to their default), with the reason.
var roundTripUnset = map[string]string{
	"recovery":             "no Builder call: restarts take the default latest_checkpoint; FromSavepoint is a run option",
	"state.format_version": "only format 1 exists, so State(job.State{FormatVersion: 1}) writes the default",
	"operators[kind=join].config.window.gap_ms": "a window join takes tumbling or sliding windows, which have no gap",
	"operators[kind=map].config.table_name":     "Builder.SQL names the batch flow; table_name is for specs that name it otherwise",
}

// roundTripConfigs are the config types of the operator kinds with a
// config: what the runtime decodes them into.
var roundTripConfigs = map[string]reflect.Type{
	job.KindJoin:      reflect.TypeOf(windowop.JoinConfig{}),
	job.KindMap:       reflect.TypeOf(ops.MapConfig{}),
	job.KindFilter:    reflect.TypeOf(ops.FilterConfig{}),
	job.KindAggregate: reflect.TypeOf(ops.AggregateConfig{}),
	job.KindWindow:    reflect.TypeOf(windowop.Config{}),
	// A udf reads only function (ops.MapConfig's other keys are refused).
	job.KindUDF: reflect.TypeOf(struct {
		Function string `json:"function"`
	}{}),
}

// roundTripDefaults are the values ApplyDefaults fills in: a key holding
// only its default does not show that the Builder can set it.
var roundTripDefaults = map[string]any{
	"version":                int64(jobdefaults.Version),
	"max_parallelism":        int64(jobdefaults.MaxParallelism),
	"parallelism":            int64(1),
	"checkpoint.interval_ms": int64(jobdefaults.CheckpointIntervalMS),
	"checkpoint.retention":   int64(jobdefaults.CheckpointRetention),
	"state.format_version":   int64(jobdefaults.StateFormatVersion),
	"recovery":               string(job.RecoverLatestCheckpoint),
}

// TestRoundTripBuilderSetsEveryKey walks the spec's types and the
// durability block's, and requires every JSON key to hold a value other
// than zero (and other than its default) somewhere in the built spec.
func TestRoundTripBuilderSetsEveryKey(t *testing.T) {
	t.Parallel()
	built := roundTripJob(t.TempDir()).Spec()
	w := &keyWalk{set: map[string]bool{}, seen: map[string]bool{}}
	w.walk("", reflect.ValueOf(built).Elem())
	// Operator configs, by kind, as the type their kind decodes.
	kinds := map[string]bool{}
	for _, op := range built.Operators {
		kinds[op.Kind] = true
		cfg, ok := roundTripConfigs[op.Kind]
		if !ok {
			continue
		}
		v := reflect.New(cfg)
		if len(op.Config) > 0 {
			if err := json.Unmarshal(op.Config, v.Interface()); err != nil {
				t.Fatalf("operator %s: config: %v", op.ID, err)
			}
		}
		w.walk("operators[kind="+op.Kind+"].config", v.Elem())
	}
	for _, k := range planner.Kinds {
		if !kinds[k] {
			t.Errorf("the round-trip job has no operator of kind %q", k)
		}
	}
	var missing []string
	for path := range w.seen {
		_, allowed := roundTripUnset[path]
		if path == "operators[kind=map].config.sql" && sqlengine.Lookup() == nil {
			allowed = true // no SQL engine in a test built without cgo
		}
		switch {
		case !w.set[path] && !allowed:
			missing = append(missing, path)
		case w.set[path] && allowed:
			t.Errorf("%s is whitelisted as not set by the Builder, but the built spec sets it: drop it from roundTripUnset", path)
		}
	}
	for path := range roundTripUnset {
		if !w.seen[path] {
			t.Errorf("roundTripUnset names %s, which is no spec key", path)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("spec key %s is zero or its default in the round-trip job: set it with a Builder call in roundTripJob, or add it to roundTripUnset with the reason the Builder cannot", p)
	}
	// The walk reaches every block.
	for _, p := range []string{"operators[].key_field", "sources[].time.watermark.all_idle_delay_ms", "state.ttl_ms", "checkpoint.object_store_uri", "durability.backend.s3.allow_http", "sources[].durability", "durability.backend.node_id", "sinks[].output_type", "edges[].partitioned", "operators[kind=window].config.window.gap_ms", "operators[kind=filter].config.function", "operators[kind=aggregate].config.emit", "operators[kind=join].config.lower_ms"} {
		if !w.seen[p] {
			t.Errorf("the walk did not reach %s", p)
		}
	}
}

// keyWalk records, for every JSON key path ("[]" for any element), whether
// it was seen and whether some value at it is set.
type keyWalk struct{ set, seen map[string]bool }

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

func (w *keyWalk) walk(path string, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		w.value(p, v.Field(i))
	}
}

func (w *keyWalk) value(p string, v reflect.Value) {
	w.seen[p] = true
	switch {
	case v.Type() == rawMessage:
		if len(v.Bytes()) > 0 {
			w.set[p] = true
		}
		// The durability blocks are walked as the job.Durability they
		// decode to, under one path: the job's and each source's block
		// are the same vocabulary, written by the same job.Durability, so
		// a key set in any of them counts.
		if strings.HasSuffix(p, "durability") {
			p = "durability"
			var c job.Durability
			if len(v.Bytes()) > 0 {
				if err := json.Unmarshal(v.Bytes(), &c); err != nil {
					panic(p + ": " + err.Error())
				}
			}
			w.walk(p, reflect.ValueOf(&c).Elem())
		}
		return
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			w.typeOnly(p, v.Type().Elem())
			return
		}
		w.value(p, v.Elem())
		return
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		for i := 0; i < v.Len(); i++ {
			w.walk(p+"[]", v.Index(i))
		}
		w.typeOnly(p+"[]", v.Type().Elem())
		if v.Len() > 0 {
			w.set[p] = true
		}
		return
	case v.Kind() == reflect.Struct:
		w.set[p] = true
		w.walk(p, v)
		return
	}
	if v.IsZero() {
		return
	}
	if d, ok := roundTripDefaults[p]; ok {
		var got any
		switch v.Kind() {
		case reflect.Int, reflect.Int64, reflect.Int32:
			got = v.Int()
		case reflect.Uint, reflect.Uint64, reflect.Uint32:
			got = int64(v.Uint())
		case reflect.String:
			got = v.String()
		}
		if got == d {
			return
		}
	}
	w.set[p] = true
}

// typeOnly marks the keys under a struct type as seen, so a block absent
// from every element still lists its keys as unset.
func (w *keyWalk) typeOnly(p string, t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	w.walk(p, reflect.New(t).Elem())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
