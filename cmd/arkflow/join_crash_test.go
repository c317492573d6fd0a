package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// joinCrashRow is one input row of the join crash proof: its key, a value
// unique over both inputs and its event time in ms.
type joinCrashRow struct {
	key   string
	v, ts int64
}

// The proof's input: rows 20 ms apart in event time (per source; a file
// partition holds every other row, 40 ms apart), up to 200 ms out of
// order. Persons have 24 keys, auctions only the first 20, so the left
// outer join has persons that no auction of their window matches.
const (
	joinCrashRows   = 3000 // per source
	joinCrashStep   = 20
	joinCrashJitter = 200
	joinCrashT0     = 1_700_000_000_000
	// The file sources read in batches of 10 rows; persons 100 rows a
	// second per subtask (15 s of input, 4 s of event time a second),
	// auctions half as fast again, so that they run ahead in event time
	// and the joins hold their rows (and acknowledgements) longer.
	joinCrashRate  = 100
	joinCrashBatch = 10
	// 1.5 s: above what one batch of a partition spans in event time
	// (360 ms) plus the disorder (200 ms). Within a batch the watermark
	// advances first, so a smaller bound would make rows late depending
	// on where batches break and which source runs ahead, and the
	// crash-free result would not be one set of rows.
	joinCrashOOO = 1500
)

// The two joins of the proof's job and their windows: inner over
// tumbling windows of a second, left outer over sliding windows of a
// second every half second.
var joinCrashJoins = []struct {
	id, how, window string
	size, slide     int64
}{
	{"inner", "inner", "{type: tumbling, size_ms: 1000}", 1000, 1000},
	{"outer", "left", "{type: sliding, size_ms: 1000, slide_ms: 500}", 1000, 500},
}

// joinCrashInput makes n rows over the keys p0..p(keys-1) with values
// from v0, the i-th at T0 + shift + i·step less a random disorder.
func joinCrashInput(rng *rand.Rand, n, keys int, v0, shift int64) []joinCrashRow {
	rows := make([]joinCrashRow, n)
	for i := range rows {
		rows[i] = joinCrashRow{key: fmt.Sprintf("p%d", rng.IntN(keys)), v: v0 + int64(i),
			ts: joinCrashT0 + shift + int64(i)*joinCrashStep - rng.Int64N(joinCrashJitter+1)}
	}
	return rows
}

func writeJoinCrashInput(t *testing.T, path, key, val string, rows []joinCrashRow) {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "{%q:%q,%q:%d,\"ts\":%d}\n", key, r.key, val, r.v, r.ts)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// joinCrashSpec is the proof's job: persons and auctions, two file sources
// of two partitions, each feeding both joins (partitioned by its key),
// each join writing to its own file sink; parallelism 2, Badger state,
// checkpoints every 300 ms to file://. Persons are read at rate rows a
// second per subtask, auctions at 1.5 × rate; rate 0 reads at full speed
// (the batches are the same: batch_size is at most what the rates allow
// in 100 ms).
func joinCrashSpec(dir string, rate int) string {
	var ops, edges, sinks strings.Builder
	for _, j := range joinCrashJoins {
		fmt.Fprintf(&ops, "  - id: %s\n    kind: join\n    config: {type: window, left: persons, right: auctions, left_key: id, right_key: seller, how: %s, window: %s}\n", j.id, j.how, j.window)
		fmt.Fprintf(&ops, "  - {id: %s-out, kind: sink}\n", j.id)
		fmt.Fprintf(&edges, "  - {id: p-%[1]s, from: persons, to: %[1]s, partitioned: true}\n  - {id: a-%[1]s, from: auctions, to: %[1]s, partitioned: true}\n  - {id: o-%[1]s, from: %[1]s, to: %[1]s-out}\n", j.id)
		fmt.Fprintf(&sinks, "  - {operator_id: %s-out, output_type: file, config: {path: %q}}\n", j.id, filepath.Join(dir, j.id+".jsonl"))
	}
	source := func(id, key, val string, rate int) string {
		return fmt.Sprintf(`  - operator_id: %s
    input_type: file
    config: {path: %q, partitions: 2, batch_size: %d, rate_per_sec: %d, schema: [{name: %s, type: string}, {name: %s, type: int64}, {name: ts, type: int64}]}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: %d}}
`, id, filepath.Join(dir, id+".jsonl"), joinCrashBatch, rate, key, val, joinCrashOOO)
	}
	return `id: join-crash
parallelism: 2
state: {backend: badger}
checkpoint: {interval_ms: 300, retention: 3, object_store_uri: "file://` + filepath.Join(dir, "checkpoints") + `"}
operators:
  - {id: persons, kind: source}
  - {id: auctions, kind: source}
` + ops.String() + "edges:\n" + edges.String() + "sources:\n" +
		source("persons", "id", "pv", rate) + source("auctions", "seller", "av", rate*3/2) + "sinks:\n" + sinks.String()
}

