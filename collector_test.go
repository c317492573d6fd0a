package arkflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
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
		Window("w", window.Tumbling(time.Second, job.Count("n")), arkflow.WithParallelism(2)).
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
	polltest.Eventually(t, "the window to see the rows", func() bool {
		w := j.Metrics().Operator("w")
		return w.RowsIn == 4 && w.Counters["windows_fired"] >= 2 && w.Counters["late_dropped"] == 1
	}, func() string {
		return fmt.Sprintf("window %+v (status %v, err %v)", j.Metrics().Operator("w"), j.Status(), j.Err())
	})
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

// hcount sums the observation counts of a histogram family's series
// whose labels include want.
func hcount(f *dto.MetricFamily, want map[string]string) (n float64) {
next:
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				continue next
			}
		}
		n += float64(m.GetHistogram().GetSampleCount())
	}
	return n
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
	t.Parallel()
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
		"arkflow_replayed_skipped_rows_total":               task,
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
		"arkflow_bytes_in_total":                            task,
		"arkflow_bytes_out_total":                           task,
		"arkflow_partition_watermark_seconds":               {"job", "operator", "partition", "subtask"},
		"arkflow_partition_watermark_lag_seconds":           {"job", "operator", "partition", "subtask"},
		"arkflow_partition_idle":                            {"job", "operator", "partition", "subtask"},
		"arkflow_channel_occupancy_items":                   task,
		"arkflow_channel_capacity_items":                    task,
		"arkflow_sink_write_duration_seconds":               task,
		"arkflow_sink_write_errors_total":                   task,
		"arkflow_wal_appends_total":                         task,
		"arkflow_wal_parked_acks":                           task,
		"arkflow_wal_sync_duration_seconds":                 task,
		"arkflow_state_keys":                                {"job", "operator"},
		"arkflow_checkpoint_duration_seconds":               {"job"},
		"arkflow_checkpoint_pause_seconds":                  {"job"},
		"arkflow_checkpoint_size_bytes":                     {"job"},
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
	check("replayed skipped", sum(val("arkflow_replayed_skipped_rows_total", map[string]string{"operator": "w"})), 0, 0)
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
	if got := val("arkflow_state_keys", map[string]string{"operator": "w"}); len(got) != 1 {
		t.Errorf("state keys of w: %v", got)
	}
	// Bytes: the rows w received (two columns and the source's metadata)
	// came through the WAL and a keyed edge.
	check("bytes into w", sum(val("arkflow_bytes_in_total", map[string]string{"operator": "w"})), 4*8, 1<<20)
	check("bytes read", sum(val("arkflow_bytes_out_total", map[string]string{"operator": "in"})), 4*8, 1<<20)
	check("bytes written", sum(val("arkflow_bytes_out_total", map[string]string{"operator": "out"})), 1, 1<<20)
	// The push source's one partition: its watermark (1.5 s, the newest
	// event) and not idle (no idle timeout).
	check("partition watermark", sum(val("arkflow_partition_watermark_seconds", map[string]string{"operator": "in", "partition": "0"})), 1.5, 1.5)
	check("partition idle", sum(val("arkflow_partition_idle", map[string]string{"operator": "in", "partition": "0"})), 0, 0)
	// w's subtasks and the sink head chains fed over channels (of 16
	// messages per sender by default); the source does not.
	if got := val("arkflow_channel_capacity_items", nil); len(got) != 3 || got[`{job="clicks",operator="w",subtask="1"}`] != 16 {
		t.Errorf("channel capacities %v, want w's two subtasks' and out's, 16 per sender", got)
	}
	check("channel occupancy of w", sum(val("arkflow_channel_occupancy_items", map[string]string{"operator": "w"})), 0, 32)
	// One write latency per batch the sink wrote, no error.
	check("sink writes", hcount(fams["arkflow_sink_write_duration_seconds"], map[string]string{"operator": "out"}), sum(val("arkflow_batches_out_total", map[string]string{"operator": "out"})), sum(val("arkflow_batches_out_total", map[string]string{"operator": "out"})))
	check("sink batches", sum(val("arkflow_batches_out_total", map[string]string{"operator": "out"})), 1, 100)
	check("sink errors", sum(val("arkflow_sink_write_errors_total", nil)), 0, 0)
	// The WAL: three pushes, each an append made durable by a sync.
	check("wal appends", sum(val("arkflow_wal_appends_total", map[string]string{"operator": "in"})), 3, 3)
	check("wal syncs", hcount(fams["arkflow_wal_sync_duration_seconds"], nil), 1, 100)
	check("wal parked acks", sum(val("arkflow_wal_parked_acks", nil)), 0, 3)
	// A histogram observation per committed checkpoint.
	completed := sum(val("arkflow_checkpoints_completed_total", nil))
	for _, name := range []string{"arkflow_checkpoint_duration_seconds", "arkflow_checkpoint_pause_seconds", "arkflow_checkpoint_size_bytes"} {
		check(name+" count", hcount(fams[name], nil), completed, completed)
	}
	check("checkpoint bytes", fams["arkflow_checkpoint_size_bytes"].GetMetric()[0].GetHistogram().GetSampleSum(), 1, 1<<30)
	for _, f := range fams {
		if got := series(f, map[string]string{"job": "clicks"}); len(got) != len(f.GetMetric()) {
			t.Errorf("%s: %d of %d series have job=\"clicks\"", f.GetName(), len(got), len(f.GetMetric()))
		}
	}
}

