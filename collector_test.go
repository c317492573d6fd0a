package arkflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// A service registers each job's collector in its own registry, next to
// its own metrics; a scrape (here Gather) reads the job's counters then.
func ExampleJob_Collector() {
	j, err := arkflow.NewJob("clicks").
		Source("in", clicksAt([]any{"ann", 100, "bob", 300}, []any{"ann", 1200})).
		KeyBy("user").
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "myservice_requests_total", Help: "Requests served."})
	reg.MustRegister(requests, j.Collector())
	requests.Inc()
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "myservice_requests_total", "arkflow_job_status", "arkflow_rows_out_total":
			fmt.Println(f.GetName())
			for _, m := range f.GetMetric() {
				if v := m.GetGauge().GetValue() + m.GetCounter().GetValue(); v != 0 {
					fmt.Printf("  %s %v\n", labelString(m), v)
				}
			}
		}
	}
	// Output:
	// arkflow_job_status
	//   {job="clicks",status="stopped"} 1
	// arkflow_rows_out_total
	//   {job="clicks",operator="in",subtask="0"} 3
	//   {job="clicks",operator="out",subtask="0"} 3
	// myservice_requests_total
	//   {} 1
}

// labelString prints a series' labels as Prometheus does, sorted by name.
func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

type promClick struct {
	User string `arkflow:"user"`
	TS   int64  `arkflow:"ts"`
}

