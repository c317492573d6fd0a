package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The two interval joins of the proof's job: inner, and left outer (the
// persons of the last four keys have no auction, so they come out with
// nulls, as do the others whose auctions are out of bounds).
var intervalCrashJoins = []struct {
	id, how      string
	lower, upper int64
}{
	{"inner", "inner", -300, 200},
	{"outer", "left", -100, 250},
}

// intervalCrashSpec is the proof's job: the window join proof's sources
// (persons and auctions, rate-limited file sources of two partitions),
// each feeding both interval joins, each join writing its own file sink;
// parallelism 2, Badger state, checkpoints every 300 ms to file://.
func intervalCrashSpec(dir string, rate int) string {
	spec := joinCrashSpec(dir, rate)
	spec = strings.Replace(spec, "id: join-crash", "id: interval-crash", 1)
	for i, j := range intervalCrashJoins {
		w := joinCrashJoins[i]
		old := fmt.Sprintf("{type: window, left: persons, right: auctions, left_key: id, right_key: seller, how: %s, window: %s}", w.how, w.window)
		repl := fmt.Sprintf("{type: interval, left: persons, right: auctions, left_key: id, right_key: seller, how: %s, lower_ms: %d, upper_ms: %d}", j.how, j.lower, j.upper)
		if !strings.Contains(spec, old) {
			panic("the window join proof's spec changed: " + old)
		}
		spec = strings.Replace(spec, old, repl, 1)
	}
	return spec
}

// intervalCrashReference is an interval join computed by a nested loop
// over the input rows: every person and auction of one key with
// auction.ts + lower <= person.ts <= auction.ts + upper; under outer, a
// person no auction pairs with once with nulls.
func intervalCrashReference(left, right []joinCrashRow, lower, upper int64, outer bool) []string {
	var out []string
	for _, l := range left {
		matched := false
		for _, r := range right {
			if r.key == l.key && l.ts >= r.ts+lower && l.ts <= r.ts+upper {
				matched = true
				out = append(out, fmt.Sprintf("%s|||%d|%d|%d|%d", l.key, l.v, l.ts, r.v, r.ts))
			}
		}
		if outer && !matched {
			out = append(out, fmt.Sprintf("%s|||%d|%d|null|null", l.key, l.v, l.ts))
		}
	}
	slices.Sort(out)
	return out
}

// The crash proof of the interval join, whose kept rows are state. The
// window join proof's sources feed an inner and a left outer interval
// join (parallelism 2, state in Badger and, a second time, in memory,
// whose kept rows reach the store only when a checkpoint freezes it;
// checkpoints every 300 ms to file://, file sinks); the job is SIGKILLed at random moments and run
// again with `arkflow run` each time, restoring the latest checkpoint
// (runWithKills); a last run goes to the end. Then, for each join:
//
//   - the output's distinct rows are exactly the rows of a nested loop
//     over the input rows the test wrote: every pair once at least, and
//     under outer every person no auction pairs with, with nulls — none
//     emitted with nulls that had paired before a crash, which a join
//     forgetting its kept rows' pairing would do;
//   - some pairs that runs after a restore wrote joined a row they read
//     with one the restored checkpoint's positions put behind its
//     source: a row they had from the restored state alone;
//   - the output holds no other duplicates than the at-least-once file
//     sink may write again after a restart: a pair is emitted with the
//     later of its rows, in that row's journal epoch, so a restart
//     writes it again only if one of its rows is read again, at or after
//     the restored checkpoint's position of its partition; a person's
//     null row is emitted when the watermark ends it, so again only if
//     the person is read again or was still kept at the checkpoint (its
//     end after the watermark the checkpoint recorded). The test sums
//     the distinct rows written before each restart that meet that, over
//     the restarts that wrote anything;
//   - no run dropped a row as late.
func TestIntervalJoinSurvivesSIGKILL(t *testing.T) {
	for _, backend := range []string{"badger", "memory"} {
		t.Run(backend, func(t *testing.T) { intervalCrashProof(t, backend) })
	}
}

func intervalCrashProof(t *testing.T, backend string) {
	var ids []string
	for _, j := range intervalCrashJoins {
		ids = append(ids, j.id)
	}
	spec := func(dir string, rate int) string {
		return strings.Replace(intervalCrashSpec(dir, rate), "state: {backend: badger}", "state: {backend: "+backend+"}", 1)
	}
	persons, auctions, outs, cr := runJoinCrashProof(t, "interval-crash", 32, spec, ids)

	field := func(l string, i int) (int64, bool) {
		v, err := strconv.ParseInt(strings.Split(l, "|")[i], 10, 64)
		return v, err == nil
	}
	for o, j := range intervalCrashJoins {
		want := intervalCrashReference(persons, auctions, j.lower, j.upper, j.how == "left")
		got := readJoinCrashOutput(t, outs[o])
		if missing, wrong := distinctDiff(want, got); len(missing) > 0 || len(wrong) > 0 {
			t.Errorf("%s join after %d kills: %d of %d rows missing (first %v); %d not in the reference (first %v)",
				j.id, cr.killed, len(missing), len(want), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
			continue
		}
		again := func(l string, m crashManifest) bool {
			pv, _ := field(l, 3)
			pts, _ := field(l, 4)
			pline := pv - persons[0].v
			if pline >= m.position("persons", int32(pline%2)) {
				return true
			}
			av, paired := field(l, 5)
			if !paired {
				return pts-j.lower+1 > m.lowWatermark(j.id)
			}
			aline := av - auctions[0].v
			return aline >= m.position("auctions", int32(aline%2))
		}
		// The pairs a run after a restore wrote of a row it read and one
		// the restored positions put behind it, which it had from the
		// restored state alone.
		fromState := cr.pairsFromState(o, got, persons, auctions)
		if fromState == 0 {
			t.Errorf("%s join: no run after a restore wrote a pair of a row it read and one behind its restored positions; the proof did not show the kept rows restored from state", j.id)
		}
		bound := cr.duplicateBound(o, got, again)
		dups := len(got) - len(want)
		if dups > bound {
			t.Errorf("%s join: %d rows written twice after %d kills, more than the restarts could write again (%d)", j.id, dups, cr.killed, bound)
			cr.explainDuplicates(t, o, got, func(l string) string { return "person " + strings.Split(l, "|")[0] })
			for i := 1; i < len(cr.runs); i++ {
				m := cr.manifests[cr.restoredID[i]]
				before := map[string]bool{}
				for _, l := range got[:cr.lines[i][o]] {
					before[l] = true
				}
				for _, l := range got[cr.lines[i][o]:cr.lines[i+1][o]] {
					if before[l] && !again(l, m) {
						t.Logf("run %d wrote %s again, out of the bound of checkpoint %s (watermark %d)", i+1, l, cr.restoredID[i], m.lowWatermark(j.id))
					}
				}
			}
		}
		t.Logf("%s join: %d kills, %d restores, %d checkpoints; %d rows as in the nested loop; %d pairs written after restores had a row only the restored state held; %d written twice (bound %d)",
			j.id, cr.killed, cr.restored, cr.completed, len(want), fromState, dups, bound)
	}
	cr.checkNoLateRows(t)
}