// promlint finds nothing to complain about in the names, units, types
// and help texts.
func TestCollectorLint(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// gatherUntil gathers c until ok accepts the families, and returns them.
func gatherUntil(t *testing.T, c prometheus.Collector, what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	polltest.Eventually(t, what, func() bool { fams = gather(t, c); return ok(fams) })
	return fams
}

// A sink whose write fails: the failed write is timed and counted, and
// the job fails with it.
func TestCollectorSinkErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	j, err := arkflow.NewJob("fails").
		Source("in", clicksAt([]any{"ann", 100, "bob", 300})).
		Sink("out", funcsink.RecordFunc(func(context.Context, arrow.RecordBatch) error { return boom })).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	c := j.Collector()
	if err := j.Run(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want the sink's error", err)
	}
	fams := gather(t, c)
	out := map[string]string{"operator": "out"}
	if got := sum(series(fams["arkflow_sink_write_errors_total"], out)); got != 1 {
		t.Errorf("sink write errors %v, want 1", got)
	}
	if got := hcount(fams["arkflow_sink_write_duration_seconds"], out); got != 1 {
		t.Errorf("sink writes timed %v, want 1", got)
	}
	if got := sum(series(fams["arkflow_bytes_out_total"], out)); got != 0 {
		t.Errorf("bytes written %v by a sink whose write failed", got)
	}
	if got := sum(series(fams["arkflow_bytes_in_total"], out)); got <= 0 {
		t.Errorf("bytes into the sink %v, want > 0", got)
	}
}

// A sink that blocks fills its input channel: the occupancy reaches the
// capacity (the sender then blocks: backpressure), and drains when the
// sink goes on.
func TestCollectorChannelOccupancy(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	j, err := arkflow.NewJob("blocked").
		Source("in", generate.Config{Count: 100_000, BatchSize: 100, Fields: []generate.Field{{Name: "user", Type: "string", Cardinality: 10}}}).
		KeyBy("user").
		Sink("out", funcsink.RecordFunc(func(ctx context.Context, _ arrow.RecordBatch) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	c := j.Collector()
	runErr := make(chan error, 1)
	go func() { runErr <- j.Run(context.Background()) }()
	out := map[string]string{"operator": "out"}
	fams := gatherUntil(t, c, "a full input channel", func(f map[string]*dto.MetricFamily) bool {
		items := series(f["arkflow_channel_occupancy_items"], out)
		return len(items) == 1 && sum(items) == sum(series(f["arkflow_channel_capacity_items"], out))
	})
	if got := sum(series(fams["arkflow_channel_capacity_items"], out)); got != 16 {
		t.Errorf("capacity %v, want 16 (the default, one sender)", got)
	}
	if got := series(fams["arkflow_channel_capacity_items"], map[string]string{"operator": "in"}); len(got) != 0 {
		t.Errorf("the source has no input channel, but: %v", got)
	}
	close(release)
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	fams = gather(t, c)
	if got := sum(series(fams["arkflow_channel_occupancy_items"], out)); got != 0 {
		t.Errorf("occupancy %v after the job ended", got)
	}
	if got := hcount(fams["arkflow_sink_write_duration_seconds"], out); got != sum(series(fams["arkflow_batches_in_total"], out)) || got == 0 {
		t.Errorf("writes timed %v, batches into the sink %v", got, series(fams["arkflow_batches_in_total"], out))
	}
}

// An event-time source with two partitions of which only one gets rows:
// the other has no watermark and, after the idle timeout, is flagged idle;
// the one with rows has its watermark and, once its rows stop for the
// timeout, turns idle too, and active again with its next row. Not
// parallel: the partition is active again only until the 50 ms idle
// timeout passes, and a neighbour's load can make the polls miss that.
func TestCollectorIdlePartition(t *testing.T) {
	src := push.New(push.Config[promClick]{Partitions: 2, PartitionKey: func(promClick) string { return "k" }})
	j, err := arkflow.NewJob("idle").
		Source("in", src, arkflow.EventTime{Field: "ts", IdleTimeout: 50 * time.Millisecond}).
		Sink("out", mem.NewSink()).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	c := j.Collector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- j.Run(ctx) }()
	defer func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		_ = j.Stop(stopCtx)
		<-runErr
	}()
	if err := src.Push(ctx, promClick{"ann", 2500}); err != nil {
		t.Fatal(err)
	}
	in := map[string]string{"operator": "in"}
	fams := gatherUntil(t, c, "the partition with rows", func(f map[string]*dto.MetricFamily) bool {
		return len(series(f["arkflow_partition_watermark_seconds"], in)) == 1
	})
	var fed, empty string
	for l, v := range series(fams["arkflow_partition_watermark_seconds"], in) {
		if v != 2.5 {
			t.Errorf("partition watermark %s = %v, want 2.5", l, v)
		}
		fed = map[bool]string{true: "0", false: "1"}[strings.Contains(l, `partition="0"`)]
	}
	empty = map[string]string{"0": "1", "1": "0"}[fed]
	if got := series(fams["arkflow_partition_watermark_lag_seconds"], map[string]string{"partition": fed}); len(got) != 1 || sum(got) < float64(time.Now().Unix()-60) {
		t.Errorf("watermark lag of partition %s: %v", fed, got)
	}
	idle := func(part string) map[string]float64 {
		return series(gather(t, c)["arkflow_partition_idle"], map[string]string{"operator": "in", "partition": part})
	}
	gatherUntil(t, c, "the empty partition idle", func(f map[string]*dto.MetricFamily) bool {
		return sum(series(f["arkflow_partition_idle"], map[string]string{"partition": empty})) == 1
	})
	if got := idle(empty); len(got) != 1 {
		t.Errorf("idle series of partition %s: %v", empty, got)
	}
	gatherUntil(t, c, "the fed partition idle after its rows stopped", func(f map[string]*dto.MetricFamily) bool {
		return sum(series(f["arkflow_partition_idle"], map[string]string{"partition": fed})) == 1
	})
	if err := src.Push(ctx, promClick{"ann", 2600}); err != nil {
		t.Fatal(err)
	}
	gatherUntil(t, c, "the fed partition active again", func(f map[string]*dto.MetricFamily) bool {
		return sum(series(f["arkflow_partition_idle"], map[string]string{"partition": fed})) == 0 &&
			sum(series(f["arkflow_partition_watermark_seconds"], map[string]string{"partition": fed})) == 2.6
	})
}

