package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The joins' rescale proof. The window join proof's job (an inner join
// over tumbling windows and a left outer one over sliding windows) and
// the interval join proof's (inner and left outer), with state in Badger
// and in memory, each run at
// parallelism 2, stop with a savepoint, are restored from it at 3, stop
// again with one and run to the end at 1, each run reading further into
// the rate-limited input. The rows each join keeps (open windows, rows
// waiting for partners, the paired mark of outer rows) are keyed state in
// the savepoints, redistributed by key group at each restore. The output's
// distinct rows must be exactly a nested loop's over the input: nothing
// lost with a key group moved, nothing an outer join emitted with nulls
// that paired on another subtask before.
func TestJoinRescaleFromSavepoints(t *testing.T) {
	persons := joinCrashInput(rand.New(rand.NewPCG(5, 30)), joinCrashRows, 24, 1_000_000, 0)
	auctions := joinCrashInput(rand.New(rand.NewPCG(6, 30)), joinCrashRows, 20, 2_000_000, 7)
	cases := []struct {
		name, job string
		spec      func(dir string, rate int) string
		ids       []string
		want      func(i int) []string
	}{
		{"window", "join-crash", joinCrashSpec, []string{joinCrashJoins[0].id, joinCrashJoins[1].id}, func(i int) []string {
			j := joinCrashJoins[i]
			return joinCrashReference(persons, auctions, j.size, j.slide, j.how == "left")
		}},
		{"interval", "interval-crash", intervalCrashSpec, []string{intervalCrashJoins[0].id, intervalCrashJoins[1].id}, func(i int) []string {
			j := intervalCrashJoins[i]
			return intervalCrashReference(persons, auctions, j.lower, j.upper, j.how == "left")
		}},
	}
	for _, c := range cases {
		for _, backend := range []string{"badger", "memory"} {
			t.Run(c.name+"/"+backend, func(t *testing.T) {
				dir := t.TempDir()
				writeJoinCrashInput(t, filepath.Join(dir, "persons.jsonl"), "id", "pv", persons)
				writeJoinCrashInput(t, filepath.Join(dir, "auctions.jsonl"), "seller", "av", auctions)
				run := func(par, rate int, args ...string) *execRun {
					spec := strings.Replace(c.spec(dir, rate), "parallelism: 2\n", fmt.Sprintf("parallelism: %d\nmax_parallelism: 24\n", par), 1)
					spec = strings.Replace(spec, "state: {backend: badger}", "state: {backend: "+backend+"}", 1)
					if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
						t.Fatal(err)
					}
					return startRun(t, dir, append(append([]string{"run", "--data-dir", "data"}, args...), "job.yaml")...)
				}
				out := filepath.Join(dir, c.ids[0]+".jsonl")
				// The lines of each output when each run started, and when the
				// runs were over.
				var lines [][]int
				mark := func() {
					var n []int
					for _, id := range c.ids {
						n = append(n, countLines(filepath.Join(dir, id+".jsonl")))
					}
					lines = append(lines, n)
				}
				for i, st := range []struct {
					par  int
					from string
				}{{2, ""}, {3, "s1"}} {
					args := []string{"--savepoint-on-stop", fmt.Sprintf("s%d", i+1)}
					if st.from != "" {
						args = append(args, "--from-savepoint", st.from)
					}
					before := countLines(out)
					mark()
					r := run(st.par, joinCrashRate, args...)
					deadline := time.Now().Add(60 * time.Second)
					for countLines(out) < before+300 && time.Now().Before(deadline) && !r.exited() {
						time.Sleep(50 * time.Millisecond)
					}
					if r.exited() {
						t.Fatalf("run at parallelism %d ended early: %v\n%s", st.par, r.wait(), r.stderr.String())
					}
					r.cmd.Process.Signal(syscall.SIGTERM)
					if err := r.wait(); err != nil {
						t.Fatalf("run at parallelism %d: %v\n%s", st.par, err, r.stderr.String())
					}
					if st.from != "" && !strings.Contains(r.stderr.String(), "rescaling operator state") {
						t.Fatalf("the run at parallelism %d from %s did not rescale:\n%s", st.par, st.from, r.stderr.String())
					}
				}
				mark()
				last := run(1, 0, "--from-savepoint", "s2")
				if err := last.wait(); err != nil {
					t.Fatalf("last run at parallelism 1: %v\n%s", err, last.stderr.String())
				}
				if !strings.Contains(last.stderr.String(), "rescaling operator state") {
					t.Errorf("the last run did not rescale:\n%s", last.stderr.String())
				}
				mark()
				var saved []crashManifest
				for _, name := range []string{"s1", "s2"} {
					data, err := os.ReadFile(filepath.Join(dir, "checkpoints", c.job, "savepoints", name, "manifest.json"))
					if err != nil {
						t.Fatal(err)
					}
					var m crashManifest
					if err := json.Unmarshal(data, &m); err != nil {
						t.Fatal(err)
					}
					saved = append(saved, m)
				}
				for i, id := range c.ids {
					want := c.want(i)
					got := readJoinCrashOutput(t, filepath.Join(dir, id+".jsonl"))
					if missing, wrong := distinctDiff(want, got); len(missing) > 0 || len(wrong) > 0 {
						t.Errorf("%s join after 2 → 3 → 1: %d of %d rows missing (first %v); %d not in the reference (first %v)",
							id, len(missing), len(want), missing[:min(3, len(missing))], len(wrong), wrong[:min(3, len(wrong))])
						continue
					}
					// The pairs a restored run wrote of a row it read and one
					// the savepoint's positions put behind it: rows it had
					// from the redistributed state alone.
					fromState := 0
					for run, m := range saved {
						fromState += pairsBehind(got[lines[run+1][i]:lines[run+2][i]], m, persons, auctions)
					}
					if fromState == 0 {
						t.Errorf("%s join: no restored run wrote a pair with a row behind its savepoint's positions; the proof did not show the rows redistributed from state", id)
					}
					t.Logf("%s join, 2 → 3 → 1: %d rows as in the nested loop (%d written); %d pairs written after a restore had a row only the savepoint held", id, len(want), len(got), fromState)
				}
			})
		}
	}
}
