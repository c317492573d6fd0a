package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/file"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	httpconn "github.com/arkflow-rs/arkflow-go/connectors/http"
	"github.com/arkflow-rs/arkflow-go/connectors/kafka"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/mqtt"
	"github.com/arkflow-rs/arkflow-go/connectors/nats"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/connectors/redis"
	sqlconn "github.com/arkflow-rs/arkflow-go/connectors/sql"
	"github.com/arkflow-rs/arkflow-go/connectors/websocket"
	"github.com/arkflow-rs/arkflow-go/hub"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// family is one metric family as METRICS.md lists it.
type family struct {
	Name string
	// Type is counter, gauge or histogram.
	Type string
	// Labels are the constant labels (job) and then the variable ones,
	// in the collector's order.
	Labels []string
	Help   string
}

// section is the families of one collector.
type section struct {
	// ID names the section's prose in render.go: job, connectors, agent
	// or hub.
	ID       string
	Families []family
}

// notGathered are the types of the job's families that no job built
// through the public API exports today, so no Gather can show them: an
// operator's own counters and gauges that have no family of their own
// (Job.Metrics' TaskMetrics.Counters and Gauges; every built-in one has
// a family). Their type is the one of the map they come from.
var notGathered = map[string]string{
	"arkflow_operator_events_total": "counter",
	"arkflow_operator_value":        "gauge",
}

// sections drives the collectors and returns their families: the job's
// first, then its connectors', the Agent's and the Hub's.
func sections(ctx context.Context) ([]section, error) {
	dir, err := os.MkdirTemp("", "metricsdoc")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	jobFams, err := jobFamilies(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("the job's families: %w", err)
	}
	connFams, err := connectorFamilies(dir, jobFams)
	if err != nil {
		return nil, fmt.Errorf("the connectors' families: %w", err)
	}
	agentFams, hubFams, err := fleetFamilies(ctx, dir, jobFams)
	if err != nil {
		return nil, fmt.Errorf("the Agent's and the Hub's families: %w", err)
	}
	return []section{
		{ID: "job", Families: jobFams},
		{ID: "connectors", Families: connFams},
		{ID: "agent", Families: agentFams},
		{ID: "hub", Families: hubFams},
	}, nil
}

// jobFamilies lists what Job.Collector describes, typed by what jobs that
// export every family (but the notGathered ones) gather.
func jobFamilies(ctx context.Context, dir string) ([]family, error) {
	full, stop, err := runFullJob(ctx, filepath.Join(dir, "full"))
	if err != nil {
		return nil, err
	}
	defer stop()
	fams, err := describe(full.Collector())
	if err != nil {
		return nil, err
	}
	types := map[string]gathered{}
	collectors := []prometheus.Collector{full.Collector()}
	bounded, err := runBoundedJobs(ctx, filepath.Join(dir, "bounded"))
	if err != nil {
		return nil, err
	}
	for _, j := range bounded {
		collectors = append(collectors, j.Collector())
	}
	for _, c := range collectors {
		g, err := gather(c)
		if err != nil {
			return nil, err
		}
		for name, x := range g {
			types[name] = x
		}
	}
	return typed(fams, types, notGathered)
}

type click struct {
	User string    `arkflow:"user"`
	TS   time.Time `arkflow:"ts"`
}

