package windowop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// joinRow is one input row of the join tests: key, a unique value, and an
// event time in ms.
type joinRow struct {
	Key string
	V   int64
	TS  int64
	// For a temporal join's table: NullV makes the value null (with the
	// key and time, a tombstone) and Del sets the deleted column.
	NullV bool
	Del   *bool
}

// joinInput makes n rows over keys k0..k(keys-1) whose event times grow
// by step ms with a disorder of up to jitter ms behind.
func joinInput(rng *rand.Rand, n, keys int, base, step, jitter int64) []joinRow {
	rows := make([]joinRow, n)
	for i := range rows {
		rows[i] = joinRow{Key: fmt.Sprintf("k%d", rng.IntN(keys)), V: base + int64(i), TS: int64(i)*step - rng.Int64N(jitter+1)}
		rows[i].TS = max(rows[i].TS, 0)
	}
	return rows
}

// joinSpec is a job of two memory sources (persons: id, name_v, ts;
// auctions: aid, seller, ts) joined by a window join into a file sink.
func joinSpec(t *testing.T, left, right []joinRow, window map[string]any, how string, par int, ooo int64, badger bool, out string) *job.Spec {
	t.Helper()
	return joinSpecOf(t, left, right, map[string]any{"type": "window", "how": how, "window": window}, par, ooo, badger, out)
}