// startPromJob runs a job with every kind of metric (a source with a
// write-ahead log, an event-time window over two subtasks, state and
// checkpoints) until its window fired and a late row was dropped, and
// takes a checkpoint. The job keeps running; the cleanup stops it.
func startPromJob(t *testing.T, id string) *arkflow.Job {
	t.Helper()
	dir := t.TempDir()
	src := push.New(push.Config[promClick]{})
	j, err := arkflow.NewJob(id).
		Durability(job.Durability{Path: filepath.Join(dir, "wal")}).
		Checkpoint(job.Checkpoint{ObjectStoreURI: "file://" + filepath.Join(dir, "store")}).
		Source("in", src, arkflow.EventTime{Field: "ts"}).
		KeyBy("user").
		Window("w", window.Tumbling(time.Second).Count("n"), arkflow.WithParallelism(2)).
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
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	})
	for _, rows := range [][]promClick{{{"ann", 100}, {"bob", 300}}, {{"bob", 1500}}, {{"ann", 200}}} {
		if err := src.Push(ctx, rows...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		w := j.Metrics().Operator("w")
		if w.RowsIn == 4 && w.Counters["windows_fired"] >= 2 && w.Counters["late_dropped"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window did not see the rows: %+v (status %v, err %v)", w, j.Status(), j.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	return j
}

// gather registers cs in a new pedantic registry (which also checks that
// every collected series was described) and gathers them by name.
func gather(t *testing.T, cs ...prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// series returns the value of each series of a family whose labels
// include want, by its label string.
func series(f *dto.MetricFamily, want map[string]string) map[string]float64 {
	out := map[string]float64{}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		out[labelString(m)] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	return out
}

func sum(vals map[string]float64) (s float64) {
	for _, v := range vals {
		s += v
	}
	return s
}

// A running job's collector has every family, with the label sets the
// doc promises and the values its Metrics holds.
func TestCollectorRunningJob(t *testing.T) {
	j := startPromJob(t, "clicks")
	fams := gather(t, j.Collector())

	labels := func(name string) []string {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return nil
		}
		var ls []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			ls = append(ls, l.GetName())
		}
		return ls
	}
	task := []string{"job", "operator", "subtask"}
	want := map[string][]string{
		"arkflow_job_status":                                {"job", "status"},
		"arkflow_rows_in_total":                             task,
		"arkflow_rows_out_total":                            task,
		"arkflow_batches_in_total":                          task,
		"arkflow_batches_out_total":                         task,
		"arkflow_watermark_seconds":                         task,
		"arkflow_watermark_lag_seconds":                     task,
		"arkflow_windows_fired_total":                       task,
		"arkflow_open_windows":                              task,
		"arkflow_late_rows_total":                           {"action", "job", "operator", "subtask"},
		"arkflow_null_timestamp_rows_total":                 {"action", "job", "operator", "subtask"},
		"arkflow_wal_replayed_entries_total":                task,
		"arkflow_wal_parked_timeouts_total":                 task,
		"arkflow_wal_last_sequence":                         task,
		"arkflow_wal_cursor_sequence":                       task,
		"arkflow_wal_cursor_lag_entries":                    task,
		"arkflow_state_bytes":                               {"job", "operator"},
		"arkflow_checkpoints_completed_total":               {"job"},
		"arkflow_checkpoints_failed_total":                  {"job"},
		"arkflow_checkpoint_consecutive_failures":           {"job"},
		"arkflow_checkpoint_healthy":                        {"job"},
		"arkflow_checkpoint_last_duration_seconds":          {"job"},
		"arkflow_checkpoint_last_pause_seconds":             {"job"},
		"arkflow_checkpoint_last_size_bytes":                {"job"},
		"arkflow_checkpoint_last_success_timestamp_seconds": {"job"},
		"arkflow_restore_done":                              {"job"},
		"arkflow_restore_restored_bytes":                    {"job"},
		"arkflow_restore_size_bytes":                        {"job"},
		"arkflow_restore_restored_keys":                     {"job"},
		"arkflow_restore_restored_snapshots":                {"job"},
		"arkflow_restore_snapshots":                         {"job"},
	}
	for name, ls := range want {
		if got := labels(name); !slices.Equal(got, ls) {
			t.Errorf("%s: labels %v, want %v", name, got, ls)
		}
	}
	for name := range fams {
		if _, ok := want[name]; !ok {
			t.Errorf("family %s is not checked here", name)
		}
	}
	if t.Failed() {
		return
	}

	check := func(what string, got, wantMin, wantMax float64) {
		t.Helper()
		if got < wantMin || got > wantMax {
			t.Errorf("%s = %v, want in [%v, %v]", what, got, wantMin, wantMax)
		}
	}
	val := func(name string, l map[string]string) map[string]float64 { return series(fams[name], l) }
	check("running", sum(val("arkflow_job_status", map[string]string{"status": "running"})), 1, 1)
	check("statuses", sum(val("arkflow_job_status", nil)), 1, 1)
	if got := val("arkflow_rows_in_total", map[string]string{"operator": "w"}); len(got) != 2 || sum(got) != 4 {
		t.Errorf("rows into w: %v, want 2 subtasks and 4 rows", got)
	}
	check("rows read", sum(val("arkflow_rows_out_total", map[string]string{"operator": "in", "subtask": "0"})), 4, 4)
	check("batches into w", sum(val("arkflow_batches_in_total", map[string]string{"operator": "w"})), 1, 100)
	check("windows fired", sum(val("arkflow_windows_fired_total", map[string]string{"operator": "w"})), 2, 2)
	check("late dropped", sum(val("arkflow_late_rows_total", map[string]string{"operator": "w", "action": "dropped"})), 1, 1)
	check("late routed", sum(val("arkflow_late_rows_total", map[string]string{"operator": "w", "action": "routed"})), 0, 0)
	// Both of w's subtasks saw the watermark of 1.5 s (some ms before it).
	for l, v := range val("arkflow_watermark_seconds", map[string]string{"operator": "w"}) {
		check("watermark "+l, v, 1, 1.5)
	}
	for l, v := range val("arkflow_watermark_lag_seconds", map[string]string{"operator": "w"}) {
		check("watermark lag "+l, v, float64(time.Now().Unix()-60), float64(time.Now().Unix()))
	}
	check("wal last", sum(val("arkflow_wal_last_sequence", map[string]string{"operator": "in"})), 1, 100)
	check("checkpoints", sum(val("arkflow_checkpoints_completed_total", nil)), 1, 100)
	check("healthy", sum(val("arkflow_checkpoint_healthy", nil)), 1, 1)
	check("failures in a row", sum(val("arkflow_checkpoint_consecutive_failures", nil)), 0, 0)
	check("last success", sum(val("arkflow_checkpoint_last_success_timestamp_seconds", nil)), float64(time.Now().Add(-time.Minute).Unix()), float64(time.Now().Unix()+1))
	check("checkpoint duration", sum(val("arkflow_checkpoint_last_duration_seconds", nil)), 1e-9, 60)
	check("restore done", sum(val("arkflow_restore_done", nil)), 1, 1)
	if got := val("arkflow_state_bytes", map[string]string{"operator": "w"}); len(got) != 1 {
		t.Errorf("state bytes of w: %v", got)
	}
	for _, f := range fams {
		if got := series(f, map[string]string{"job": "clicks"}); len(got) != len(f.GetMetric()) {
			t.Errorf("%s: %d of %d series have job=\"clicks\"", f.GetName(), len(got), len(f.GetMetric()))
		}
	}
}

// promlint finds nothing to complain about in the names, units, types
// and help texts.
func TestCollectorLint(t *testing.T) {
	j := startPromJob(t, "lint")
	problems, err := testutil.CollectAndLint(j.Collector())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Two jobs' collectors share a service's registry beside its own metric:
// no collision, and each job's series carry its own job label. A second
// job with an ID already registered is refused.
func TestCollectorTwoJobsOneRegistry(t *testing.T) {
	build := func(id string) *arkflow.Job {
		j, err := arkflow.NewJob(id).
			Source("in", clicksAt([]any{"ann", 100, "bob", 300})).
			KeyBy("user").
			Sink("out", mem.NewSink()).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b := build("a"), build("b")
	service := prometheus.NewCounter(prometheus.CounterOpts{Name: "arkflow_service_requests_total", Help: "A service's own counter."})
	service.Add(3)
	reg := prometheus.NewPedanticRegistry()
	for _, c := range []prometheus.Collector{service, a.Collector(), b.Collector()} {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// b never runs: its series are there, with zeros and status created.
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if got := sum(series(byName["arkflow_service_requests_total"], nil)); got != 3 {
		t.Errorf("the service's counter: %v", got)
	}
	rows := byName["arkflow_rows_out_total"]
	if got := sum(series(rows, map[string]string{"job": "a", "operator": "in"})); got != 2 {
		t.Errorf("job a read %v rows, want 2", got)
	}
	if got := series(byName["arkflow_job_status"], map[string]string{"job": "b", "status": "created"}); sum(got) != 1 {
		t.Errorf("job b's status: %v", got)
	}
	if got := series(byName["arkflow_job_status"], map[string]string{"job": "a", "status": "stopped"}); sum(got) != 1 {
		t.Errorf("job a's status: %v", got)
	}
	if err := reg.Register(build("a").Collector()); err == nil {
		t.Error("a second job with ID a was registered beside the first")
	}
}