// runFullJob runs a job with a write-ahead log, event time over two
// partitions with an idle timeout, a keyed window, a sink and
// checkpoints, until a window fired and a checkpoint committed. stop
// ends it and waits for its Run to return.
func runFullJob(ctx context.Context, dir string) (j *arkflow.Job, stop func(), err error) {
	src := push.New(push.Config[click]{Partitions: 2})
	j, err = arkflow.NewJob("doc").
		Durability(job.Durability{Path: filepath.Join(dir, "wal")}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + filepath.Join(dir, "store")}).
		Source("in", src, arkflow.EventTime{Field: "ts", IdleTimeout: 50 * time.Millisecond}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", mem.NewSink()).
		Build(arkflow.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); runErr <- j.Run(runCtx) }()
	stop = func() { cancel(); <-done }
	defer func() {
		if err != nil {
			stop()
		}
	}()
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 3 {
		if err := src.Push(ctx, click{"ann", t0.Add(time.Duration(i) * 1500 * time.Millisecond)}); err != nil {
			return nil, nil, err
		}
	}
	err = poll(ctx, "a window fired", func() (bool, error) {
		select {
		case err := <-runErr:
			return false, fmt.Errorf("the job ended: %v", err)
		default:
		}
		return j.Metrics().Operator("w").Counters["windows_fired"] >= 1, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if _, err := j.Checkpoint(ctx); err != nil {
		return nil, nil, err
	}
	return j, stop, nil
}

// runBoundedJobs runs to their end a job reading a generate source with a
// count (its position and end in rows) and one reading a file (in bytes).
func runBoundedJobs(ctx context.Context, dir string) ([]*arkflow.Job, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lines := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(lines, []byte("{\"n\":1}\n{\"n\":2}\n"), 0o644); err != nil {
		return nil, err
	}
	builders := []*arkflow.Builder{
		arkflow.NewJob("doc-generate").
			Source("in", generate.Config{Count: 100, Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
			Sink("out", mem.NewSink()),
		arkflow.NewJob("doc-file").
			Source("in", file.SourceConfig{Path: lines, Schema: connectors.Schema{{Name: "n", Type: "int64"}}}).
			Sink("out", mem.NewSink()),
	}
	var jobs []*arkflow.Job
	for i, b := range builders {
		j, err := b.Build(arkflow.WithDataDir(filepath.Join(dir, strconv.Itoa(i))))
		if err != nil {
			return nil, err
		}
		if err := j.Run(ctx); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// connectorFamilies lists the families jobs with a Kafka source and
// sink, a NATS JetStream source and sink, a core NATS source and sink, an
// SQL source and sink, an HTTP source and sink, a WebSocket source, an
// MQTT source and sink and a Redis streams source and sink describe beyond
// the job's own (jobFams), typed as the connectors declare them. The jobs
// are built, not run: they need no broker, server or database.
func connectorFamilies(dir string, jobFams []family) ([]family, error) {
	brokers := []string{"127.0.0.1:9"}
	schema := connectors.Schema{{Name: "n", Type: "int64"}}
	const url = "nats://127.0.0.1:9"
	redisMode := redis.Mode{Type: redis.ModeSingle, URL: "redis://127.0.0.1:9"}
	builders := map[string]*arkflow.Builder{
		"kafka": arkflow.NewJob("doc-kafka").
			Source("in", kafka.SourceConfig{Brokers: brokers, Topics: []string{"in"}, ConsumerGroup: "doc", Schema: schema}).
			Sink("out", kafka.SinkConfig{Brokers: brokers, Topic: "out"}),
		"nats-js": arkflow.NewJob("doc-nats-js").
			Source("in", nats.SourceConfig{URL: url, Mode: nats.SourceMode{Type: nats.ModeJetStream, Stream: "IN", ConsumerName: "doc"}, Schema: schema}).
			Sink("out", nats.SinkConfig{URL: url, Mode: nats.SinkMode{Type: nats.ModeJetStream, Subject: "out"}}),
		"sql": arkflow.NewJob("doc-sql").
			Source("in", sqlconn.SourceConfig{Database: sqlconn.DB{Type: sqlconn.SQLite, Path: filepath.Join(dir, "doc.db")}, TableName: "in", TrackingColumn: "n", Schema: schema}).
			Sink("out", sqlconn.SinkConfig{Database: sqlconn.DB{Type: sqlconn.SQLite, Path: filepath.Join(dir, "doc.db")}, TableName: "out"}),
		"redis": arkflow.NewJob("doc-redis").
			Source("in", redis.SourceConfig{Mode: redisMode, RedisType: redis.SourceType{Type: redis.TypeStream, Streams: []string{"in"}, Group: "doc"}, Schema: schema}).
			Sink("out", redis.SinkConfig{Mode: redisMode, RedisType: redis.SinkType{Type: redis.TypeStream, Key: &redis.Expr{Value: "out"}}}),
		"http": arkflow.NewJob("doc-http").
			Source("in", httpconn.SourceConfig{Address: "127.0.0.1:9", Format: httpconn.FormatNDJSON, Schema: schema}).
			Sink("out", httpconn.SinkConfig{URL: "http://127.0.0.1:9/"}),
		"nats-core": arkflow.NewJob("doc-nats-core").
			Source("in", nats.SourceConfig{URL: url, Mode: nats.SourceMode{Type: nats.ModeRegular, Subject: "in"}, Schema: schema}).
			Sink("out", nats.SinkConfig{URL: url, Mode: nats.SinkMode{Type: nats.ModeRegular, Subject: "out"}}),
		"websocket": arkflow.NewJob("doc-websocket").
			Source("in", websocket.SourceConfig{URL: "ws://127.0.0.1:9/feed", Schema: schema}).
			Sink("out", drop.Config{}),
		"mqtt": arkflow.NewJob("doc-mqtt").
			Source("in", mqtt.SourceConfig{Host: "127.0.0.1", Port: 9, ClientID: "doc", Topics: []string{"in"}, Schema: schema}).
			Sink("out", mqtt.SinkConfig{Host: "127.0.0.1", Port: 9, ClientID: "doc-out", Topic: mqtt.Topic{Value: "out"}}),
	}
	var fams []family
	for name, b := range builders {
		j, err := b.Build(arkflow.WithDataDir(filepath.Join(dir, name)))
		if err != nil {
			return nil, err
		}
		fs, err := describe(j.Collector())
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if !named(fams, f.Name) && !named(jobFams, f.Name) {
				fams = append(fams, f)
			}
		}
	}
	declared := map[string]string{}
	natsFams, err := natsFamilies()
	if err != nil {
		return nil, err
	}
	httpFams, err := httpFamilies()
	if err != nil {
		return nil, err
	}
	wsFams, err := inputFamilies(websocket.Type, `{"url":"ws://127.0.0.1:9/feed"}`)
	if err != nil {
		return nil, err
	}
	mqttFams, err := mqttFamilies()
	if err != nil {
		return nil, err
	}
	redisFams, err := inputFamilies(redis.Type, `{"mode":{"type":"single","url":"redis://127.0.0.1:9"},"redis_type":{"type":"stream","streams":["s"],"group":"g"}}`)
	if err != nil {
		return nil, err
	}
	for _, f := range slices.Concat((&kafka.Input{}).MetricFamilies(), (&kafka.Output{}).MetricFamilies(), natsFams,
		(&sqlconn.Input{}).MetricFamilies(), (&sqlconn.Output{}).MetricFamilies(), httpFams, wsFams, mqttFams, redisFams) {
		kind := "gauge"
		if f.Kind == connectors.Counter {
			kind = "counter"
		}
		declared["arkflow_"+f.Name] = kind
	}
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.Name, b.Name) })
	return typed(fams, nil, declared)
}

// inputFamilies returns the families inputs of a registered type declare,
// built from configs.
func inputFamilies(typ string, configs ...string) ([]connectors.MetricFamily, error) {
	f, ok := connectors.LookupInput(typ)
	if !ok {
		return nil, fmt.Errorf("input type %q is not registered", typ)
	}
	var out []connectors.MetricFamily
	for _, c := range configs {
		in, err := f(connectors.BuildContext{Config: []byte(c)})
		if err != nil {
			return nil, fmt.Errorf("%s input %s: %w", typ, c, err)
		}
		if m, ok := in.(connectors.MetricFamilies); ok {
			out = append(out, m.MetricFamilies()...)
		}
	}
	return out, nil
}

// natsFamilies returns the families the NATS inputs and outputs declare
// (their types are the package's own: built through the registry).
func natsFamilies() ([]connectors.MetricFamily, error) {
	var out []connectors.MetricFamily
	in, _ := connectors.LookupInput(nats.Type)
	outp, _ := connectors.LookupOutput(nats.Type)
	for _, mode := range []string{`{"type":"jet_stream","stream":"S","consumer_name":"c"}`, `{"type":"regular","subject":"s"}`} {
		i, err := in(connectors.BuildContext{Config: []byte(`{"url":"nats://127.0.0.1:9","mode":` + mode + `}`)})
		if err != nil {
			return nil, err
		}
		out = append(out, i.(connectors.MetricFamilies).MetricFamilies()...)
	}
	o, err := outp(connectors.BuildContext{Config: []byte(`{"url":"nats://127.0.0.1:9","mode":{"type":"jet_stream","subject":"s"},"msg_id_fields":["n"]}`)}, nil)
	if err != nil {
		return nil, err
	}
	return append(out, o.(connectors.MetricFamilies).MetricFamilies()...), nil
}

// httpFamilies returns the families the HTTP input and output declare
// (built through the registry, as their types are the package's own).
func httpFamilies() ([]connectors.MetricFamily, error) {
	in, _ := connectors.LookupInput(httpconn.Type)
	outp, _ := connectors.LookupOutput(httpconn.Type)
	i, err := in(connectors.BuildContext{Config: []byte(`{"address":"127.0.0.1:9"}`)})
	if err != nil {
		return nil, err
	}
	o, err := outp(connectors.BuildContext{Config: []byte(`{"url":"http://127.0.0.1:9/"}`)}, nil)
	if err != nil {
		return nil, err
	}
	return slices.Concat(i.(connectors.MetricFamilies).MetricFamilies(), o.(connectors.MetricFamilies).MetricFamilies()), nil
}

// mqttFamilies returns the families the MQTT input and output declare
// (their types are the package's own: built through the registry).
func mqttFamilies() ([]connectors.MetricFamily, error) {
	in, _ := connectors.LookupInput(mqtt.Type)
	outp, _ := connectors.LookupOutput(mqtt.Type)
	i, err := in(connectors.BuildContext{Config: []byte(`{"host":"127.0.0.1","client_id":"doc","topics":["in"]}`)})
	if err != nil {
		return nil, err
	}
	o, err := outp(connectors.BuildContext{Config: []byte(`{"host":"127.0.0.1","client_id":"doc","topic":"out"}`)}, nil)
	if err != nil {
		return nil, err
	}
	return append(i.(connectors.MetricFamilies).MetricFamilies(), o.(connectors.MetricFamilies).MetricFamilies()...), nil
}

// fleetFamilies runs a Hub and one Agent in this process, has the Agent
// run a job and the Hub drive a checkpoint of it, and lists the Agent's
// own families (those it gathers beyond the job's, jobFams) and what the
// Hub's collector describes.
func fleetFamilies(ctx context.Context, dir string, jobFams []family) (agentFams, hubFams []family, err error) {
	h, err := hub.New(hub.Config{DataDir: filepath.Join(dir, "hub"), InsecureNoAuth: true,
		PollInterval: 20 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond})
	if err != nil {
		return nil, nil, err
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()

	type row struct{ N int64 }
	var rows atomic.Int64
	b := arkflow.NewJob("doc-fleet").
		Checkpoint(job.Checkpoint{IntervalMS: 60_000, ObjectStoreURI: "file://" + filepath.Join(dir, "fleet-store")}).
		Source("gen", generate.Config{RatePerSec: 1000, BatchSize: 50, Fields: []generate.Field{{Name: "N", Type: "int64", Sequence: true}}}).
		Sink("out", funcsink.Func[row](func(_ context.Context, rs []row) error { rows.Add(int64(len(rs))); return nil }))
	agent, err := hubclient.New(hubclient.Config{HubURL: srv.URL, NodeID: "doc", DataDir: filepath.Join(dir, "agent"),
		Jobs: []*arkflow.Builder{b}})
	if err != nil {
		return nil, nil, err
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = agent.Run(agentCtx) }()
	defer func() { stopAgent(); <-agentDone }()

	api := srv.URL + "/api/v1"
	spec, err := json.Marshal(b.Spec())
	if err != nil {
		return nil, nil, err
	}
	err = poll(ctx, "the Agent registered", func() (bool, error) { return agent.Status().Registered, nil })
	if err != nil {
		return nil, nil, err
	}
	if err := call(ctx, "POST", api+"/jobs", hubwire.SubmitJobRequest{Spec: spec, DesiredState: "running"}, http.StatusAccepted); err != nil {
		return nil, nil, err
	}
	err = poll(ctx, "the job running on the Agent", func() (bool, error) {
		for _, js := range agent.Status().Jobs {
			if js.State == hubwire.JobFailed {
				return false, fmt.Errorf("the job failed: %s", js.Error)
			}
			if js.State == hubwire.JobRunning && rows.Load() > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, err
	}
	// The Hub takes a checkpoint once it has observed the job running,
	// a report after the Agent did.
	err = poll(ctx, "the Hub to take a checkpoint", func() (bool, error) {
		err := call(ctx, "POST", api+"/jobs/doc-fleet/checkpoints", nil, http.StatusAccepted)
		if errors.Is(err, errConflict) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, nil, err
	}
	var hubTypes map[string]gathered
	err = poll(ctx, "the Hub's checkpoint round ended", func() (bool, error) {
		hubTypes, err = gather(h.Collector())
		_, ok := hubTypes["arkflow_hub_checkpoint_rounds_total"]
		return ok, err
	})
	if err != nil {
		return nil, nil, err
	}

	hubFams, err = describe(h.Collector())
	if err != nil {
		return nil, nil, err
	}
	if hubFams, err = typed(hubFams, hubTypes, nil); err != nil {
		return nil, nil, err
	}
	agentTypes, err := gather(agent.Collector())
	if err != nil {
		return nil, nil, err
	}
	for name, g := range agentTypes {
		if named(jobFams, name) {
			continue // a job's, collected through the Agent
		}
		if !strings.HasPrefix(name, "arkflow_agent_") {
			return nil, nil, fmt.Errorf("the Agent exports %s, which is neither a job's family nor arkflow_agent_*", name)
		}
		agentFams = append(agentFams, family{Name: name, Type: g.Type, Labels: g.Labels, Help: g.Help})
	}
	slices.SortFunc(agentFams, func(a, b family) int { return strings.Compare(a.Name, b.Name) })
	return agentFams, hubFams, nil
}

// named reports whether fams has a family called name.
func named(fams []family, name string) bool {
	return slices.ContainsFunc(fams, func(f family) bool { return f.Name == name })
}

// descPattern parses prometheus.Desc.String, the only way to read a
// descriptor's parts: Desc{fqName: "…", help: "…", constLabels: {job="…"},
// variableLabels: {operator,subtask}}.
var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), constLabels: \{(.*)\}, variableLabels: \{([^{}]*)\}\}$`)

// constLabel is one constant label of a descriptor: name="value".
var constLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)

// describe lists the families a collector describes, untyped, in the
// order it sends them.
func describe(c prometheus.Collector) ([]family, error) {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []family
	var errs []error
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			errs = append(errs, fmt.Errorf("cannot read the descriptor %s (has prometheus.Desc.String changed?)", d))
			continue
		}
		name, err1 := strconv.Unquote(m[1])
		help, err2 := strconv.Unquote(m[2])
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, fmt.Errorf("descriptor %s: %w", d, err))
			continue
		}
		var labels []string
		for _, l := range constLabel.FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		if m[4] != "" {
			labels = append(labels, strings.Split(m[4], ",")...)
		}
		out = append(out, family{Name: name, Labels: labels, Help: help})
	}
	return out, errors.Join(errs...)
}

// gathered is what a Gather shows of one family.
type gathered struct {
	Type string
	// Labels are the label names of its series, sorted.
	Labels []string
	Help   string
}

// gather registers c in a registry of its own and gathers it.
func gather(c prometheus.Collector) (map[string]gathered, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]gathered{}
	for _, mf := range mfs {
		g := gathered{Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(g.Labels, l.GetName()) {
					g.Labels = append(g.Labels, l.GetName())
				}
			}
		}
		slices.Sort(g.Labels)
		out[mf.GetName()] = g
	}
	return out, nil
}

// typed sets each family's type from what was gathered or, for the
// families no Gather shows, from fallback. A described family with
// neither, a fallback for a gathered one (stale), or a gathered family
// whose labels are not those described is an error.
func typed(fams []family, types map[string]gathered, fallback map[string]string) ([]family, error) {
	var errs []error
	for i, f := range fams {
		g, ok := types[f.Name]
		fb, hasFallback := fallback[f.Name]
		switch {
		case ok && hasFallback:
			errs = append(errs, fmt.Errorf("%s is gathered now (as a %s): drop its fallback type", f.Name, g.Type))
			continue
		case hasFallback:
			fams[i].Type = fb
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("%s is described but nothing the command runs exports it, so its type is unknown: make something export it", f.Name))
			continue
		}
		fams[i].Type = g.Type
		want := slices.Sorted(slices.Values(f.Labels))
		if !slices.Equal(want, g.Labels) {
			errs = append(errs, fmt.Errorf("%s is described with the labels %v but gathered with %v", f.Name, f.Labels, g.Labels))
		}
	}
	for name := range fallback {
		if !named(fams, name) {
			errs = append(errs, fmt.Errorf("%s has a fallback type but is not described", name))
		}
	}
	return fams, errors.Join(errs...)
}

// errConflict is call's error for a 409 it did not want: the Hub is not
// ready for the request yet.
var errConflict = errors.New("409 Conflict")

// call sends a JSON request to the Hub's API and checks its status.
func call(ctx context.Context, method, url string, body any, want int) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict && want != http.StatusConflict {
		return errConflict
	}
	if resp.StatusCode != want {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, url, resp.StatusCode, want, msg.String())
	}
	return nil
}

// poll calls cond every 10 ms until it holds, fails, or ctx ends.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