// joinSpecOf is joinSpec with the join's config (type, how and its
// kind's fields; the sides and keys are added).
func joinSpecOf(t *testing.T, left, right []joinRow, join map[string]any, par int, ooo int64, badger bool, out string) *job.Spec {
	t.Helper()
	rows := func(rs []joinRow, key, val string, del bool) []map[string]any {
		out := make([]map[string]any, len(rs))
		for i, r := range rs {
			out[i] = map[string]any{key: r.Key, val: r.V, "ts": r.TS}
			if r.NullV {
				out[i][val] = nil
			}
			if del {
				out[i]["deleted"] = r.Del != nil && *r.Del
			}
		}
		return out
	}
	source := func(id, key, val string, rs []joinRow) map[string]any {
		schema := []map[string]any{{"name": key, "type": "string"}, {"name": val, "type": "int64"}, {"name": "ts", "type": "int64"}}
		del := slices.ContainsFunc(rs, func(r joinRow) bool { return r.Del != nil })
		if del {
			schema = append(schema, map[string]any{"name": "deleted", "type": "bool"})
		}
		return map[string]any{
			"operator_id": id, "input_type": "memory",
			"config": map[string]any{
				"schema":     schema,
				"partitions": 2, "batch_size": 7, "rows": rows(rs, key, val, del),
			},
			"time": map[string]any{"mode": "event_time", "timestamp_field": "ts",
				"watermark": map[string]any{"strategy": "bounded_out_of_orderness", "out_of_orderness_ms": ooo}},
		}
	}
	join["left"], join["right"], join["left_key"], join["right_key"] = "persons", "auctions", "id", "seller"
	spec := map[string]any{
		"id": "joins", "parallelism": par,
		"operators": []map[string]any{
			{"id": "persons", "kind": "source"}, {"id": "auctions", "kind": "source"},
			{"id": "j", "kind": "join", "config": join},
			{"id": "out", "kind": "sink"},
		},
		"edges": []map[string]any{
			{"id": "p", "from": "persons", "to": "j", "partitioned": true},
			{"id": "a", "from": "auctions", "to": "j", "partitioned": true},
			{"id": "o", "from": "j", "to": "out"},
		},
		"sources": []map[string]any{source("persons", "id", "pv", left), source("auctions", "seller", "av", right)},
		"sinks":   []map[string]any{{"operator_id": "out", "output_type": "file", "config": map[string]any{"path": out, "fsync": false}}},
	}
	if badger {
		spec["state"] = map[string]any{"backend": "badger", "path": filepath.Join(t.TempDir(), "state")}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := job.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// joinReference is the join computed by a nested loop over every window
// start, every left row and every right row: for each window a row is
// in, its pairs with the right rows of the same key in that window, or,
// under how left, the row with nulls when there is none.
func joinReference(left, right []joinRow, size, slide int64, outer bool) []string {
	var out []string
	lo, hi := int64(0), int64(0)
	for _, r := range slices.Concat(left, right) {
		hi = max(hi, r.TS)
	}
	lo = -size // the first window a row at 0 can be in starts before 0
	stamp := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	for s := lo - lo%slide; s <= hi; s += slide {
		in := func(r joinRow) bool { return r.TS >= s && r.TS < s+size }
		for _, l := range left {
			if !in(l) {
				continue
			}
			matched := false
			for _, r := range right {
				if in(r) && r.Key == l.Key {
					matched = true
					out = append(out, fmt.Sprintf("%s|%s|%s|%d|%d|%d|%d", l.Key, stamp(s), stamp(s+size), l.V, l.TS, r.V, r.TS))
				}
			}
			if !matched && outer {
				out = append(out, fmt.Sprintf("%s|%s|%s|%d|%d|null|null", l.Key, stamp(s), stamp(s+size), l.V, l.TS))
			}
		}
	}
	slices.Sort(out)
	return out
}

// readJoinOutput reads the sink's JSON lines in the reference's form.
func readJoinOutput(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			ID     string `json:"id"`
			Start  string `json:"window_start"`
			End    string `json:"window_end"`
			PV     int64  `json:"pv"`
			LeftTS int64  `json:"left_ts"`
			AV     *int64 `json:"av"`
			RTS    *int64 `json:"right_ts"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		rv, rts := "null", "null"
		if r.AV != nil {
			rv, rts = fmt.Sprint(*r.AV), fmt.Sprint(*r.RTS)
		}
		out = append(out, fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s", r.ID, r.Start, r.End, r.PV, r.LeftTS, rv, rts))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A window join, inner and left outer, tumbling and sliding, on one and
// two subtasks, with state in memory and in Badger, gives exactly the
// pairs a nested loop over all rows gives, on random inputs whose rows
// arrive out of order within the sources' bound.
func TestWindowJoinMatchesNestedLoop(t *testing.T) {
	t.Parallel()
	windows := []struct {
		name        string
		def         map[string]any
		size, slide int64
	}{
		{"tumbling", map[string]any{"type": "tumbling", "size_ms": 1000}, 1000, 1000},
		{"sliding", map[string]any{"type": "sliding", "size_ms": 1000, "slide_ms": 400}, 1000, 400},
	}
	for _, w := range windows {
		for _, how := range []string{"inner", "left"} {
			for _, par := range []int{1, 2} {
				for _, backend := range []string{"memory", "badger"} {
					name := fmt.Sprintf("%s/%s/p%d/%s", w.name, how, par, backend)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						seed := uint64(len(name)) * 7919
						rng := rand.New(rand.NewPCG(seed, 42))
						left := joinInput(rng, 240, 12, 1_000_000, 40, 300)
						right := joinInput(rng, 200, 12, 2_000_000, 48, 300)
						out := filepath.Join(t.TempDir(), "out.jsonl")
						spec := joinSpec(t, left, right, w.def, how, par, 1500, backend == "badger", out)
						runJoinSpec(t, spec, out, joinReference(left, right, w.size, w.slide, how == "left"))
					})
				}
			}
		}
	}
}

// Every mistake of a join's config is reported at validation, each naming
// the join operator and the field at fault.
func TestJoinValidation(t *testing.T) {
	t.Parallel()
	rows := []joinRow{{Key: "k", V: 1, TS: 1}}
	cases := []struct {
		name  string
		edit  func(s *job.Spec)
		field string // the problem's field path
		says  string // a phrase of its reason
	}{
		{"key types differ", func(s *job.Spec) { s.Sources[1].Config = retype(t, s.Sources[1].Config, "seller", "int64") },
			"operators[2].config.right_key", `has type int64, but the left key "id" has type utf8`},
		{"unknown key column", func(s *job.Spec) { setJoin(t, s, "left_key", "idd") }, "operators[2].config.left_key", `did you mean "id"?`},
		{"processing time", func(s *job.Spec) { s.Sources[1].Time = nil }, "operators[2].config.right", "needs event time on both inputs"},
		{"session window", func(s *job.Spec) { setJoin(t, s, "window", map[string]any{"type": "session", "gap_ms": 10}) },
			"operators[2].config.window.type", "tumbling or sliding"},
		{"how", func(s *job.Spec) { setJoin(t, s, "how", "full") }, "operators[2].config.how", `must be inner or left (got "full")`},
		{"same side twice", func(s *job.Spec) { setJoin(t, s, "right", "persons") }, "operators[2].config.right", "must differ from left"},
		{"a side without an edge", func(s *job.Spec) { setJoin(t, s, "right", "out") }, "operators[2].config.right", `operator "out" has no edge into the join`},
		{"edges not partitioned", func(s *job.Spec) { s.Edges[0].Partitioned = false }, "operators[2]", "must be partitioned"},
		{"interval bounds reversed", func(s *job.Spec) { interval(t, s, -5, -10) }, "operators[2].config.upper_ms", "must be >= lower_ms (got lower_ms -5, upper_ms -10)"},
		{"retention on a window join", func(s *job.Spec) { setJoin(t, s, "retention_ms", 1000) }, "operators[2].config.retention_ms", "is only used by a temporal join"},
		{"negative retention", func(s *job.Spec) { setJoin(t, s, "type", "temporal"); setJoin(t, s, "retention_ms", -1) }, "operators[2].config.retention_ms", "must be between 0 and"},
		{"interval without a bound", func(s *job.Spec) { interval(t, s, 0, 0); setJoin(t, s, "upper_ms", nil) }, "operators[2].config.upper_ms", "is required"},
		{"unknown type", func(s *job.Spec) { setJoin(t, s, "type", "lookup") }, "operators[2].config.type", `unknown join type "lookup"`},
		{"temporal table on processing time", func(s *job.Spec) { setJoin(t, s, "type", "temporal"); s.Sources[1].Time = nil },
			"operators[2].config.right", "a table joined as of the stream's event time needs event time too"},
		{"temporal deleted field unknown", func(s *job.Spec) { setJoin(t, s, "type", "temporal"); setJoin(t, s, "deleted_field", "gone") },
			"operators[2].config.deleted_field", `unknown column "gone"`},
		{"temporal deleted field not bool", func(s *job.Spec) { setJoin(t, s, "type", "temporal"); setJoin(t, s, "deleted_field", "av") },
			"operators[2].config.deleted_field", `column "av" has type int64; a delete marker is a bool`},
		{"late rows updated", func(s *job.Spec) {
			s.Sources[0].Time.LateEventPolicy = job.LateUpdate
			s.Sources[0].Time.AllowedLatenessMS = 1000
		},
			"operators[2].config.left", `late_event_policy "update"`},
		{"both sides route late rows of different columns", func(s *job.Spec) {
			for i := range s.Sources {
				s.Sources[i].Time.LateEventPolicy = job.LateRoute
				s.Sources[i].Time.LateEventRoute = "out"
			}
		},
			"operators[2].config.right", `route late rows to one sink, "out", with different columns`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := joinSpec(t, rows, rows, map[string]any{"type": "tumbling", "size_ms": 1000}, "inner", 2, 0, false, filepath.Join(t.TempDir(), "o"))
			c.edit(s)
			err := arkflow.Validate(s)
			for _, ve := range job.AsValidationErrors(err) {
				if ve.Operator == "j" && ve.Field == c.field && strings.Contains(ve.Reason, c.says) {
					return
				}
			}
			t.Fatalf("no problem of operator \"j\" at %s saying %q in:\n%v", c.field, c.says, err)
		})
	}
}

// interval makes the join an interval join with the given bounds.
func interval(t *testing.T, s *job.Spec, lower, upper int64) {
	t.Helper()
	setJoin(t, s, "type", "interval")
	setJoin(t, s, "window", nil)
	setJoin(t, s, "lower_ms", lower)
	setJoin(t, s, "upper_ms", upper)
}

// setJoin sets one field of the join operator's config (nil removes it).
func setJoin(t *testing.T, s *job.Spec, field string, v any) {
	t.Helper()
	op, _ := s.Operator("j")
	var cfg map[string]any
	if err := json.Unmarshal(op.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg[field] = v
	if v == nil {
		delete(cfg, field)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	op.Config = b
}

// retype changes the type of one column of a memory source's schema.
func retype(t *testing.T, raw json.RawMessage, column, typ string) json.RawMessage {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg["schema"].([]any) {
		if f := f.(map[string]any); f["name"] == column {
			f["type"] = typ
		}
	}
	delete(cfg, "rows")
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// intervalReference is the interval join computed by a nested loop over
// every pair of a left and a right row: they pair when their keys are
// equal and left.ts is in [right.ts + lower, right.ts + upper]; under
// outer, a left row that pairs with none is there once with nulls.
func intervalReference(left, right []joinRow, lower, upper int64, outer bool) []string {
	var out []string
	for _, l := range left {
		matched := false
		for _, r := range right {
			if l.Key == r.Key && l.TS >= r.TS+lower && l.TS <= r.TS+upper {
				matched = true
				out = append(out, fmt.Sprintf("%s|||%d|%d|%d|%d", l.Key, l.V, l.TS, r.V, r.TS))
			}
		}
		if !matched && outer {
			out = append(out, fmt.Sprintf("%s|||%d|%d|null|null", l.Key, l.V, l.TS))
		}
	}
	slices.Sort(out)
	return out
}

// An interval join, inner and left outer, on one and two subtasks, with
// state in memory and in Badger, with bounds on either side of zero,
// gives exactly the pairs a
// nested loop over all rows gives, on random inputs whose rows arrive out
// of order within the sources' bound.
func TestIntervalJoinMatchesNestedLoop(t *testing.T) {
	t.Parallel()
	for _, b := range []struct{ lower, upper int64 }{{-200, 300}, {100, 700}, {-900, -50}, {0, 0}} {
		for i, par := range []int{1, 2} {
			for j, backend := range []string{"memory", "badger"} {
				how := [2]string{"inner", "left"}[(i+j)%2]
				name := fmt.Sprintf("[%d,%d]/%s/p%d/%s", b.lower, b.upper, how, par, backend)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(len(name))*104729+uint64(b.upper), 7))
					left := joinInput(rng, 240, 12, 1_000_000, 40, 300)
					right := joinInput(rng, 200, 12, 2_000_000, 48, 300)
					if b.lower == 0 && b.upper == 0 {
						// Equal times only: give each right row the time of
						// the left row nearest its place, so that the
						// disorder stays within the bound.
						for i := range right {
							right[i].TS = left[min(i*48/40+rng.IntN(3), len(left)-1)].TS
						}
					}
					out := filepath.Join(t.TempDir(), "out.jsonl")
					cfg := map[string]any{"type": "interval", "how": how, "lower_ms": b.lower, "upper_ms": b.upper}
					spec := joinSpecOf(t, left, right, cfg, par, 1000, backend == "badger", out)
					runJoinSpec(t, spec, out, intervalReference(left, right, b.lower, b.upper, how == "left"))
				})
			}
		}
	}
}

// temporalReference is the temporal join computed by a nested loop: for
// every stream (left) row, the table (right) row of its key with the
// latest time at or before the stream row's, unless that row deletes the
// key (deleted true, or a null value); without one, under how left, the
// stream row with nulls.
func temporalReference(stream, table []joinRow, outer bool) []string {
	var out []string
	for _, l := range stream {
		var cur *joinRow
		for i, r := range table {
			if r.Key == l.Key && r.TS <= l.TS && (cur == nil || r.TS > cur.TS) {
				cur = &table[i]
			}
		}
		switch {
		case cur != nil && !cur.NullV && (cur.Del == nil || !*cur.Del):
			out = append(out, fmt.Sprintf("%s|||%d|%d|%d|%d", l.Key, l.V, l.TS, cur.V, cur.TS))
		case outer:
			out = append(out, fmt.Sprintf("%s|||%d|%d|null|null", l.Key, l.V, l.TS))
		}
	}
	slices.Sort(out)
	return out
}

// A temporal join, inner and left outer, on one and two subtasks, with
// state in memory and in Badger, joins every stream row with the table
// row of its key current at the stream row's time, deletes (a deleted
// flag, or a null value) included, exactly as a nested loop over all rows
// says, on random inputs whose rows arrive out of order within the bound.
func TestTemporalJoinMatchesNestedLoop(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"inner", "left"} {
		for _, par := range []int{1, 2} {
			for _, backend := range []string{"memory", "badger"} {
				name := fmt.Sprintf("%s/p%d/%s", how, par, backend)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(len(name))*31337+uint64(par), 11))
					stream := joinInput(rng, 240, 8, 1_000_000, 40, 300)
					table := joinInput(rng, 120, 8, 2_000_000, 80, 300)
					// A table batch (7 rows over 2 partitions, 80 ms apart,
					// 300 ms of disorder) spans up to 1.4 s; the bound is
					// above it, so no table row comes behind the watermark.
					seen := map[int64]bool{}
					yes := true
					for i := range table {
						for seen[table[i].TS] { // one version per time, so order does not matter
							table[i].TS++
						}
						seen[table[i].TS] = true
						switch rng.IntN(8) {
						case 0:
							table[i].Del = &yes
						case 1:
							table[i].NullV = true
						}
					}
					out := filepath.Join(t.TempDir(), "out.jsonl")
					spec := joinSpecOf(t, stream, table, map[string]any{"type": "temporal", "how": how, "deleted_field": "deleted"}, par, 1600, backend == "badger", out)
					runJoinSpec(t, spec, out, temporalReference(stream, table, how == "left"))
				})
			}
		}
	}
}

// diffRows lists, up to ten of each, the rows only got has and the rows
// only want has (both sorted).
func diffRows(got, want []string) string {
	var b strings.Builder
	extra, missing := 0, 0
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			if extra++; extra <= 10 {
				b.WriteString("\n  extra   " + got[i])
			}
			i++
		case i == len(got) || want[j] < got[i]:
			if missing++; missing <= 10 {
				b.WriteString("\n  missing " + want[j])
			}
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return b.String()
}

// A temporal join's table is state: run again on the same Badger state
// with more stream rows, the job skips the rows it applied before (both
// sides) and joins the new stream rows with the table restored from
// state, as a nested loop over the whole input says for them.
func TestTemporalJoinTableSurvivesRestart(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	stream := joinInput(rng, 300, 6, 1_000_000, 40, 0)
	table := joinInput(rng, 60, 6, 2_000_000, 100, 0)
	first, second := stream[:150], stream[150:]
	state := filepath.Join(t.TempDir(), "state")
	run := func(stream []joinRow) []string {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		// A table batch (7 rows over 2 partitions, 100 ms apart) spans
		// 1.4 s: the bound is above it.
		spec := joinSpecOf(t, stream, table, map[string]any{"type": "temporal", "how": "left"}, 2, 1500, true, out)
		spec.State.Path = state
		j, err := arkflow.FromSpec(spec, arkflow.WithDataDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := j.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return readJoinOutput(t, out)
	}
	if got, want := run(first), temporalReference(first, table, true); !slices.Equal(got, want) {
		t.Fatalf("first run: %d rows, want %d%s", len(got), len(want), diffRows(got, want))
	}
	got := run(stream)
	want := temporalReference(second, table, true)
	if !slices.Equal(got, want) {
		t.Fatalf("second run: %d rows, want %d (the new stream rows only)%s", len(got), len(want), diffRows(got, want))
	}
}

// runJoinSpec runs a join job to its end and checks that the rows its
// sink wrote to out are want (sorted), which must not be empty, and that
// the join dropped no row as late (the tests' rows stay within the bound).
func runJoinSpec(t *testing.T, spec *job.Spec, out string, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the reference is empty: the input makes no pairs")
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := j.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readJoinOutput(t, out); !slices.Equal(got, want) {
		t.Errorf("%d rows, want %d%s", len(got), len(want), diffRows(got, want))
	}
	if m := j.Metrics().Operator("j"); m.Counters["late_dropped"] != 0 || m.Gauges["open_windows"] != 0 {
		t.Errorf("late_dropped = %d, rows held at the end = %d; want 0 and 0", m.Counters["late_dropped"], m.Gauges["open_windows"])
	}
}
