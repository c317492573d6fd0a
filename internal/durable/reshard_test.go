package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

func infoOf(sub, par int) connectors.TaskInfo {
	return connectors.TaskInfo{JobID: "j", OperatorID: "src", Subtask: sub, Parallelism: par, Logger: slog.New(slog.DiscardHandler)}
}

// partitionSpans returns, for every partition p < parts, n batches of size
// rows from offset 0.
func partitionSpans(parts, n, size int) map[int32][]span {
	out := map[int32][]span{}
	for p := range int32(parts) {
		for i := range n {
			out[p] = append(out[p], span{part: p, start: int64(i * size), n: size})
		}
	}
	return out
}

// writeLogs runs the source at parallelism par: subtask s reads the spans of
// its partitions (p % par == s), and acknowledges the first acked batches of
// each partition. It returns what every partition left unacknowledged.
func writeLogs(t *testing.T, cfg *job.Durability, dir string, par int, spans map[int32][]span, acked int) map[int32][]span {
	t.Helper()
	if err := Reshard(context.Background(), cfg, dir, "j", "src", par, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	left := map[int32][]span{}
	for s := range par {
		// Round robin over the partitions, so that acknowledging the
		// first rounds moves the cursor over exactly them.
		var mine []span
		for i := 0; ; i++ {
			n := len(mine)
			for p := range int32(len(spans)) {
				if int(p)%par == s && i < len(spans[p]) {
					mine = append(mine, spans[p][i])
				}
			}
			if len(mine) == n {
				break
			}
		}
		fake := newFake(mine...)
		src, err := Open(context.Background(), cfg, fake, dir, infoOf(s, par), fmt.Sprintf("src-%d", s), Job{})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, src)
		seen := map[int32]int{}
		for _, sp := range mine {
			b := read(t, src, sp)
			if seen[sp.part] < acked {
				b.Ack(nil)
			} else {
				left[sp.part] = append(left[sp.part], sp)
			}
			seen[sp.part]++
			b.Record.Release()
		}
		if err := src.Log().Flush(); err != nil {
			t.Fatal(err)
		}
		src.Close(context.Background())
		if err := src.CloseWAL(); err != nil && !errors.Is(err, walog.ErrClosedPending) {
			t.Fatal(err)
		}
	}
	return left
}

// replayAll opens every subtask of par over sources with no new input and
// returns what each replays, by subtask and partition, and where each
// sought its source.
func replayAll(t *testing.T, cfg *job.Durability, dir string, par int) (map[int]map[int32][]int64, map[int][]connectors.Position) {
	t.Helper()
	rows := map[int]map[int32][]int64{}
	sought := map[int][]connectors.Position{}
	for s := range par {
		fake := newFake()
		src, err := Open(context.Background(), cfg, fake, dir, infoOf(s, par), fmt.Sprintf("src-%d", s), Job{})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, src)
		rows[s] = map[int32][]int64{}
		for {
			b, err := src.Read(context.Background())
			if errors.Is(err, connectors.ErrEndOfInput) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			parts := b.Record.Column(2).(*array.Int32)
			offs := b.Record.Column(3).(*array.Int64)
			for i := range offs.Len() {
				rows[s][parts.Value(i)] = append(rows[s][parts.Value(i)], offs.Value(i))
			}
			b.Record.Release()
		}
		if ss := fake.sought(); len(ss) > 0 {
			sought[s] = ss[len(ss)-1]
		}
		src.Close(context.Background())
		src.CloseWAL()
	}
	return rows, sought
}

func offsetsOf(sps []span) []int64 {
	var out []int64
	for _, sp := range sps {
		for i := range sp.n {
			out = append(out, sp.start+int64(i))
		}
	}
	return out
}

