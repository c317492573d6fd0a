package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The input of the temporal join's crash proof: a table of persons (12
// keys, 600 changes 100 ms apart in event time) and a stream of auctions
// (3000 rows 20 ms apart), both spanning a minute of event time, up to
// 200 ms out of order, in two file partitions each (line i in partition
// i mod 2).
const (
	temporalCrashKeys    = 12
	temporalCrashPersons = 600
	temporalCrashPStep   = 100
	temporalCrashAuction = 3000
	temporalCrashAStep   = 20
	temporalCrashJitter  = 200
	// Persons are read 150 rows a second per subtask, in batches of 10:
	// 2 s of input, 30 s of event time a second. Auctions 100 rows a
	// second, in batches of 10 (what the rate allows in 100 ms): 15 s, 4
	// s of event time a second. So the table runs far ahead: its versions
	// wait in state for the stream rows of their time, the stream's
	// watermark decides which of them are kept, and the table's input
	// ends while the killed runs go on, after which every version a run
	// joins comes from the restored state.
	temporalCrashPRate  = 150
	temporalCrashARate  = 100
	temporalCrashPBatch = 10
	temporalCrashABatch = 10
	// 1 s, for both sources. A batch advances its source's watermark to
	// its newest row before its rows are classified (the default
	// watermark advance), so the bound must exceed what a batch of a
	// partition spans in event time plus the disorder, or rows would be
	// late depending on where the batches break: a late stream row is
	// dropped, and a late table row changes what the stream rows before it
	// joined. An auctions batch spans 9 × 40 ms; a persons batch would
	// span 9 × 200 ms, so the persons advance their watermark per row,
	// where only the disorder counts.
	temporalCrashOOO = 1000
)

// auctionRow is a stream row: its key ("" for null), a value unique over
// the stream and its event time.
type auctionRow struct {
	key   string
	v, ts int64
}

// personRow is a table row: its key ("" for null), name and state ("" for
// null; both null make the row a delete), deleted flag (nil for null) and
// event time, unique over the table.
type personRow struct {
	key, name, state string
	deleted          *bool
	ts               int64
}

// deletes reports whether the table row deletes its key.
func (p personRow) deletes() bool {
	return (p.deleted != nil && *p.deleted) || (p.name == "" && p.state == "")
}

// temporalCrashTable makes the table: the i-th change at T0 + i·step less
// a random disorder (moved on to a time no other row has), to a key drawn
// so that p0 changes about every 400 ms of event time and p11 every 15 s
// (a version of p11 is joined for long after it came). One change in 10 deletes
// the key (deleted true, or name and state null, with deleted false or
// null); some others have a null name, state or deleted flag, which
// deletes nothing; one in 100 has a null key.
func temporalCrashTable(rng *rand.Rand) []personRow {
	rows := make([]personRow, temporalCrashPersons)
	seen := map[int64]bool{}
	yes, no := true, false
	for i := range rows {
		ts := joinCrashT0 + int64(i)*temporalCrashPStep - rng.Int64N(temporalCrashJitter+1)
		for seen[ts] {
			ts++
		}
		seen[ts] = true
		p := personRow{key: fmt.Sprintf("p%d", rng.IntN(rng.IntN(temporalCrashKeys)+1)),
			name: fmt.Sprintf("n%d", i), state: []string{"OR", "ID", "CA"}[rng.IntN(3)], deleted: &no, ts: ts}
		switch rng.IntN(20) {
		case 0:
			p.deleted = &yes
		case 1:
			p.name, p.state = "", ""
		case 2:
			p.name, p.state, p.deleted = "", "", nil
		case 3:
			p.deleted = nil
		case 4:
			p.name = ""
		case 5:
			p.state = ""
		}
		if rng.IntN(100) == 0 {
			p.key = ""
		}
		rows[i] = p
	}
	return rows
}

// temporalCrashStream makes the stream: the i-th auction at T0 + 7 +
// i·step less a random disorder, of a seller drawn evenly from p0..p13
// (p12 and p13 are never in the table), one in 100 null.
func temporalCrashStream(rng *rand.Rand) []auctionRow {
	rows := make([]auctionRow, temporalCrashAuction)
	for i := range rows {
		rows[i] = auctionRow{key: fmt.Sprintf("p%d", rng.IntN(temporalCrashKeys+2)), v: 2_000_000 + int64(i),
			ts: joinCrashT0 + 7 + int64(i)*temporalCrashAStep - rng.Int64N(temporalCrashJitter+1)}
		if rng.IntN(100) == 0 {
			rows[i].key = ""
		}
	}
	return rows
}

