package arkflow_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
)

// crashUsers are the keys of the crash test.
var crashUsers = []string{"ann", "bob", "cyd", "dee", "eve", "fay", "gus", "hal"}

// crashRow is row i of the crash test's input: all in hour 0, so the
// hourly window stays open and comes back only by replay.
func crashRow(i int) Purchase {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	return Purchase{User: crashUsers[r.IntN(len(crashUsers))], Amount: r.Int64N(50), TS: time.UnixMilli(r.Int64N(3_600_000))}
}

// crashAnswers are every query of every key, as the child prints them.
type crashAnswers map[string][]string

// answersOf queries every user's totals, count and windows.
func answersOf(ctx context.Context, j *arkflow.Job) (crashAnswers, error) {
	out := crashAnswers{}
	for _, u := range crashUsers {
		tot, err := arkflow.QueryRows[userTotal](ctx, j, "totals", u)
		if err != nil {
			return nil, err
		}
		k, err := j.QueryState(ctx, "count", u)
		if err != nil {
			return nil, err
		}
		n, _, err := purchases.Get(k)
		if err != nil {
			return nil, err
		}
		wins, err := arkflow.QueryRows[userWindow](ctx, j, "hourly", u)
		if err != nil {
			return nil, err
		}
		out[u] = []string{fmt.Sprint(tot), fmt.Sprint(n), fmt.Sprint(wins)}
	}
	return out, nil
}

// modelAnswers is what answersOf must print after rows [0, n) went in.
func modelAnswers(n int) crashAnswers {
	m := newQueryModel()
	for i := range n {
		m.add(crashRow(i))
	}
	out := crashAnswers{}
	for _, u := range crashUsers {
		var tot []userTotal
		var wins []userWindow
		if m.n[u] > 0 {
			tot = []userTotal{{u, m.n[u], m.total[u]}}
			v := m.hours[u][0]
			wins = []userWindow{{u, time.UnixMilli(0).UTC(), time.UnixMilli(3_600_000).UTC(), v[0], v[1], false}}
		}
		out[u] = []string{fmt.Sprint(tot), fmt.Sprint(m.n[u]), fmt.Sprint(wins)}
	}
	return out
}

// TestQueryCrashChild is the child process of TestQueriesSurviveSIGKILL
// (skipped otherwise): it runs the query job with a durable source and
// checkpoints, and takes commands on stdin: "query" prints every answer
// once the rows pushed so far went through ("answers {json}"); "push A B"
// pushes rows [A, B), printing "ok i" after each accepted row.
func TestQueryCrashChild(t *testing.T) {
	dir := os.Getenv("ARKFLOW_QUERY_CHILD_DIR")
	if dir == "" {
		t.Skip("the child process of TestQueriesSurviveSIGKILL")
	}
	ctx := context.Background()
	src := push.New(push.Config[Purchase]{Partitions: 3})
	j := queryJob(t, src, job.State{Backend: os.Getenv("ARKFLOW_QUERY_CHILD_BACKEND")}, dir, arkflow.Durable(job.Durability{}),
		job.Checkpoint{IntervalMS: 200, ObjectStoreURI: "file://" + filepath.Join(dir, "ckpt")})
	go func() {
		if err := j.Run(ctx); err != nil {
			fmt.Println("run", err)
			os.Exit(3)
		}
	}()
	for j.Status() != arkflow.Running {
		time.Sleep(5 * time.Millisecond)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch f[0] {
		case "query":
			if _, err := j.Checkpoint(ctx); err != nil { // a barrier behind every row pushed
				t.Fatal(err)
			}
			a, err := answersOf(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			line, _ := json.Marshal(a)
			fmt.Printf("answers %s\n", line)
		case "push":
			from, _ := strconv.Atoi(f[1])
			to, _ := strconv.Atoi(f[2])
			for i := from; i < to; i++ {
				if err := src.Push(ctx, crashRow(i)); err != nil {
					t.Fatal(err)
				}
				fmt.Printf("ok %d\n", i)
			}
		}
	}
}

// crashChild is a running child process of the crash test.
type crashChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startCrashChild(t *testing.T, dir, backend string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQueryCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), "ARKFLOW_QUERY_CHILD_DIR="+dir, "ARKFLOW_QUERY_CHILD_BACKEND="+backend)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// answers asks the child for its answers.
func (c *crashChild) answers(t *testing.T) crashAnswers {
	t.Helper()
	fmt.Fprintln(c.stdin, "query")
	for line := range c.lines {
		if rest, ok := strings.CutPrefix(line, "answers "); ok {
			var a crashAnswers
			if err := json.Unmarshal([]byte(rest), &a); err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatal("the child ended without answering")
	return nil
}

// kill kills the child with SIGKILL and returns how many rows it had
// said it accepted by then, at least accepted: the child goes on pushing
// between the parent's last read and the kill.
func (c *crashChild) kill(accepted int) int {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	for line := range c.lines {
		if rest, ok := strings.CutPrefix(line, "ok "); ok {
			i, _ := strconv.Atoi(rest)
			accepted = max(accepted, i+1)
		}
	}
	return accepted
}

// A service that queries its job, is killed with SIGKILL, and restarts
// gets the same answers before any new row arrives; and every answer
// equals a model of the rows Push accepted. Half of the kills land while
// rows are being pushed, half right after the answers.
func TestQueriesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILL loop")
	}
	for _, backend := range []string{job.BackendMemory, job.BackendBadger} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(11, 12))
			var before crashAnswers // answered just before the last kill
			accepted := 0           // rows Push accepted, as far as the child said
			for kill := 0; kill < 6; kill++ {
				c := startCrashChild(t, dir, backend)
				after := c.answers(t)
				if before != nil && !reflect.DeepEqual(after, before) {
					t.Fatalf("kill %d: after the restart\n%v\nbefore the kill\n%v", kill, after, before)
				}
				if !reflect.DeepEqual(after, modelAnswers(accepted)) && !reflect.DeepEqual(after, modelAnswers(accepted+1)) {
					t.Fatalf("kill %d: after the restart\n%v\nwant the model of %d rows\n%v", kill, after, accepted, modelAnswers(accepted))
				}
				if reflect.DeepEqual(after, modelAnswers(accepted+1)) && !reflect.DeepEqual(after, modelAnswers(accepted)) {
					accepted++ // the row in flight at the kill was accepted
				}
				to := accepted + 50 + rng.IntN(100)
				fmt.Fprintf(c.stdin, "push %d %d\n", accepted, to)
				midPush := kill%2 == 0
				stopAt := accepted + rng.IntN(to-accepted)
				for line := range c.lines {
					if rest, ok := strings.CutPrefix(line, "ok "); ok {
						accepted, _ = strconv.Atoi(rest)
						accepted++
					}
					if accepted == to || midPush && accepted >= stopAt {
						break
					}
				}
				before = nil
				if !midPush {
					before = c.answers(t)
					if want := modelAnswers(accepted); !reflect.DeepEqual(before, want) {
						t.Fatalf("kill %d: answers\n%v\nwant the model of %d rows\n%v", kill, before, accepted, want)
					}
				}
				accepted = c.kill(accepted)
			}
		})
	}
}
