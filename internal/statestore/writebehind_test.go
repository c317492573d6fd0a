package statestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// wbScope is the scope of writeBehindFixture's entries.
var wbScope = Scope{Job: "j", Operator: "w", Groups: AllKeyGroups}

// writeBehindFixture is a memory store of ~18 MiB of entries with values
// of random sizes (so that records cross the restore's 4 MiB chunks, and
// the boundary between the written file and the tail), and its snapshot.
func writeBehindFixture(t testing.TB) (now int64, src Backend, data []byte) {
	t.Helper()
	now = 1_700_000_000_000 // fixed: a killed child makes the same bytes
	src = NewMemory()
	r := rand.New(rand.NewPCG(7, 7))
	block := make([]byte, 8192)
	for j := range block {
		block[j] = byte('a' + r.IntN(26))
	}
	var muts []Mutation
	for i := range 9000 {
		off := r.IntN(4096)
		v := block[off : off+1000+r.IntN(3000)]
		muts = append(muts, Mutation{Key: Key{Job: "j", Operator: "w", Namespace: "ns", KeyGroup: i % 128, User: fmt.Appendf(nil, "key-%05d", i)}, Value: v})
	}
	kvApply(t, src, muts...)
	data, _ = snapTake(t, src, wbScope, now)
	if len(data) < 4*layerChunk {
		t.Fatalf("fixture of %d bytes: too small for a tail of several chunks", len(data))
	}
	return now, src, data
}

// setBeforeLayerWrite installs the write-behind's test hook for the
// test's duration. The hook is package-level and every layer write calls
// it, so a test that sets it is not parallel (a child process may: it runs
// only its own test).
func setBeforeLayerWrite(t *testing.T, fn func(off int64) error) {
	t.Helper()
	testBeforeLayerWrite = fn
	t.Cleanup(func() { testBeforeLayerWrite = nil })
}

// listedLayers returns the layers LAYERS lists (none when it does not
// exist).
func listedLayers(t testing.TB, dir string) []layerMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, layersDirName, layersFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var f layersFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Layers
}

// checkRestored reads every entry of the fixture back through Get, Scan
// and Snapshot.
func checkRestored(t *testing.T, when string, b, src Backend, now int64, data []byte) {
	t.Helper()
	want := kvScan(t, src, wbScope, now)
	got := kvScan(t, b, wbScope, now)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: scan differs from the source (%d entries, want %d)", when, len(got), len(want))
	}
	for i, e := range want {
		if i%5 != 0 && i != len(want)-1 {
			continue // a sample: the scan above read them all
		}
		v, _, ok := kvGet(t, b, Key{Job: e.Job, Operator: e.Op, Namespace: e.NS, KeyGroup: e.Group, User: []byte(e.User)}, now)
		if !ok || v != e.Value {
			t.Fatalf("%s: get %s: %d bytes, found %v", when, e.User, len(v), ok)
		}
	}
	if snap, _ := snapTake(t, b, wbScope, now); !bytes.Equal(snap, data) {
		t.Fatalf("%s: the snapshot differs from the restored one", when)
	}
}