// TestCollectorSourceProgress: a bounded generate source reports how far
// through its input each of its tasks is, in rows of the task's own
// partitions, and a finished job shows every task at its end.
func TestCollectorSourceProgress(t *testing.T) {
	t.Parallel()
	j, err := clickBuilder(mem.NewSink()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	fams := gather(t, j.Collector())
	pos, end := fams["arkflow_source_position_rows"], fams["arkflow_source_end_rows"]
	if pos == nil || end == nil {
		t.Fatalf("no source progress families; got %v", slices.Sorted(maps.Keys(fams)))
	}
	p, e := series(pos, map[string]string{"operator": "in"}), series(end, map[string]string{"operator": "in"})
	if len(p) != 2 || len(e) != 2 {
		t.Fatalf("want a series per source subtask (2), got position %v, end %v", p, e)
	}
	for l, v := range e {
		if v != 2000 || p[l] != v {
			t.Errorf("%s: position %v of end %v, want 2000 of 2000 (2 partitions of 1000 rows)", l, p[l], v)
		}
	}
	if _, ok := fams["arkflow_source_position_bytes"]; ok {
		t.Error("a generate source reported a position in bytes")
	}
	if n := sum(series(fams["arkflow_rows_out_total"], map[string]string{"operator": "in"})); n != 4000 {
		t.Errorf("source rows out %v, want 4000", n)
	}
}

// A service that runs a job again (a Job runs once, so a new Job with the
// same ID) swaps its collector: Unregister the old one, Register the new
// one; the registry then serves the new run's series only.
func TestCollectorReplacedOnRestart(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	run := func() (*arkflow.Job, prometheus.Collector) {
		j, err := clickBuilder(mem.NewSink()).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return j, j.Collector()
	}
	_, first := run()
	if err := reg.Register(first); err != nil {
		t.Fatal(err)
	}
	_, second := run()
	if err := reg.Register(second); err == nil {
		t.Fatal("a second job with the same ID registered beside the first")
	}
	if !reg.Unregister(first) {
		t.Fatal("Unregister of the first run's collector found nothing")
	}
	if err := reg.Register(second); err != nil {
		t.Fatalf("registering the new run's collector after Unregister: %v", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "arkflow_rows_out_total" {
			if got := sum(series(f, map[string]string{"operator": "in"})); got != 4000 {
				t.Errorf("source rows out after the swap: %v, want 4000 (one run's, not two)", got)
			}
		}
	}
}
