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
	"strconv"
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

// crashManifest is what the crash proofs read of a checkpoint's
// manifest: the watermark it recorded for each task and the position each
// source subtask resumes from, by partition.
type crashManifest struct {
	Watermarks map[string]int64 `json:"watermarks_ms"`
	Positions  []struct {
		Task      string `json:"task_id"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	} `json:"source_positions"`
}

// lowWatermark returns the lowest watermark m recorded for the tasks whose
// id starts with op and a dash, or math.MinInt64 when it recorded none (or
// there was no checkpoint). Those are op's subtasks, and the tasks of
// operators named after op (op-out, its sink), whose watermarks come
// after op's and are no higher: so the lowest is op's, or lower, which
// only widens the bounds the proofs draw from it.
func (m crashManifest) lowWatermark(op string) int64 {
	wm, ok := int64(math.MaxInt64), false
	for task, w := range m.Watermarks {
		if strings.HasPrefix(task, op+"-") {
			wm, ok = min(wm, w), true
		}
	}
	if !ok {
		return math.MinInt64
	}
	return wm
}

// position returns the offset m's source op resumes partition p from, or
// 0 when it recorded none.
func (m crashManifest) position(op string, p int32) int64 {
	for _, pos := range m.Positions {
		if strings.HasPrefix(pos.Task, op+"-") && pos.Partition == p {
			return pos.Offset
		}
	}
	return 0
}

// readCrashManifests reads every checkpoint of job in the proof's store
// into seen, by checkpoint id. The proofs read them after each run, before
// the next one restores one of them and the retention deletes the oldest.
func readCrashManifests(t *testing.T, dir, job string, seen map[string]crashManifest) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "checkpoints", job, "checkpoints", "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // deleted by the retention since the glob
		}
		var m struct {
			ID string `json:"checkpoint_id"`
			crashManifest
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		seen[m.ID] = m.crashManifest
	}
}

// crashRuns is what runWithKills did: the runs, in order, and what the
// proofs need to know about them.
type crashRuns struct {
	runs []*logRun
	// lines holds the lines in each output when each run started, then
	// when the runs were over.
	lines  [][]int64
	killed int
	// restoredID is the checkpoint each run restored ("" for none), and
	// manifests every checkpoint seen, by id.
	restoredID          []string
	manifests           map[string]crashManifest
	completed, restored int
}

// runWithKills runs the job of dir/job.yaml (id job, writing outs) with
// `arkflow run` again and again, SIGKILLing each run at a random moment:
// half of them (every other one) some time after the run completed its
// first checkpoint, so the input gets through, the others at any moment
// from the start, restores included. It stops after kills kills, or when
// a run reaches the end of its input first. Then, after final has written
// the spec of the last run, it runs the job to the end; that run must
// restore a checkpoint.
func runWithKills(t *testing.T, dir, job string, rng *rand.Rand, kills int, outs []string, final func()) *crashRuns {
	t.Helper()
	cr := &crashRuns{manifests: map[string]crashManifest{}}
	lines := func() []int64 {
		n := make([]int64, len(outs))
		for i, p := range outs {
			n[i] = int64(countLines(p))
		}
		return n
	}
	// A run the test fails during is killed, not left writing into the
	// temporary directory.
	defer func() {
		if len(cr.runs) == 0 {
			return
		}
		if r := cr.runs[len(cr.runs)-1]; r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.wait()
		}
	}()
	for cr.killed < kills {
		cr.lines = append(cr.lines, lines())
		r := startLogRun(t, dir, io.Discard, []string{"checkpoint completed"}, "job.yaml")
		cr.runs = append(cr.runs, r)
		if cr.killed%2 == 1 {
			polltest.Eventually(t, fmt.Sprintf("run %d to complete a checkpoint or end", len(cr.runs)), func() bool {
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
		readCrashManifests(t, dir, job, cr.manifests)
		if ws.Signaled() {
			cr.killed++
			continue
		}
		if err != nil {
			t.Fatalf("run %d failed: %v\n%s", len(cr.runs), err, r.logs())
		}
		t.Logf("run %d reached the end of the input before its kill", len(cr.runs))
		break
	}
	final()
	cr.lines = append(cr.lines, lines())
	last := startLogRun(t, dir, io.Discard, nil, "job.yaml")
	cr.runs = append(cr.runs, last)
	if _, err := last.wait(); err != nil {
		t.Fatalf("final run: %v\n%s", err, last.logs())
	}
	if len(last.records("restoring", "INFO")) == 0 {
		t.Fatalf("the final run did not restore a checkpoint:\n%s", last.logs())
	}
	cr.lines = append(cr.lines, lines()) // when the runs were over
	cr.restoredID = make([]string, len(cr.runs))
	for i, r := range cr.runs {
		cr.completed += len(r.records("checkpoint completed", "INFO"))
		if rs := r.records("restoring", "INFO"); len(rs) > 0 {
			cr.restored++
			cr.restoredID[i], _ = rs[len(rs)-1]["checkpoint"].(string)
		}
	}
	return cr
}

// duplicateBound sums, over the restarts that wrote anything into output
// o (got, in the order written), the distinct rows written before the
// restart that it may write again: those for which again reports true,
// given the restored checkpoint (the zero crashManifest when none was
// restored, or the test did not see it).
func (cr *crashRuns) duplicateBound(o int, got []string, again func(line string, m crashManifest) bool) int {
	bound := 0
	for i := 1; i < len(cr.runs); i++ {
		if cr.lines[i+1][o] == cr.lines[i][o] {
			continue // it wrote nothing, so nothing twice
		}
		m := cr.manifests[cr.restoredID[i]]
		before := map[string]bool{}
		for _, l := range got[:cr.lines[i][o]] {
			if !before[l] && again(l, m) {
				before[l] = true
				bound++
			}
		}
	}
	return bound
}

// checkNoLateRows fails the test if a run logged the warning an operator
// gives at once for its first late row (a killed run cannot be asked for
// its late_dropped count), and logs every run's other warnings and errors.
func (cr *crashRuns) checkNoLateRows(t *testing.T) {
	t.Helper()
	for i, r := range cr.runs {
		for _, rec := range r.records("window dropped") {
			t.Errorf("run %d dropped rows: %v", i+1, rec)
		}
		for _, rec := range r.records("", "WARN", "ERROR") {
			t.Logf("run %d: %v", i+1, rec)
		}
	}
}

// distinctDiff returns the rows of want that got lacks and the distinct
// rows of got that want lacks, sorted.
func distinctDiff(want, got []string) (missing, wrong []string) {
	have, wanted := map[string]bool{}, map[string]bool{}
	for _, l := range got {
		have[l] = true
	}
	for _, l := range want {
		wanted[l] = true
		if !have[l] {
			missing = append(missing, l)
		}
	}
	for l := range have {
		if !wanted[l] {
			wrong = append(wrong, l)
		}
	}
	slices.Sort(missing)
	slices.Sort(wrong)
	return missing, wrong
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
//   - some pairs that runs after a restore wrote joined a row they read
//     with one the restored checkpoint's positions put behind its
//     source: the open windows' rows are state, restored with it;
//   - the output holds no other duplicates than the at-least-once file
//     sink may write again after a restart: the rows of the windows
//     still open at the restored checkpoint's cut, that is ending after
//     the watermark it recorded for the join, as far as they were written
//     before the restart (a window that fired before the cut had its
//     rows deleted, and the floor moved past it, in the epoch its
//     acknowledged output committed). Where the local store ran on from
//     the checkpoint, the floor it kept spares the windows acknowledged
//     since. The test sums the bound over the restarts that wrote
//     anything;
//   - no run dropped a row as late: the input's disorder is within the
//     sources' bound, and the rows a restart reads again are replays, not
//     late rows. A join warns at once of the first row it drops as late,
//     as it counts it in late_dropped (which a killed run cannot be
//     asked for): no run's log may hold that warning.
func TestWindowJoinSurvivesSIGKILL(t *testing.T) {
	var ids []string
	for _, j := range joinCrashJoins {
		ids = append(ids, j.id)
	}
	persons, auctions, outs, cr := runJoinCrashProof(t, "join-crash", 30, joinCrashSpec, ids)

	for o, j := range joinCrashJoins {
		want := joinCrashReference(persons, auctions, j.size, j.slide, j.how == "left")
		if len(want) < joinCrashRows {
			t.Fatalf("%s: the reference has only %d rows", j.id, len(want))
		}
		got := readJoinCrashOutput(t, outs[o])
		if missing, wrong := distinctDiff(want, got); len(missing) > 0 || len(wrong) > 0 {
			windows := map[string]bool{}
			for _, l := range missing {
				windows[joinCrashWindow(l)] = true
			}
			t.Errorf("%s join after %d kills: %d of %d rows missing, in %d windows (first %v); %d not in the reference (first %v)",
				j.id, cr.killed, len(missing), len(want), len(windows), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
			continue
		}
		fromState := cr.pairsFromState(o, got, persons, auctions)
		if fromState == 0 {
			t.Errorf("%s join: no run after a restore wrote a pair of a row it read and one behind its restored positions; the proof did not show the open windows restored from state", j.id)
		}
		// The bound: over the restarts that wrote anything, the distinct
		// rows written before them of the windows ending after the
		// watermark of the checkpoint restored (all when none was).
		bound := cr.duplicateBound(o, got, func(l string, m crashManifest) bool { return windowEnd(t, l) > m.lowWatermark(j.id) })
		dups := len(got) - len(want)
		if dups > bound {
			t.Errorf("%s join: %d rows written twice after %d kills, more than the restarts could write again (%d)", j.id, dups, cr.killed, bound)
			cr.explainDuplicates(t, o, got, func(l string) string { return "window " + joinCrashWindow(l) })
		}
		t.Logf("%s join: %d kills, %d restores, %d checkpoints; %d rows as in the nested loop; %d pairs written after restores had a row only the restored state held; %d written twice (bound %d)",
			j.id, cr.killed, cr.restored, cr.completed, len(want), fromState, dups, bound)
	}
	cr.checkNoLateRows(t)
}

// pairsFromState counts the lines of output o (got, in the order written)
// that runs after a restore wrote of a pair of a row they read and one
// the restored checkpoint's positions put behind its source: a row they
// had from the restored state alone. Lines are joinCrashLine's, or the
// interval proof's (the person's value fourth, the auction's sixth).
func (cr *crashRuns) pairsFromState(o int, got []string, persons, auctions []joinCrashRow) int {
	n := 0
	for i := 1; i < len(cr.runs); i++ {
		if m, ok := cr.manifests[cr.restoredID[i]]; ok {
			n += pairsBehind(got[cr.lines[i][o]:cr.lines[i+1][o]], m, persons, auctions)
		}
	}
	return n
}

// pairsBehind counts the lines that pair a person and an auction one of
// which m's positions put behind its source and the other not.
func pairsBehind(lines []string, m crashManifest, persons, auctions []joinCrashRow) int {
	n := 0
	for _, l := range lines {
		f := strings.Split(l, "|")
		pv, _ := strconv.ParseInt(f[3], 10, 64)
		av, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			continue // with nulls
		}
		pline, aline := pv-persons[0].v, av-auctions[0].v
		if (pline < m.position("persons", int32(pline%2))) != (aline < m.position("auctions", int32(aline%2))) {
			n++
		}
	}
	return n
}

// runJoinCrashProof writes the join proofs' input (persons and auctions)
// and the job spec makes into a temporary directory, validates it, and
// runs it with kills (runWithKills), the last run reading at full speed
// (the same batches) to the end. It returns the input, the output file of
// each join id, and what the runs did.
func runJoinCrashProof(t *testing.T, job string, stream uint64, spec func(dir string, rate int) string, ids []string) (persons, auctions []joinCrashRow, outs []string, cr *crashRuns) {
	t.Helper()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, stream))
	t.Logf("seed %d", seed)
	persons = joinCrashInput(rng, joinCrashRows, 24, 1_000_000, 0)
	auctions = joinCrashInput(rng, joinCrashRows, 20, 2_000_000, 7)
	writeJoinCrashInput(t, filepath.Join(dir, "persons.jsonl"), "id", "pv", persons)
	writeJoinCrashInput(t, filepath.Join(dir, "auctions.jsonl"), "seller", "av", auctions)
	for _, id := range ids {
		outs = append(outs, filepath.Join(dir, id+".jsonl"))
	}
	writeSpec := func(rate int) {
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec(dir, rate)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec(joinCrashRate)
	if code, out, errOut := runCLI("validate", filepath.Join(dir, "job.yaml")); code != 0 {
		t.Fatalf("validate exit %d\n%s%s", code, out, errOut)
	}
	kills := 12
	if testing.Short() {
		kills = 4
	}
	cr = runWithKills(t, dir, job, rng, kills, outs, func() { writeSpec(0) })
	return persons, auctions, outs, cr
}

// joinCrashWindow returns the window of an output line (see
// joinCrashLine).
func joinCrashWindow(line string) string { return strings.Join(strings.Split(line, "|")[1:3], "|") }

// explainDuplicates logs, for the output o, which run wrote each row
// written twice the first and the second time, by the group (a window, a
// key) the row belongs to, and what the runs logged about their
// checkpoints and restores.
func (cr *crashRuns) explainDuplicates(t *testing.T, o int, got []string, group func(string) string) {
	t.Helper()
	runOf := func(line int) int {
		for i := range cr.runs {
			if int64(line) < cr.lines[i+1][o] {
				return i + 1
			}
		}
		return -1
	}
	first := map[string]int{}
	type pair struct {
		first, again int
		group        string
	}
	count := map[pair]int{}
	for n, l := range got {
		f, ok := first[l]
		if !ok {
			first[l] = n
			continue
		}
		count[pair{runOf(f), runOf(n), group(l)}]++
	}
	for p, n := range count {
		t.Logf("%d rows of %s written by run %d and again by run %d", n, p.group, p.first, p.again)
	}
	for i, r := range cr.runs {
		t.Logf("run %d wrote lines %d..%d", i+1, cr.lines[i][o], cr.lines[i+1][o])
		for _, rec := range r.records("") {
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "restor") || strings.HasPrefix(msg, "checkpoint") || strings.HasPrefix(msg, "window skips") {
				t.Logf("  %v", rec)
			}
		}
	}
}