// RestoreLayers returns before the layer's file is written: the chunks
// not yet written are the layer's tail, and every read (records inside a
// chunk, across chunks, across the written part and the tail) returns
// the snapshot's entries. LAYERS lists the layer only once its file is
// written; then the tail is gone and the file holds the snapshot's
// bytes, which a reopen reads.
func TestLayerWriteBehind(t *testing.T) {
	now, src, data := writeBehindFixture(t)
	release := make(chan struct{})
	setBeforeLayerWrite(t, func(off int64) error {
		if off >= layerChunk {
			select {
			case <-release:
			case <-time.After(30 * time.Second): // a deadlock guard
			}
		}
		return nil
	})
	dir := t.TempDir()
	st := openDir(t, dir)
	b := st.(*badgerBackend)
	if _, err := b.RestoreLayers([]RestoreSource{bytesSource(wbScope, data, objectCRC64(data))}, now, nil); err != nil {
		t.Fatal(err)
	}
	ls := b.currentLayers()
	if len(ls) != 1 {
		t.Fatalf("%d layers", len(ls))
	}
	l := ls[0]
	// The first chunk's write is not held, but it may still be running
	// when the restore returns on a busy machine: wait for it.
	var tail *layerTail
	polltest.Eventually(t, "the first chunk written", func() bool {
		tail = l.tail.Load()
		return tail == nil || tail.off >= layerChunk
	}, func() string { return fmt.Sprintf("tail at %d", tail.off) })
	if tail == nil || tail.off != layerChunk || len(tail.chunks) != (len(data)-1)/layerChunk {
		t.Fatalf("tail %+v, want the chunks after the first of %d bytes", tail, len(data))
	}
	if got := listedLayers(t, dir); len(got) != 0 {
		t.Fatalf("LAYERS lists %+v before the file is written", got)
	}
	checkRestored(t, "with the tail", st, src, now, data)

	close(release)
	b.behind.Wait()
	if l.tail.Load() != nil || l.writing.Load() {
		t.Fatal("the tail is still there after the write")
	}
	if got := listedLayers(t, dir); len(got) != 1 || got[0].Size != int64(len(data)) {
		t.Fatalf("LAYERS lists %+v after the write", got)
	}
	file, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, data) {
		t.Fatalf("the layer file (%d bytes) is not the snapshot (%d bytes)", len(file), len(data))
	}
	checkRestored(t, "from the file", st, src, now, data)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openDir(t, dir)
	defer st.Close()
	checkRestored(t, "after reopening", st, src, now, data)
}

// Close waits for a layer written behind, which the next open then
// lists.
func TestLayerWriteBehindClose(t *testing.T) {
	now, src, data := writeBehindFixture(t)
	var held bool
	setBeforeLayerWrite(t, func(off int64) error {
		if off == 2*layerChunk {
			time.Sleep(100 * time.Millisecond) // still writing when Close starts
			held = true
		}
		return nil
	})
	dir := t.TempDir()
	st := openDir(t, dir)
	if _, err := st.(LayerRestorer).RestoreLayers([]RestoreSource{bytesSource(wbScope, data, objectCRC64(data))}, now, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("the hook did not run")
	}
	st = openDir(t, dir)
	defer st.Close()
	if ls, _ := LayerStatsOf(st); ls.Layers != 1 {
		t.Fatalf("%d layers after reopening", ls.Layers)
	}
	checkRestored(t, "after reopening", st, src, now, data)
}

// A write that fails after RestoreLayers returned keeps the tail (reads
// stay right), fails Close with the disk's error, and the next open drops
// the layer and its file. One that fails during the download fails the
// restore with that error, not as a corrupt snapshot, and leaves nothing.
func TestLayerWriteBehindFailure(t *testing.T) {
	now, src, data := writeBehindFixture(t)
	t.Run("after the restore", func(t *testing.T) {
		release := make(chan struct{})
		setBeforeLayerWrite(t, func(off int64) error {
			if off < 2*layerChunk {
				return nil
			}
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
			return errors.New("injected: no space left on device")
		})
		dir := t.TempDir()
		st := openDir(t, dir)
		b := st.(*badgerBackend)
		if _, err := b.RestoreLayers([]RestoreSource{bytesSource(wbScope, data, objectCRC64(data))}, now, nil); err != nil {
			t.Fatal(err)
		}
		close(release)
		b.behind.Wait()
		if b.currentLayers()[0].tail.Load() == nil {
			t.Fatal("the tail was dropped after a failed write")
		}
		checkRestored(t, "after the failed write", st, src, now, data)
		if got := listedLayers(t, dir); len(got) != 0 {
			t.Fatalf("LAYERS lists %+v", got)
		}
		err := st.Close()
		if err == nil || !strings.Contains(err.Error(), "writing restored layer") || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("Close: %v", err)
		}
		st = openDir(t, dir)
		defer st.Close()
		if got := kvScan(t, st, wbScope, now); len(got) != 0 {
			t.Fatalf("%d entries of a layer never written", len(got))
		}
		if files := layerFiles(t, dir); len(files) != 0 && !(len(files) == 1 && files[0] == layersFileName) {
			t.Fatalf("files left: %v", files)
		}
	})
	t.Run("during the download", func(t *testing.T) {
		failed := make(chan struct{})
		setBeforeLayerWrite(t, func(off int64) error {
			if off == layerChunk {
				close(failed)
				return errors.New("injected: input/output error")
			}
			return nil
		})
		dir := t.TempDir()
		st := openDir(t, dir)
		defer st.Close()
		// The download goes on, a byte per read, once the write has
		// failed: the failure must stop it.
		s := RestoreSource{Scope: wbScope, Checksum: objectCRC64(data), Open: func() (io.ReadCloser, error) {
			return io.NopCloser(&slowAfter{data: data, at: 2 * layerChunk, wait: failed}), nil
		}}
		_, err := st.(LayerRestorer).RestoreLayers([]RestoreSource{s}, now, nil)
		if err == nil || !strings.Contains(err.Error(), "input/output error") || errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("restore: %v", err)
		}
		if files := layerFiles(t, dir); len(files) != 0 && !(len(files) == 1 && files[0] == layersFileName) {
			t.Fatalf("files left: %v", files)
		}
		if got := kvScan(t, st, wbScope, now); len(got) != 0 {
			t.Fatalf("%d entries after a failed restore", len(got))
		}
	})
}

