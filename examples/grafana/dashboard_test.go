// Package grafana_test checks arkflow-job.json, the Grafana dashboard for
// the metrics of Job.Collector and `arkflow agent --metrics-addr`: that
// it is a dashboard Grafana lays out (ids, grid, data source variable)
// and that every series it queries is one the library exports, with the
// labels it groups by. A renamed family or label
// fails here instead of leaving an empty panel.
package grafana_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/kafka"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("arkflow-job.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("arkflow-job.json: %v", err)
	}
	return d
}

// TestDashboardLayout: unique panel ids, panels inside the 24-column grid
// and not on top of each other, every query panel on the datasource
// variable, and the job variable the queries filter by.
func TestDashboardLayout(t *testing.T) {
	d := load(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: want both", d.Title, d.UID)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "datasource") || !slices.Contains(vars, "job") {
		t.Errorf("template variables %v, want datasource and job", vars)
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	queries := 0
	for _, p := range d.Panels {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: grid %+v outside the 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at column %d, row %d", p.Title, other, x, y)
					goto next
				}
				taken[cell{x, y}] = p.Title
			}
		}
	next:
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if strings.Count(q.Expr, "(") != strings.Count(q.Expr, ")") || strings.Count(q.Expr, "{") != strings.Count(q.Expr, "}") {
				t.Errorf("panel %q: unbalanced query %q", p.Title, q.Expr)
			}
			if strings.Contains(q.Expr, "arkflow_") && !strings.Contains(q.Expr, "arkflow_agent_") && !strings.Contains(q.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: query %q does not filter by the job variable", p.Title, q.Expr)
			}
		}
	}
	if queries < 30 {
		t.Errorf("%d queries; the dashboard lost its panels", queries)
	}
}

var (
	metricName = regexp.MustCompile(`\barkflow_[a-z0-9_]+`)
	// by matches "by (a, b)" and the metric-bearing expression after it up
	// to the next metric name.
	byClause = regexp.MustCompile(`by \(([a-z_, ]+)\) \(\s*(?:[a-z_]+\()?(?:[0-9.]+, )?(?:sum by \([a-z_, ]+\) \()?(?:rate\(|increase\()?(arkflow_[a-z0-9_]+)`)
)

// TestDashboardQueriesExportedFamilies: every arkflow_ name a query uses
// is a family the library exports (a histogram's _bucket/_sum/_count of
// one), and every label a query groups by is one of that family's.
func TestDashboardQueriesExportedFamilies(t *testing.T) {
	fams := exported(t)
	d := load(t)
	used := map[string]bool{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, name := range metricName.FindAllString(q.Expr, -1) {
				base := name
				if _, ok := fams[name]; !ok {
					for _, suf := range []string{"_bucket", "_sum", "_count"} {
						if b, ok := strings.CutSuffix(name, suf); ok {
							if f, ok := fams[b]; ok && f.histogram {
								base = b
							}
						}
					}
				}
				if _, ok := fams[base]; !ok {
					t.Errorf("panel %q queries %s, which nothing exports", p.Title, name)
					continue
				}
				used[base] = true
				if strings.HasSuffix(name, "_bucket") && base == name {
					t.Errorf("panel %q: %s is not a histogram's buckets", p.Title, name)
				}
			}
			for _, m := range byClause.FindAllStringSubmatch(q.Expr, -1) {
				f, ok := fams[strings.TrimSuffix(strings.TrimSuffix(m[2], "_bucket"), "_sum")]
				if !ok || f.labels == nil {
					continue
				}
				for _, l := range strings.Split(m[1], ",") {
					l = strings.TrimSpace(l)
					if l == "le" && f.histogram || l == "instance" {
						continue
					}
					if !slices.Contains(f.labels, l) {
						t.Errorf("panel %q groups %s by %q; its labels are %v", p.Title, m[2], l, f.labels)
					}
				}
			}
		}
	}
	// The signals "Operating a job" in the README explains must be on it.
	for _, want := range []string{"arkflow_checkpoint_healthy", "arkflow_restore_done", "arkflow_wal_parked_acks",
		"arkflow_watermark_lag_seconds", "arkflow_late_rows_total", "arkflow_channel_occupancy_items",
		"arkflow_kafka_consumer_lag_messages", "arkflow_sink_write_errors_total", "arkflow_replayed_skipped_rows_total"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// family is what the test knows of an exported family: its labels (nil
// when only its name is known) and whether it is a histogram.
type family struct {
	labels    []string
	histogram bool
}

// exported returns the families a running job's collector, the Kafka
// connector and an Agent's collector export, with their labels.
func exported(t *testing.T) map[string]family {
	t.Helper()
	out := map[string]family{}
	j := runningJob(t)
	// Every family a job can export, by name (Describe)...
	descs := make(chan *prometheus.Desc, 256)
	j.Collector().Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([a-z0-9_]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = family{}
		}
	}
	// ...and the labels and types of those this job has now.
	addGathered(t, out, j.Collector())
	a, err := hubclient.New(hubclient.Config{HubURL: "http://127.0.0.1:1", NodeID: "dash", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	addGathered(t, out, a.Collector())
	task := []string{"job", "operator", "subtask"}
	for _, f := range append((&kafka.Input{}).MetricFamilies(), (&kafka.Output{}).MetricFamilies()...) {
		out["arkflow_"+f.Name] = family{labels: append(slices.Clone(task), f.Labels...)}
	}
	return out
}

func addGathered(t *testing.T, out map[string]family, c prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		f := family{histogram: mf.GetType() == dto.MetricType_HISTOGRAM}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(f.labels, l.GetName()) {
					f.labels = append(f.labels, l.GetName())
				}
			}
		}
		if f.labels == nil {
			f.labels = []string{}
		}
		out[mf.GetName()] = f
	}
}

type click struct {
	User string    `arkflow:"user"`
	TS   time.Time `arkflow:"ts"`
}

// runningJob is a job with every kind of family: a write-ahead log,
// event time with an idle timeout, a keyed window, a sink, checkpoints.
func runningJob(t *testing.T) *arkflow.Job {
	t.Helper()
	dir := t.TempDir()
	src := push.New(push.Config[click]{Partitions: 2})
	j, err := arkflow.NewJob("dash").
		Durability(job.Durability{Path: filepath.Join(dir, "wal")}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + filepath.Join(dir, "store")}).
		Source("in", src, arkflow.EventTime{Field: "ts", IdleTimeout: 50 * time.Millisecond}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second, job.Count("n"))).
		Sink("out", mem.NewSink()).
		Build(arkflow.WithDataDir(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- j.Run(ctx) }()
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		if err := j.Stop(stopCtx); err != nil && !errors.Is(err, arkflow.ErrNotRunning) {
			t.Errorf("stop: %v", err)
		}
		cancel()
		<-runErr
	})
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 3 {
		if err := src.Push(ctx, click{"ann", t0.Add(time.Duration(i) * 1500 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for j.Metrics().Operator("w").Counters["windows_fired"] < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no window fired: %+v (status %v, err %v)", j.Metrics().Operator("w"), j.Status(), j.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	return j
}