// joinCrashReference is a join computed by a nested loop over the input
// rows, one line per output row (see joinCrashLine): for every window
// start, a multiple of slide from before the first row to the last,
// every left row with start <= ts < start+size paired with every right
// row of its key in the same window; under outer, a left row no right row
// matches once with nulls.
func joinCrashReference(left, right []joinCrashRow, size, slide int64, outer bool) []string {
	lo, hi := left[0].ts, left[0].ts
	for _, r := range slices.Concat(left, right) {
		lo, hi = min(lo, r.ts), max(hi, r.ts)
	}
	var out []string
	for s := (lo-size)/slide*slide - slide; s <= hi; s += slide {
		in := func(rows []joinCrashRow) []joinCrashRow {
			var w []joinCrashRow
			for _, r := range rows {
				if r.ts >= s && r.ts < s+size {
					w = append(w, r)
				}
			}
			return w
		}
		rs := in(right)
		for _, l := range in(left) {
			matched := false
			for _, r := range rs {
				if r.key == l.key {
					matched = true
					out = append(out, joinCrashLine(l.key, s, s+size, l.v, l.ts, fmt.Sprint(r.v), fmt.Sprint(r.ts)))
				}
			}
			if outer && !matched {
				out = append(out, joinCrashLine(l.key, s, s+size, l.v, l.ts, "null", "null"))
			}
		}
	}
	slices.Sort(out)
	return out
}

func joinCrashLine(key string, start, end, lv, lts int64, rv, rts string) string {
	stamp := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	return fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s", key, stamp(start), stamp(end), lv, lts, rv, rts)
}

