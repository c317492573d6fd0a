package walog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test: a child process appends from 8 goroutines and
// acknowledges out of order until the parent SIGKILLs it at a random
// moment. The parent then checks the directory against what the child
// reported on stdout, and the next child continues on the same directory.
//
// The child reports, one line per event, each written with one write(2) to
// a pipe (so lines never interleave or tear):
//
//	A <seq> <run> <goroutine> <n>   Append returned seq for payload (run, goroutine, n)
//	K <seq>                         about to acknowledge seq (printed BEFORE Ack,
//	                                so the reported acks are a superset of the real ones)
//	R                               recovered: the log is open and replayed
//	E <message>                     the child found a problem (then it exits 3)
const (
	crashEnvDir  = "ARKFLOW_WAL_CRASH_DIR"
	crashEnvMode = "ARKFLOW_WAL_CRASH_MODE"
	crashEnvRun  = "ARKFLOW_WAL_CRASH_RUN"
	crashSegment = 16 << 10
)

// crashID identifies a payload: the child cannot know the sequence before
// Append returns it, so the payload is derived from who appended it.
type crashID struct{ run, g, n uint32 }

// crashPayload is deterministic in id: 12 bytes of id, then filler from a
// generator seeded by it, 20..1519 bytes in all.
func crashPayload(id crashID) []byte {
	x := uint64(id.run)<<40 ^ uint64(id.g)<<32 ^ uint64(id.n) ^ 0x9e3779b97f4a7c15
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	n := 20 + int(next()%1500)
	b := make([]byte, 12, n)
	binary.BigEndian.PutUint32(b, id.run)
	binary.BigEndian.PutUint32(b[4:], id.g)
	binary.BigEndian.PutUint32(b[8:], id.n)
	for len(b) < n {
		b = binary.BigEndian.AppendUint64(b, next())
	}
	return b[:n]
}

// parseCrashPayload returns the id a payload claims, and whether the rest
// of it is what that id generates (an intact payload).
func parseCrashPayload(p []byte) (crashID, bool) {
	if len(p) < 12 {
		return crashID{}, false
	}
	id := crashID{binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:])}
	return id, bytes.Equal(p, crashPayload(id))
}

// TestCrashChild is the child of TestCrashLoop; it does nothing unless
// started by it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("the child process of TestCrashLoop")
	}
	run64, _ := strconv.ParseUint(os.Getenv(crashEnvRun), 10, 32)
	run := uint32(run64)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		line := fmt.Appendf(nil, format+"\n", args...)
		outMu.Lock()
		defer outMu.Unlock()
		if _, err := os.Stdout.Write(line); err != nil {
			os.Exit(4)
		}
	}
	fail := func(format string, args ...any) {
		say("E "+format, args...)
		os.Exit(3)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(run)))
	var rngMu sync.Mutex
	intn := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	l, err := OpenDir(dir, LocalOptions{
		Options:      Options{Sync: SyncMode(os.Getenv(crashEnvMode)), CursorInterval: 2 * time.Millisecond},
		SegmentBytes: crashSegment,
	})
	if err != nil {
		fail("open: %v", err)
	}
	r, err := l.Replay()
	if err != nil {
		fail("replay: %v", err)
	}
	var replayed []uint64
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail("replay: %v", err)
		}
		if _, ok := parseCrashPayload(e.Payload); !ok {
			fail("replayed entry %d has a damaged payload", e.Seq)
		}
		replayed = append(replayed, e.Seq)
	}
	r.Close()
	say("R")
	// Acknowledge most replayed entries, in random order; the rest are
	// lost deliveries, replayed again by the next run.
	go func() {
		rand.Shuffle(len(replayed), func(i, j int) { replayed[i], replayed[j] = replayed[j], replayed[i] })
		for _, seq := range replayed {
			if intn(10) < 8 {
				say("K %d", seq)
				if err := l.Ack(seq); err != nil {
					fail("ack %d: %v", seq, err)
				}
			}
		}
	}()
	ctx := context.Background()
	for g := range uint32(8) {
		go func() {
			var pending []uint64
			for n := uint32(0); ; n++ {
				seq, err := l.Append(ctx, crashPayload(crashID{run, g, n}))
				if err != nil {
					fail("append: %v", err)
				}
				say("A %d %d %d %d", seq, run, g, n)
				if intn(10) < 9 {
					pending = append(pending, seq)
				} // else never acknowledged: a lost delivery
				// Acknowledge a random pending entry, out of order.
				if len(pending) > 0 && intn(3) > 0 {
					i := intn(len(pending))
					seq := pending[i]
					pending = append(pending[:i], pending[i+1:]...)
					say("K %d", seq)
					if err := l.Ack(seq); err != nil {
						fail("ack %d: %v", seq, err)
					}
				}
			}
		}()
	}
	select {} // until killed
}

// crashHistory is what all children reported so far.
type crashHistory struct {
	returned map[uint64]crashID // seq -> payload id, for every Append that returned
	acked    map[uint64]bool    // every reported acknowledgement
	runs     int
	killedUp int // runs killed after the child reported recovery
}

// contiguousAcked is the highest n such that 1..n were all reported acked.
func (h *crashHistory) contiguousAcked() uint64 {
	var n uint64
	for h.acked[n+1] {
		n++
	}
	return n
}

