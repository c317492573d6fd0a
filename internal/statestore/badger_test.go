package statestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dgraph-io/badger/v4"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dirDigest is the sorted file list of a directory tree and a SHA-256 of
// every file's bytes.
func dirDigest(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			lines = append(lines, rel+"/")
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(data)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// badgerFill writes n small entries and a few large ones (value log) to a
// new directory and closes it.
func badgerFill(t testing.TB, dir string, n int) {
	t.Helper()
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var muts []Mutation
	for i := range n {
		v := fmt.Sprintf("value-%d", i)
		if i%100 == 0 {
			v = strings.Repeat("L", 4000)
		}
		muts = append(muts, kvPut(Key{Job: "j", Operator: "o", KeyGroup: i % 128, User: fmt.Appendf(nil, "%06d", i)}, v, 0))
	}
	kvApply(t, b, muts...)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func badgerCount(t testing.TB, b Backend) int {
	n := 0
	if err := b.Scan(Scope{Job: "j", Groups: AllKeyGroups}, kvNow(), func(Entry) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBadgerFormatFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, dir := range []string{filepath.Join(root, "new", "nested"), t.TempDir()} {
		b, err := Open(Options{Dir: dir, FormatVersion: 3})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		data, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f["format_version"] != 3.0 || f["store"] != "badger" || f["created_by"] != "arkflow-go" || len(f) != 3 {
			t.Fatalf("FORMAT %s", data)
		}
		if _, err := os.Stat(filepath.Join(dir, "FORMAT.tmp")); !os.IsNotExist(err) {
			t.Fatal("temp file left")
		}
		b, err = Open(Options{Dir: dir, FormatVersion: 3})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("badger without a directory accepted")
	}
}

// A directory of another format version, or not a state directory, is
// refused with every byte and file left as it was.
func TestBadgerRefusesForeignDirectories(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	badgerFill(t, stateDir, 500)

	notState := t.TempDir()
	os.WriteFile(filepath.Join(notState, "notes.txt"), []byte("hello"), 0o644)
	os.Mkdir(filepath.Join(notState, "sub"), 0o755)

	garbled := t.TempDir()
	os.WriteFile(filepath.Join(garbled, "FORMAT"), []byte("{not json"), 0o644)
	os.WriteFile(filepath.Join(garbled, "MANIFEST"), []byte("x"), 0o644)

	otherStore := t.TempDir()
	os.WriteFile(filepath.Join(otherStore, "FORMAT"), []byte(`{"format_version":1,"store":"pebble","created_by":"arkflow-go"}`), 0o644)

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)

	for _, c := range []struct {
		name, dir string
		version   int
		want      error
		mentions  []string
	}{
		{"format version 2", stateDir, 2, ErrFormat, []string{stateDir, "version 1", "version 2"}},
		{"format version 7", stateDir, 7, ErrFormat, []string{stateDir, "version 1", "version 7"}},
		{"not a state dir", notState, 1, ErrNotState, []string{notState, "FORMAT"}},
		{"garbled FORMAT", garbled, 1, ErrNotState, []string{garbled}},
		{"other store", otherStore, 1, ErrNotState, []string{"pebble"}},
		{"a file", file, 1, ErrNotState, []string{file}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := dirDigest(t, c.dir)
			b, err := Open(Options{Dir: c.dir, FormatVersion: c.version})
			if err == nil {
				b.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			for _, m := range c.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if after := dirDigest(t, c.dir); after != before {
				t.Fatalf("directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	// The right version still opens, with its data.
	b, err := Open(Options{Dir: stateDir, FormatVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := badgerCount(t, b); n != 500 {
		t.Fatalf("%d entries", n)
	}
}

func badgerFiles(t testing.TB, dir, suffix string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s file in %s", suffix, dir)
	}
	return out
}

func flipByte(t testing.TB, path string, at func(size int) int) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at(len(data))] ^= 0x55
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncateFile(t testing.TB, path string, by int) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-int64(by)); err != nil {
		t.Fatal(err)
	}
}

// A damaged directory is an error from Open, never a silently smaller or
// empty state: after a clean close (SEAL) and after a crash (no SEAL).
func TestBadgerCorruptDirectory(t *testing.T) {
	t.Parallel()
	const n = 3000
	sealed := map[string]func(t *testing.T, dir string){
		"truncated MANIFEST":  func(t *testing.T, dir string) { truncateFile(t, filepath.Join(dir, "MANIFEST"), 5) },
		"MANIFEST missing":    func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "MANIFEST")) },
		"KEYREGISTRY missing": func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "KEYREGISTRY")) },
		"sst byte flipped": func(t *testing.T, dir string) {
			flipByte(t, badgerFiles(t, dir, ".sst")[0], func(s int) int { return s / 3 })
		},
		"sst index flipped": func(t *testing.T, dir string) {
			flipByte(t, badgerFiles(t, dir, ".sst")[0], func(s int) int { return s - 20 })
		},
		"sst truncated": func(t *testing.T, dir string) { truncateFile(t, badgerFiles(t, dir, ".sst")[0], 100) },
		"sst missing":   func(t *testing.T, dir string) { os.Remove(badgerFiles(t, dir, ".sst")[0]) },
		"vlog byte flipped": func(t *testing.T, dir string) {
			flipByte(t, badgerFiles(t, dir, ".vlog")[0], func(s int) int { return s / 2 })
		},
		"vlog truncated":   func(t *testing.T, dir string) { truncateFile(t, badgerFiles(t, dir, ".vlog")[0], 10) },
		"vlog missing":     func(t *testing.T, dir string) { os.Remove(badgerFiles(t, dir, ".vlog")[0]) },
		"unexpected table": func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "000099.sst"), []byte("x"), 0o644) },
		"SEAL garbled":     func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "SEAL"), []byte(`{"files":[`), 0o644) },
		"everything but FORMAT": func(t *testing.T, dir string) {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "FORMAT" && e.Name() != "SEAL" {
					os.Remove(filepath.Join(dir, e.Name()))
				}
			}
		},
	}
	crashed := map[string]func(t *testing.T, dir string){
		"truncated MANIFEST": func(t *testing.T, dir string) { truncateFile(t, filepath.Join(dir, "MANIFEST"), 5) },
		"MANIFEST missing":   func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "MANIFEST")) },
		"sst missing":        func(t *testing.T, dir string) { os.Remove(badgerFiles(t, dir, ".sst")[0]) },
		"sst truncated":      func(t *testing.T, dir string) { truncateFile(t, badgerFiles(t, dir, ".sst")[0], 100) },
		"sst byte flipped": func(t *testing.T, dir string) {
			flipByte(t, badgerFiles(t, dir, ".sst")[0], func(s int) int { return s / 3 })
		},
		"sst index flipped": func(t *testing.T, dir string) {
			flipByte(t, badgerFiles(t, dir, ".sst")[0], func(s int) int { return s - 20 })
		},
	}
	run := func(t *testing.T, name string, removeSeal bool, damage func(t *testing.T, dir string)) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			badgerFill(t, dir, n)
			if removeSeal {
				os.Remove(filepath.Join(dir, "SEAL"))
			}
			damage(t, dir)
			b, err := Open(Options{Dir: dir})
			if err == nil {
				got := badgerCount(t, b)
				b.Close()
				t.Fatalf("opened a damaged directory (%d of %d entries visible)", got, n)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error does not wrap ErrCorrupt: %v", err)
			}
			t.Logf("%.200s", err)
		})
	}
	t.Run("sealed", func(t *testing.T) {
		for name, damage := range sealed {
			run(t, name, false, damage)
		}
	})
	t.Run("crashed", func(t *testing.T) {
		for name, damage := range crashed {
			run(t, name, true, damage)
		}
	})
	// Undamaged, both open with every entry.
	for _, removeSeal := range []bool{false, true} {
		dir := t.TempDir()
		badgerFill(t, dir, n)
		if removeSeal {
			os.Remove(filepath.Join(dir, "SEAL"))
		}
		b, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if got := badgerCount(t, b); got != n {
			t.Fatalf("%d entries", got)
		}
		if s, _ := BadgerStatsOf(b); s.Sealed == removeSeal {
			t.Fatalf("stats %+v with seal removed %v", s, removeSeal)
		}
		b.Close()
	}
}