// readJoinCrashOutput reads a join's output file as reference lines, in
// the order written.
func readJoinCrashOutput(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
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
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s line %d is not a join row: %q: %v", path, len(out)+1, sc.Text(), err)
		}
		rv, rts := "null", "null"
		if r.AV != nil && r.RTS != nil {
			rv, rts = fmt.Sprint(*r.AV), fmt.Sprint(*r.RTS)
		}
		out = append(out, fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s", r.ID, r.Start, r.End, r.PV, r.LeftTS, rv, rts))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkpointWatermarks reads the watermarks of every checkpoint in the
// proof's store, by checkpoint id, into seen. The test reads them after
// each run, before the next one restores one of them and the retention
// deletes the oldest.
func checkpointWatermarks(t *testing.T, dir string, seen map[string]map[string]int64) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "checkpoints", "join-crash", "checkpoints", "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // deleted by the retention since the glob
		}
		var m struct {
			ID         string           `json:"checkpoint_id"`
			Watermarks map[string]int64 `json:"watermarks_ms"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		seen[m.ID] = m.Watermarks
	}
}

// windowEnd returns the window end of an output line (see joinCrashLine),
// in ms.
func windowEnd(t *testing.T, line string) int64 {
	t.Helper()
	end, err := time.Parse(time.RFC3339Nano, strings.Split(line, "|")[2])
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return end.UnixMilli()
}

// The crash proof of the window join. A job of two rate-limited file
// sources, persons and auctions, each feeding an inner join over tumbling
// windows and a left outer join over sliding windows (parallelism 2,
// Badger state, checkpoints every 300 ms to file://, file sinks), is
// SIGKILLed at random moments — half of them some time after the run
// completed its first checkpoint, so the input gets through, half at any
// moment from the start, restores included — and run again with
// `arkflow run` each time, restoring the latest checkpoint; a last run
// goes to the end. Then, for each join:
//
//   - the output's distinct rows are exactly the rows of a nested loop
//     over the input rows the test wrote (every pair, every unmatched
//     person once, in every window): no window's result lost or changed;
//   - the output holds no other duplicates than the at-least-once file
//     sink may write again after a restart: the rows of the windows
//     still open at the restored checkpoint's cut, that is ending after
//     the watermark it recorded for the join, as far as they were written
//     before the restart (the windows that fired before the cut were
//     written and acknowledged before it, and their floor is in the
//     checkpoint). Where the local store ran on from the checkpoint, the
//     floor it kept spares the windows acknowledged since, and the rows
//     written twice are only those of a firing written before a kill
//     but not yet acknowledged. The test sums the bound over the
//     restarts that wrote anything. It is not the rows written after the
//     restored checkpoint's round began: a firing written just before a
//     kill stays unacknowledged through the checkpoints of the runs after
//     it until one of them fires it again;
//   - no run dropped a row as late: the input's disorder is within the
//     sources' bound, and the rows a restart reads again are replays, not
//     late rows. A join warns at once of the first row it drops as late,
//     as it counts it in late_dropped (which a killed run cannot be
//     asked for): no run's log may hold that warning.
func TestWindowJoinSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 30))
	t.Logf("seed %d", seed)
	persons := joinCrashInput(rng, joinCrashRows, 24, 1_000_000, 0)
	auctions := joinCrashInput(rng, joinCrashRows, 20, 2_000_000, 7)
	writeJoinCrashInput(t, filepath.Join(dir, "persons.jsonl"), "id", "pv", persons)
	writeJoinCrashInput(t, filepath.Join(dir, "auctions.jsonl"), "seller", "av", auctions)
	var outs []string
	for _, j := range joinCrashJoins {
		outs = append(outs, filepath.Join(dir, j.id+".jsonl"))
	}
	writeSpec := func(rate int) {
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(joinCrashSpec(dir, rate)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec(joinCrashRate)
	if code, out, errOut := runCLI("validate", filepath.Join(dir, "job.yaml")); code != 0 {
		t.Fatalf("validate exit %d\n%s%s", code, out, errOut)
	}
	wms := map[string]map[string]int64{} // by checkpoint id and task
	lines := func() []int64 {
		n := make([]int64, len(outs))
		for i, p := range outs {
			n[i] = int64(countLines(p))
		}
		return n
	}

	kills := 12
	if testing.Short() {
		kills = 4
	}
	var runs []*logRun
	var startLines [][]int64 // lines in each output when each run started, and at the end
	// A run the test fails during is killed, not left writing into the
	// temporary directory.
	defer func() {
		if len(runs) == 0 {
			return
		}
		if r := runs[len(runs)-1]; r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.wait()
		}
	}()
	killed := 0
	for killed < kills {
		startLines = append(startLines, lines())
		r := startLogRun(t, dir, io.Discard, []string{"checkpoint completed"}, "job.yaml")
		runs = append(runs, r)
		if killed%2 == 1 {
			polltest.Eventually(t, fmt.Sprintf("run %d to complete a checkpoint or end", len(runs)), func() bool {
				select {
				case <-r.watch["checkpoint completed"]:
					return true
				case <-r.done:
					return true
				default:
					return false
				}
			}, r.logs)
			time.Sleep(time.Duration(rng.IntN(700)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(100+rng.IntN(1200)) * time.Millisecond)
		}
		r.cmd.Process.Kill()
		ws, err := r.wait()
		checkpointWatermarks(t, dir, wms)
		if ws.Signaled() {
			killed++
			continue
		}
		if err != nil {
			t.Fatalf("run %d failed: %v\n%s", len(runs), err, r.logs())
		}
		t.Logf("run %d reached the end of the input before its kill", len(runs))
		break
	}
	// The last run reads at full speed (the same batches), to the end.
	writeSpec(0)
	startLines = append(startLines, lines())
	final := startLogRun(t, dir, io.Discard, nil, "job.yaml")
	runs = append(runs, final)
	if _, err := final.wait(); err != nil {
		t.Fatalf("final run: %v\n%s", err, final.logs())
	}
	if len(final.records("restoring", "INFO")) == 0 {
		t.Fatalf("the final run did not restore a checkpoint:\n%s", final.logs())
	}
	startLines = append(startLines, lines()) // when the runs were over
	completed, restored := 0, 0
	restoredID := make([]string, len(runs)) // "" for none
	for i, r := range runs {
		completed += len(r.records("checkpoint completed", "INFO"))
		if rs := r.records("restoring", "INFO"); len(rs) > 0 {
			restored++
			restoredID[i], _ = rs[len(rs)-1]["checkpoint"].(string)
		}
	}

	for o, j := range joinCrashJoins {
		want := joinCrashReference(persons, auctions, j.size, j.slide, j.how == "left")
		if len(want) < joinCrashRows {
			t.Fatalf("%s: the reference has only %d rows", j.id, len(want))
		}
		got := readJoinCrashOutput(t, outs[o])
		seen := map[string]int{}
		for _, l := range got {
			seen[l]++
		}
		var missing, wrong []string
		for _, l := range want {
			if seen[l] == 0 {
				missing = append(missing, l)
			}
		}
		wantSet := map[string]bool{}
		for _, l := range want {
			wantSet[l] = true
		}
		for l := range seen {
			if !wantSet[l] {
				wrong = append(wrong, l)
			}
		}
		slices.Sort(wrong)
		if len(missing) > 0 || len(wrong) > 0 {
			windows := map[string]bool{}
			for _, l := range missing {
				windows[strings.Join(strings.Split(l, "|")[1:3], "|")] = true
			}
			t.Errorf("%s join after %d kills: %d of %d rows missing, in %d windows (first %v); %d not in the reference (first %v)",
				j.id, killed, len(missing), len(want), len(windows), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
			continue
		}
		// The bound: over the restarts that wrote anything, the distinct
		// rows written before them of the windows ending after the
		// watermark of the checkpoint restored (all when none was).
		bound := 0
		for i := 1; i < len(runs); i++ {
			if startLines[i+1][o] == startLines[i][o] {
				continue // it wrote nothing, so nothing twice
			}
			wm, ok := int64(math.MaxInt64), false
			for task, w := range wms[restoredID[i]] {
				if strings.HasPrefix(task, j.id+"-") {
					wm, ok = min(wm, w), true
				}
			}
			if !ok {
				wm = math.MinInt64
			}
			before := map[string]bool{}
			for _, l := range got[:startLines[i][o]] {
				if !before[l] && windowEnd(t, l) > wm {
					before[l] = true
					bound++
				}
			}
		}
		dups := len(got) - len(want)
		if dups > bound {
			t.Errorf("%s join: %d rows written twice after %d kills, more than the restarts could write again (%d)", j.id, dups, killed, bound)
			explainDuplicates(t, runs, startLines, o, got)
		}
		t.Logf("%s join: %d kills, %d restores, %d checkpoints; %d rows as in the nested loop, %d written twice (bound %d)",
			j.id, killed, restored, completed, len(want), dups, bound)
	}
	for i, r := range runs {
		for _, rec := range r.records("window dropped") {
			t.Errorf("run %d dropped rows: %v", i+1, rec)
		}
		for _, rec := range r.records("", "WARN", "ERROR") {
			t.Logf("run %d: %v", i+1, rec)
		}
	}
}

// explainDuplicates logs, for the output o, which run wrote each row
// written twice the first and the second time and in which window, and
// what the runs logged about their checkpoints and restores.
func explainDuplicates(t *testing.T, runs []*logRun, startLines [][]int64, o int, got []string) {
	t.Helper()
	runOf := func(line int) int {
		for i := range runs {
			if int64(line) < startLines[i+1][o] {
				return i + 1
			}
		}
		return -1
	}
	first := map[string]int{}
	type pair struct {
		first, again int
		window       string
	}
	count := map[pair]int{}
	for n, l := range got {
		f, ok := first[l]
		if !ok {
			first[l] = n
			continue
		}
		count[pair{runOf(f), runOf(n), strings.Join(strings.Split(l, "|")[1:3], "|")}]++
	}
	for p, n := range count {
		t.Logf("%d rows of window %s written by run %d and again by run %d", n, p.window, p.first, p.again)
	}
	for i, r := range runs {
		t.Logf("run %d wrote lines %d..%d", i+1, startLines[i][o], startLines[i+1][o])
		for _, rec := range r.records("") {
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "restor") || strings.HasPrefix(msg, "checkpoint") || strings.HasPrefix(msg, "window skips") {
				t.Logf("  %v", rec)
			}
		}
	}
}