// After a parallelism change every entry a log held
// after its cursor is replayed once, by the subtask that now reads its
// partition, and each source resumes its partitions after what the logs
// hold; through 2 → 3 → 1 → 4.
func TestReshardReplaysEveryEntryByItsPartitionsOwner(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 20}
	dir := t.TempDir()
	spans := partitionSpans(6, 4, 5) // partitions 0-5, offsets 0-19
	left := writeLogs(t, cfg, dir, 2, spans, 2)
	for _, par := range []int{3, 1, 4} {
		if err := Reshard(context.Background(), cfg, dir, "j", "src", par, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		got, _, _ := logParallelism(filepath.Join(dir, "j", "wal", "src"))
		if got != par {
			t.Fatalf("logs laid out for %d subtasks, want %d", got, par)
		}
		rows, sought := replayAll(t, cfg, dir, par)
		for s, byPart := range rows {
			for p, offs := range byPart {
				if int(p)%par != s {
					t.Errorf("parallelism %d: subtask %d replayed partition %d (its owner is %d)", par, s, p, int(p)%par)
				}
				if want := offsetsOf(left[p]); !reflect.DeepEqual(offs, want) {
					t.Errorf("parallelism %d: partition %d replayed %v, want %v", par, p, offs, want)
				}
			}
		}
		for p := range left {
			if _, ok := rows[int(p)%par][p]; !ok {
				t.Errorf("parallelism %d: partition %d's unacknowledged rows were not replayed", par, p)
			}
		}
		// Every subtask resumes its partitions after what the logs hold.
		for s := range par {
			var want []connectors.Position
			for p := range int32(6) {
				if int(p)%par == s {
					want = append(want, connectors.Position{Partition: p, Offset: 20})
				}
			}
			if got := sought[s]; !reflect.DeepEqual(got, want) {
				t.Errorf("parallelism %d: subtask %d sought its source to %v, want %v", par, s, got, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "j", "wal", "src~rescale")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging directory is left behind: %v", err)
	}
}

// A log written at one parallelism is refused by Open at another when it
// was not redistributed (the object-store backend, or Reshard skipped),
// naming both.
func TestOpenRefusesALogOfAnotherParallelism(t *testing.T) {
	t.Parallel()
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 20}
	dir := t.TempDir()
	writeLogs(t, cfg, dir, 2, partitionSpans(2, 1, 3), 1)
	_, err := Open(context.Background(), cfg, newFake(), dir, infoOf(0, 3), "src-0", Job{})
	if err == nil || !containsAll(err.Error(), "written by 2 subtasks", "this start runs 3") {
		t.Fatalf("Open at another parallelism: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// The redistribution survives SIGKILL at any moment: after each kill the
// next Reshard finishes or redoes it, and the logs replay every
// unacknowledged row exactly once, each by its partition's owner.
func TestReshardSurvivesSIGKILL(t *testing.T) {
	if dir := os.Getenv("ARKFLOW_RESHARD_CHILD"); dir != "" {
		par, _ := strconv.Atoi(os.Getenv("ARKFLOW_RESHARD_PAR"))
		reshardHook = func(step string) {
			fmt.Println(step)
			time.Sleep(time.Duration(rand.IntN(25)) * time.Millisecond)
		}
		if err := Reshard(context.Background(), &job.Durability{Sync: "always"}, dir, "j", "src", par, slog.New(slog.DiscardHandler)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("SIGKILL loop")
	}
	cfg := &job.Durability{Sync: "always", DrainTimeoutMS: 20}
	dir := t.TempDir()
	spans := partitionSpans(7, 40, 10)
	left := writeLogs(t, cfg, dir, 2, spans, 10)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	pars := []int{3, 1, 4, 2}
	kills, inSwap, betweenRenames, completed := 0, 0, 0, 0
	for round := 0; round < 30; round++ {
		par := pars[round%len(pars)]
		cmd := exec.Command(os.Args[0], "-test.run=^TestReshardSurvivesSIGKILL$")
		cmd.Env = append(os.Environ(), "ARKFLOW_RESHARD_CHILD="+dir, "ARKFLOW_RESHARD_PAR="+strconv.Itoa(par))
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		switch err := cmd.Wait(); {
		case err == nil:
			completed++
		case strings.Contains(out.String(), "renamed"):
			betweenRenames++
		case strings.Contains(out.String(), "whole"):
			inSwap++
		default:
			kills++
		}
		// The next start finishes what the kill interrupted.
		if err := Reshard(context.Background(), cfg, dir, "j", "src", par, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		rows, _ := replayAll(t, cfg, dir, par)
		got := map[int32][]int64{}
		for s, byPart := range rows {
			for p, offs := range byPart {
				if int(p)%par != s {
					t.Fatalf("round %d: subtask %d of %d replayed partition %d", round, s, par, p)
				}
				got[p] = offs
			}
		}
		for p, sps := range left {
			if want := offsetsOf(sps); !reflect.DeepEqual(got[p], want) {
				sort.Slice(got[p], func(i, j int) bool { return got[p][i] < got[p][j] })
				t.Fatalf("round %d (parallelism %d): partition %d replayed %d rows, want %d (first %v)", round, par, p, len(got[p]), len(want), got[p][:min(5, len(got[p]))])
			}
		}
	}
	t.Logf("%d kills before the new logs were whole, %d after, %d between the swap's renames; %d redistributions completed first", kills, inSwap, betweenRenames, completed)
}