// A process that dies without Close leaves an unsealed directory that
// opens with Badger's recovery, its writes intact.
func TestBadgerReopenAfterCrash(t *testing.T) {
	if dir := os.Getenv("ARKFLOW_STATE_CRASH_DIR"); dir != "" {
		b, err := Open(Options{Dir: dir})
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		var muts []Mutation
		for i := range 1000 {
			muts = append(muts, kvPut(Key{Job: "j", Operator: "o", KeyGroup: i % 128, User: fmt.Appendf(nil, "%d", i)}, "v", 0))
		}
		if err := b.Apply(muts); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		os.Exit(0) // no Close
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadgerReopenAfterCrash$")
	cmd.Env = append(os.Environ(), "ARKFLOW_STATE_CRASH_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "SEAL")); !os.IsNotExist(err) {
		t.Fatal("a crashed store is sealed")
	}
	var logs bytes.Buffer
	b, err := Open(Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if s, _ := BadgerStatsOf(b); s.Sealed {
		t.Fatal("stats say sealed")
	}
	if got := badgerCount(t, b); got != 1000 {
		t.Fatalf("%d entries after the crash", got)
	}
	if !strings.Contains(logs.String(), "component=badger") || !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatalf("no badger logs at debug level:\n%.500s", logs.String())
	}
}

// A second Open of a directory in use fails (Badger's directory lock)
// and does not disturb the first.
func TestBadgerDirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	kvApply(t, b, kvPut(Key{Job: "j", Operator: "o", User: []byte("k")}, "v", 0))
	if b2, err := Open(Options{Dir: dir}); err == nil {
		b2.Close()
		t.Fatal("opened twice")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	if got := badgerCount(t, b); got != 1 {
		t.Fatalf("%d entries", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := badgerCount(t, b); got != 1 {
		t.Fatalf("%d entries after reopen", got)
	}
}

// The value-log GC goroutine runs and stops with Close. Not parallel: it
// shortens the package-level vlogGCInterval, which every Open reads.
func TestBadgerValueLogGC(t *testing.T) {
	old := vlogGCInterval
	vlogGCInterval = 5 * time.Millisecond
	defer func() { vlogGCInterval = old }()
	b, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 8000)
	for round := range 5 {
		var muts []Mutation
		for i := range 200 {
			muts = append(muts, kvPut(Key{Job: "j", Operator: "o", User: fmt.Appendf(nil, "%d", i)}, big+fmt.Sprint(round), 0))
		}
		kvApply(t, b, muts...)
		time.Sleep(10 * time.Millisecond)
	}
	if got := badgerCount(t, b); got != 200 {
		t.Fatalf("%d entries", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// A process killed while Badger creates a value log file (at every open,
// and when a log fills) can leave it empty: created, not yet sized or
// given its header. Badger then refuses the directory ("Open existing
// file: …vlog: Create a new file"). The Kafka SIGKILL proof hit this on a
// restart. Such a file holds nothing, so opening removes it.
func TestBadgerReopenAfterCrashInVlogCreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadgerReopenAfterCrash$")
	cmd.Env = append(os.Environ(), "ARKFLOW_STATE_CRASH_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	maxFid := 0
	for _, e := range ents {
		var fid int
		if _, err := fmt.Sscanf(e.Name(), "%06d.vlog", &fid); err == nil && fid > maxFid {
			maxFid = fid
		}
	}
	if maxFid == 0 {
		t.Fatalf("no value log in %v", ents)
	}
	unborn := filepath.Join(dir, fmt.Sprintf("%06d.vlog", maxFid+1))
	if err := os.WriteFile(unborn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("open after a crash in value log creation: %v", err)
	}
	defer b.Close()
	if got := badgerCount(t, b); got != 1000 {
		t.Fatalf("%d entries after the crash", got)
	}
}

// The runtime's carry file lives in the state directory beside Badger's
// files: a sealed directory with it (written after the seal) still opens,
// and so does an unsealed one.
func TestCarryFileIsNotBadgers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		st, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := st.Apply([]Mutation{{Key: Key{Job: "j", Operator: "o", User: []byte("k")}, Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// Written while the store is open: the seal lists it not.
			if err := WriteCarry(dir, []byte(`{"checkpoint":"1 r"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := WriteCarry(dir, []byte(`{"checkpoint":"1 r"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("a state directory holding %s: %v", CarryFileName, err)
	}
	if v, _, ok, err := st.Get(Key{Job: "j", Operator: "o", User: []byte("k")}, 0); err != nil || !ok || string(v) != "v" {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	st.Close()
}

// A process killed between creating a memtable file and extending it
// leaves an empty .mem file, on which Badger's own Open fails
// (dgraph-io/badger#2207; seen here in SIGKILL loops). The store opens
// anyway, its data intact, and the empty file is gone.
func TestBadgerOpensOverAnEmptyMemtable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badgerFill(t, dir, 500)
	// A killed process leaves no SEAL (see TestBadgerReopenAfterCrash).
	if err := os.Remove(filepath.Join(dir, "SEAL")); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "00099.mem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil)); err == nil {
		db.Close()
		t.Fatal("Badger opened over an empty memtable: the workaround is no longer needed (or the test no longer reproduces it)")
	} else if err := os.WriteFile(empty, nil, 0o644); err != nil { // Badger's failed open may have touched it
		t.Fatal(err)
	}
	b, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("opening over an empty memtable: %v", err)
	}
	defer b.Close()
	if got := badgerCount(t, b); got != 500 {
		t.Fatalf("%d entries after the reopen, want 500", got)
	}
	if fi, err := os.Stat(empty); err == nil && fi.Size() == 0 {
		t.Fatal("the empty memtable file is still there")
	}
}