// TestCrashLoop is the proof of the WAL's at-least-once contract
// (persisted before Append returns, a contiguous cursor, replay after it)
// for the local backend under
// process crashes: nothing Append returned is ever lost, the cursor never
// passes an entry that was not acknowledged, and replay returns intact
// payloads. Run with -short for 5 kills per mode instead of 20.
func TestCrashLoop(t *testing.T) {
	t.Parallel()
	if os.Getenv(crashEnvDir) != "" {
		t.Skip("in the child")
	}
	runs := 20
	if testing.Short() {
		runs = 5
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for i, mode := range []SyncMode{SyncGroupCommit, SyncAlways} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(i+1))) // one per mode: the modes run at once
			dir := t.TempDir()
			h := &crashHistory{returned: map[uint64]crashID{}, acked: map[uint64]bool{}}
			for run := range runs {
				crashRun(t, dir, mode, uint32(run+1), rng, h)
				crashCheck(t, dir, h)
			}
			if len(h.returned) == 0 || len(h.acked) == 0 || h.killedUp < runs/2 {
				t.Fatalf("too little happened to prove anything: %d appends, %d acks, %d of %d runs killed while appending",
					len(h.returned), len(h.acked), h.killedUp, runs)
			}
			t.Logf("%d runs, %d appends returned, %d acknowledged, contiguous cursor %d",
				h.runs, len(h.returned), len(h.acked), h.contiguousAcked())
		})
	}
}

// crashRun starts a child on dir, kills it at a random moment and records
// what it reported.
func crashRun(t *testing.T, dir string, mode SyncMode, run uint32, rng *rand.Rand, h *crashHistory) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		crashEnvDir+"="+dir, crashEnvMode+"="+string(mode), crashEnvRun+"="+strconv.Itoa(int(run)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var lines []string
	readDone := make(chan error, 1)
	go func() {
		br := bufio.NewReader(out)
		signalled := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				// A final fragment without its newline was never wholly
				// written; it cannot happen with pipe writes this small.
				readDone <- nil
				if !signalled {
					close(ready)
				}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			lines = append(lines, line)
			if line == "R" && !signalled {
				signalled = true
				close(ready)
			}
		}
	}()
	// Usually kill while appending; sometimes during startup and recovery.
	early := rng.IntN(5) == 0
	if !early {
		<-ready
	}
	time.Sleep(time.Duration(20+rng.IntN(281)) * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-readDone
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("run %d: the child was not killed but ended with %v\nstdout tail: %q\nstderr: %s", run, werr, tail(lines, 5), stderr.String())
	}
	h.runs++
	recovered := false
	for _, line := range lines {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "R":
			recovered = true
		case f[0] == "E":
			t.Fatalf("run %d: child: %s", run, line)
		case f[0] == "A" && len(f) == 5:
			seq := mustUint(t, f[1])
			id := crashID{uint32(mustUint(t, f[2])), uint32(mustUint(t, f[3])), uint32(mustUint(t, f[4]))}
			if prev, ok := h.returned[seq]; ok && prev != id {
				t.Fatalf("run %d: sequence %d returned for %v and earlier for %v", run, seq, id, prev)
			}
			h.returned[seq] = id
		case f[0] == "K" && len(f) == 2:
			h.acked[mustUint(t, f[1])] = true
		default:
			// Output of the test framework, if any.
		}
	}
	if recovered && !early {
		h.killedUp++
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("child line field %q: %v", s, err)
	}
	return n
}

func tail(lines []string, n int) []string { return lines[max(0, len(lines)-n):] }

// crashCheck opens a copy of dir (so that the next child recovers the
// original itself) and checks it against the history.
func crashCheck(t *testing.T, dir string, h *crashHistory) {
	t.Helper()
	cp := copyDir(t, dir)
	defer os.RemoveAll(cp)
	l, err := OpenDir(cp, LocalOptions{SegmentBytes: crashSegment})
	if err != nil {
		t.Fatalf("after run %d: reopening: %v", h.runs, err)
	}
	defer l.Close()
	cursor := l.Cursor()
	if c := h.contiguousAcked(); cursor > c {
		t.Fatalf("after run %d: cursor %d is ahead of the acknowledgements (contiguous through %d)", h.runs, cursor, c)
	}
	es := replayAll(t, l)
	replayed := map[uint64]bool{}
	for i, e := range es {
		if want := cursor + 1 + uint64(i); e.Seq != want {
			t.Fatalf("after run %d: replay yields %d where %d was expected", h.runs, e.Seq, want)
		}
		id, ok := parseCrashPayload(e.Payload)
		if !ok {
			t.Fatalf("after run %d: entry %d has a damaged payload", h.runs, e.Seq)
		}
		if want, reported := h.returned[e.Seq]; reported && want != id {
			t.Fatalf("after run %d: entry %d holds payload %v, but Append returned it for %v", h.runs, e.Seq, id, want)
		}
		replayed[e.Seq] = true
	}
	if last := l.Last(); last != cursor+uint64(len(es)) {
		t.Fatalf("after run %d: last %d, but cursor %d and %d replayed", h.runs, last, cursor, len(es))
	}
	for seq := range h.returned {
		if seq > cursor && !replayed[seq] {
			t.Fatalf("after run %d: entry %d was returned by Append but is neither covered by cursor %d nor replayed", h.runs, seq, cursor)
		}
	}
}