// lateInBatches returns the first row of a file whose rows have event
// times ts that would come behind its source's watermark when read as the
// proof reads it, or -1: two partitions, line i in partition i mod 2,
// each cut into batches of batch rows, a batch moving the watermark to
// its newest row less ooo before its rows are classified, or with perRow
// each row meeting the watermark the rows before it gave. A join's
// watermark is at most its inputs', so a row that is in time here is in
// time there.
func lateInBatches(ts []int64, batch int, perRow bool, ooo int64) int {
	for p := range 2 {
		var idx []int
		for i := p; i < len(ts); i += 2 {
			idx = append(idx, i)
		}
		newest := int64(math.MinInt64)
		for lo := 0; lo < len(idx); lo += batch {
			b := idx[lo:min(lo+batch, len(idx))]
			if !perRow {
				for _, i := range b {
					newest = max(newest, ts[i])
				}
			}
			for _, i := range b {
				if newest != math.MinInt64 && ts[i] <= newest-ooo {
					return i
				}
				newest = max(newest, ts[i])
			}
		}
	}
	return -1
}

func writeTemporalCrashInput(t *testing.T, dir string, persons []personRow, auctions []auctionRow) {
	t.Helper()
	str := func(s string) string {
		if s == "" {
			return "null"
		}
		return strconv.Quote(s)
	}
	var p, a strings.Builder
	for _, r := range persons {
		del := "null"
		if r.deleted != nil {
			del = strconv.FormatBool(*r.deleted)
		}
		fmt.Fprintf(&p, "{\"id\":%s,\"name\":%s,\"state\":%s,\"deleted\":%s,\"ts\":%d}\n", str(r.key), str(r.name), str(r.state), del, r.ts)
	}
	for _, r := range auctions {
		fmt.Fprintf(&a, "{\"seller\":%s,\"av\":%d,\"ts\":%d}\n", str(r.key), r.v, r.ts)
	}
	for name, data := range map[string]string{"persons.jsonl": p.String(), "auctions.jsonl": a.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The two temporal joins of the proof's job, auctions joining the persons
// table by seller: inner, and left outer.
var temporalCrashJoins = []struct{ id, how string }{{"inner", "inner"}, {"outer", "left"}}

// temporalCrashSpec is the proof's job: auctions (the stream) and persons
// (the table, with deleted_field deleted), two file sources of two
// partitions, each feeding both joins (partitioned by its key), each join
// writing to its own file sink; parallelism 2, Badger state, checkpoints
// every 300 ms to file://. The sources are read at the rates above, or
// with full at full speed, in the same batches.
func temporalCrashSpec(dir string, full bool) string {
	var ops, edges, sinks strings.Builder
	for _, j := range temporalCrashJoins {
		fmt.Fprintf(&ops, "  - id: %s\n    kind: join\n    config: {type: temporal, left: auctions, right: persons, left_key: seller, right_key: id, how: %s, deleted_field: deleted}\n", j.id, j.how)
		fmt.Fprintf(&ops, "  - {id: %s-out, kind: sink}\n", j.id)
		fmt.Fprintf(&edges, "  - {id: a-%[1]s, from: auctions, to: %[1]s, partitioned: true}\n  - {id: p-%[1]s, from: persons, to: %[1]s, partitioned: true}\n  - {id: o-%[1]s, from: %[1]s, to: %[1]s-out}\n", j.id)
		fmt.Fprintf(&sinks, "  - {operator_id: %s-out, output_type: file, config: {path: %q}}\n", j.id, filepath.Join(dir, j.id+".jsonl"))
	}
	source := func(id, schema string, batch, rate int, advance string) string {
		if full {
			rate = 0
		}
		return fmt.Sprintf(`  - operator_id: %s
    input_type: file
    config: {path: %q, partitions: 2, batch_size: %d, rate_per_sec: %d, schema: [%s, {name: ts, type: int64}]}
    time: {mode: event_time, timestamp_field: ts, watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: %d, advance: %s}}
`, id, filepath.Join(dir, id+".jsonl"), batch, rate, schema, temporalCrashOOO, advance)
	}
	return `id: temporal-crash
parallelism: 2
state: {backend: badger}
checkpoint: {interval_ms: 300, retention: 3, object_store_uri: "file://` + filepath.Join(dir, "checkpoints") + `"}
operators:
  - {id: auctions, kind: source}
  - {id: persons, kind: source}
` + ops.String() + "edges:\n" + edges.String() + "sources:\n" +
		source("auctions", "{name: seller, type: string}, {name: av, type: int64}", temporalCrashABatch, temporalCrashARate, "batch") +
		source("persons", "{name: id, type: string}, {name: name, type: string}, {name: state, type: string}, {name: deleted, type: bool}", temporalCrashPBatch, temporalCrashPRate, "per_row") +
		"sinks:\n" + sinks.String()
}

// temporalCrashReference is the temporal join computed by a nested loop
// over the input rows, one line per output row (see temporalCrashLine):
// for every auction, the person row of its seller with the latest event
// time at or before the auction's, unless that row deletes the seller; an
// auction without one (a null seller included) is dropped, or under
// outer written once with nulls.
func temporalCrashReference(auctions []auctionRow, persons []personRow, outer bool) []string {
	var out []string
	for _, a := range auctions {
		var cur *personRow
		for i, p := range persons {
			if a.key != "" && p.key == a.key && p.ts <= a.ts && (cur == nil || p.ts > cur.ts) {
				cur = &persons[i]
			}
		}
		switch {
		case cur != nil && !cur.deletes():
			out = append(out, temporalCrashLine(a.key, a.v, a.ts, cur.name, cur.state, strconv.FormatInt(cur.ts, 10)))
		case outer:
			out = append(out, temporalCrashLine(a.key, a.v, a.ts, "", "", "null"))
		}
	}
	slices.Sort(out)
	return out
}

// temporalCrashLine is an output row: seller|av|left_ts|name|state|
// right_ts, "null" for a null ("" for a null string). The deleted flag is
// not in the output: it says what the table holds.
func temporalCrashLine(key string, v, ts int64, name, state, rts string) string {
	orNull := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	return fmt.Sprintf("%s|%d|%d|%s|%s|%s", orNull(key), v, ts, orNull(name), orNull(state), rts)
}

// readTemporalCrashOutput reads a temporal join's output file as reference
// lines, in the order written.
func readTemporalCrashOutput(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r struct {
			Seller  *string `json:"seller"`
			AV      int64   `json:"av"`
			LeftTS  int64   `json:"left_ts"`
			Name    *string `json:"name"`
			State   *string `json:"state"`
			RightTS *int64  `json:"right_ts"`
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s line %d is not a join row: %q: %v", path, len(out)+1, sc.Text(), err)
		}
		str := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		rts := "null"
		if r.RightTS != nil {
			rts = strconv.FormatInt(*r.RightTS, 10)
		}
		out = append(out, temporalCrashLine(str(r.Seller), r.AV, r.LeftTS, str(r.Name), str(r.State), rts))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// temporalCrashField returns field i of an output line (see
// temporalCrashLine) as an integer, or false for null.
func temporalCrashField(t *testing.T, line string, i int) (int64, bool) {
	t.Helper()
	f := strings.Split(line, "|")[i]
	if f == "null" {
		return 0, false
	}
	n, err := strconv.ParseInt(f, 10, 64)
	if err != nil {
		t.Fatalf("line %q: field %d: %v", line, i, err)
	}
	return n, true
}

// The crash proof of the temporal join, whose table lives in state, not in
// the input a restart replays. A job of two rate-limited file sources, the
// auctions stream and the persons table (changes over time, some of them
// deletes by the deleted flag or by null values), each feeding an inner
// and a left outer temporal join (parallelism 2, Badger state, checkpoints
// every 300 ms to file://, file sinks), is SIGKILLed at random moments and
// run again with `arkflow run` each time, restoring the latest checkpoint,
// as the window join's proof does (runWithKills); a last run goes to the
// end. Then, for each join:
//
//   - the output's distinct rows are exactly the rows of a nested loop
//     over the input rows the test wrote: every auction with the person
//     row of its seller current at its event time, none lost, none with
//     another version, none joined to a deleted seller;
//   - some rows that runs after a restore wrote joined a person row the
//     restored checkpoint's positions put behind the table's source: a
//     version that run never read, which it had from the restored state
//     alone;
//   - the output holds no other duplicates than the at-least-once file
//     sink may write again after a restart. A run emits an auction at
//     most once (a join writes one row per auction), and only if the
//     auction is not behind the join's watermark, which starts at the one
//     the restored checkpoint recorded for the join, and only if the run
//     reads it, at or after the checkpoint's position of its partition.
//     So the rows written twice are at most, summed over the restarts
//     that wrote anything, the distinct rows written before the restart
//     whose auction is both at or after that watermark and at or after
//     that position (all when no checkpoint was restored);
//   - no run dropped a row as late: the input's disorder, batches
//     included, is within the sources' bound (the test checks it on the
//     rows it writes), and the rows a restart reads again met the
//     watermark the checkpoint recorded when they first came. The join
//     warns at once of the first row it drops as late: no run's log may
//     hold that warning.
func TestTemporalJoinSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 31))
	t.Logf("seed %d", seed)
	persons := temporalCrashTable(rng)
	auctions := temporalCrashStream(rng)
	pts, ats := make([]int64, len(persons)), make([]int64, len(auctions))
	personAt := map[int64]int64{} // the line of each person row, by event time
	for i, p := range persons {
		pts[i] = p.ts
		personAt[p.ts] = int64(i)
	}
	for i, a := range auctions {
		ats[i] = a.ts
	}
	if i := lateInBatches(pts, temporalCrashPBatch, true, temporalCrashOOO); i >= 0 {
		t.Fatalf("person row %d (%+v) would be late: the input is out of the sources' bound", i, persons[i])
	}
	if i := lateInBatches(ats, temporalCrashABatch, false, temporalCrashOOO); i >= 0 {
		t.Fatalf("auction row %d (%+v) would be late: the input is out of the sources' bound", i, auctions[i])
	}
	writeTemporalCrashInput(t, dir, persons, auctions)
	var outs []string
	for _, j := range temporalCrashJoins {
		outs = append(outs, filepath.Join(dir, j.id+".jsonl"))
	}
	writeSpec := func(full bool) {
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(temporalCrashSpec(dir, full)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec(false)
	if code, out, errOut := runCLI("validate", filepath.Join(dir, "job.yaml")); code != 0 {
		t.Fatalf("validate exit %d\n%s%s", code, out, errOut)
	}
	kills := 12
	if testing.Short() {
		kills = 4
	}
	// The last run reads at full speed (the same batches), to the end.
	cr := runWithKills(t, dir, "temporal-crash", rng, kills, outs, func() { writeSpec(true) })

	last := cr.manifests[cr.restoredID[len(cr.runs)-1]]
	t.Logf("the last run restored the table's source at lines %d and %d of %d, the stream's at %d and %d of %d",
		last.position("persons", 0), last.position("persons", 1), len(persons), last.position("auctions", 0), last.position("auctions", 1), len(auctions))
	for o, j := range temporalCrashJoins {
		want := temporalCrashReference(auctions, persons, j.how == "left")
		got := readTemporalCrashOutput(t, outs[o])
		if missing, wrong := distinctDiff(want, got); len(missing) > 0 || len(wrong) > 0 {
			t.Errorf("%s join after %d kills: %d of %d rows missing (first %v); %d not in the reference (first %v)",
				j.id, cr.killed, len(missing), len(want), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
			continue
		}
		// The rows of versions only the restored state held.
		fromState := 0
		for i := 1; i < len(cr.runs); i++ {
			m, ok := cr.manifests[cr.restoredID[i]]
			if !ok {
				continue
			}
			for _, l := range got[cr.lines[i][o]:cr.lines[i+1][o]] {
				if rts, ok := temporalCrashField(t, l, 5); ok {
					if line := personAt[rts]; line < m.position("persons", int32(line%2)) {
						fromState++
					}
				}
			}
		}
		if fromState == 0 {
			t.Errorf("%s join: no run after a restore wrote a row joining a person its restored positions put behind the table's source; the proof did not show the table restored from state", j.id)
		}
		bound := cr.duplicateBound(o, got, func(l string, m crashManifest) bool {
			v, _ := temporalCrashField(t, l, 1)
			ts, _ := temporalCrashField(t, l, 2)
			line := v - auctions[0].v
			return ts >= m.lowWatermark(j.id) && line >= m.position("auctions", int32(line%2))
		})
		dups := len(got) - len(want)
		if dups > bound {
			t.Errorf("%s join: %d rows written twice after %d kills, more than the restarts could write again (%d)", j.id, dups, cr.killed, bound)
			cr.explainDuplicates(t, o, got, func(l string) string { return "seller " + strings.Split(l, "|")[0] })
		}
		t.Logf("%s join: %d kills, %d restores, %d checkpoints; %d rows as in the nested loop; %d rows written after restores joined versions only the restored state held; %d written twice (bound %d)",
			j.id, cr.killed, cr.restored, cr.completed, len(want), fromState, dups, bound)
	}
	cr.checkNoLateRows(t)
}