// slowAfter reads data; from at on it waits for wait, then returns a
// byte per Read.
type slowAfter struct {
	data []byte
	off  int
	at   int
	wait chan struct{}
}

func (r *slowAfter) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	if r.off >= r.at {
		<-r.wait
		p = p[:1]
	} else if len(p) > r.at-r.off {
		p = p[:r.at-r.off]
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

// A process SIGKILLed while its restored layers are being written leaves
// a directory that opens: LAYERS lists a layer only with its file whole
// (its entries all read back), or not at all (its file removed). The
// first kill comes while the write is held in the tail, the others at
// random moments after the restore returned.
func TestLayerWriteBehindKill(t *testing.T) {
	if dir := os.Getenv("ARKFLOW_STATE_WB_CHILD"); dir != "" {
		now, _, data := writeBehindFixture(t)
		if os.Getenv("ARKFLOW_STATE_WB_HOLD") != "" {
			setBeforeLayerWrite(t, func(off int64) error {
				if off >= 2*layerChunk {
					select {}
				}
				return nil
			})
		}
		st, err := Open(Options{Dir: dir})
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		if _, err := st.(LayerRestorer).RestoreLayers([]RestoreSource{bytesSource(wbScope, data, objectCRC64(data))}, now, nil); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println("restored")
		select {} // killed
	}
	t.Parallel()
	now, src, data := writeBehindFixture(t)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	listed := 0
	const kills = 6
	for i := range kills {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestLayerWriteBehindKill$")
		cmd.Env = append(os.Environ(), "ARKFLOW_STATE_WB_CHILD="+dir)
		if i == 0 {
			cmd.Env = append(cmd.Env, "ARKFLOW_STATE_WB_HOLD=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "restored" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child %d: %q", i, line)
		}
		if i > 0 {
			time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		st, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("kill %d: open: %v", i, err)
		}
		switch n := len(listedLayers(t, dir)); n {
		case 0:
			if got := kvScan(t, st, wbScope, now); len(got) != 0 {
				t.Fatalf("kill %d: %d entries without a listed layer", i, len(got))
			}
			if files := layerFiles(t, dir); len(files) > 1 || (len(files) == 1 && files[0] != layersFileName) {
				t.Fatalf("kill %d: files left: %v", i, files)
			}
		case 1:
			if i == 0 {
				t.Fatal("LAYERS lists a layer whose write was held")
			}
			listed++
			checkRestored(t, fmt.Sprintf("kill %d", i), st, src, now, data)
		default:
			t.Fatalf("kill %d: %d layers listed", i, n)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills: %d left the layer listed and whole, %d left none", kills, listed, kills-listed)
}
