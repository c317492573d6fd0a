package walog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in internal/walog/testdata/recovery against a log in
// a local directory (go test ./internal/walog -run TestDataDriven -rewrite rewrites
// the expected outputs). Commands:
//
//	reset                     close the log, if open, and start over in an empty directory
//	open [segment-bytes=<n>] [hold]
//	                          OpenDir; prints last and cursor, or the error
//	append <payload>...       one Append per payload; prints the sequences
//	ack <seq>...              one Ack per sequence; prints the cursor
//	flush                     Flush: entries durable, cursor persisted
//	close                     Close
//	crash                     the process dies now: later commands see a copy
//	                          of the directory as it is (every write reached
//	                          the page cache; nothing was closed or flushed)
//	truncate-tail <n>         cut the last n bytes of the newest segment (a
//	                          torn write), with the log closed or crashed
//	replay                    Replay: the entries after the persisted cursor
//	replay-from <seq>         ReplayFrom(seq)
//	files                     the directory's files and sizes, without LOCK
//
// The cursor is persisted only by flush and close (a CursorInterval of an
// hour keeps the background persister out of the scripts), so what a crash
// leaves is deterministic.
func TestDataDriven(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &ddEnv{}
		defer e.closeLog(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.run(t, d)
		})
	})
}

// ddEnv is a script's state: its directory and the open log, if any.
type ddEnv struct {
	dir string
	l   *Log
}

func (e *ddEnv) closeLog(t *testing.T) {
	if e.l != nil {
		if err := e.l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		e.l = nil
	}
}

// seqArgs reads the directive's arguments as sequences.
func seqArgs(t *testing.T, d *datadriven.TestData) []uint64 {
	var seqs []uint64
	for _, a := range d.CmdArgs {
		n, err := strconv.ParseUint(a.Key, 10, 64)
		if err != nil || len(a.Vals) != 0 {
			d.Fatalf(t, "%s: want a sequence number", a)
		}
		seqs = append(seqs, n)
	}
	if len(seqs) == 0 {
		d.Fatalf(t, "%s: no sequence", d.Cmd)
	}
	return seqs
}

func (e *ddEnv) needLog(t *testing.T, d *datadriven.TestData) *Log {
	if e.l == nil {
		d.Fatalf(t, "%s: the log is not open", d.Cmd)
	}
	return e.l
}

func (e *ddEnv) needClosed(t *testing.T, d *datadriven.TestData) {
	if e.l != nil {
		d.Fatalf(t, "%s: close or crash the log first", d.Cmd)
	}
	if e.dir == "" {
		d.Fatalf(t, "%s: no directory (reset first)", d.Cmd)
	}
}

// errLine renders an error without the test's temporary directory.
func (e *ddEnv) errLine(err error) string {
	return "error: " + strings.ReplaceAll(err.Error(), e.dir, "<dir>")
}

func (e *ddEnv) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "reset":
		e.closeLog(t)
		e.dir = t.TempDir()
		return "ok"

	case "open":
		e.needClosed(t, d)
		opts := LocalOptions{Options: Options{CursorInterval: time.Hour}}
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "segment-bytes":
				var n int64
				a.Scan(t, 0, &n)
				opts.SegmentBytes = n
			case "hold":
				opts.Hold = true
			default:
				d.Fatalf(t, "open: unknown argument %s", a)
			}
		}
		l, err := OpenDir(e.dir, opts)
		if err != nil {
			return e.errLine(err)
		}
		e.l = l
		return fmt.Sprintf("last=%d cursor=%d", l.Last(), l.Cursor())

	case "append":
		l := e.needLog(t, d)
		var seqs []string
		for _, a := range d.CmdArgs {
			seq, err := l.Append(context.Background(), []byte(a.Key))
			if err != nil {
				return e.errLine(err)
			}
			seqs = append(seqs, fmt.Sprintf("%s=%d", a.Key, seq))
		}
		return strings.Join(seqs, " ")

	case "ack":
		l := e.needLog(t, d)
		for _, seq := range seqArgs(t, d) {
			if err := l.Ack(seq); err != nil {
				return e.errLine(err)
			}
		}
		return fmt.Sprintf("cursor=%d", l.Cursor())

	case "flush":
		if err := e.needLog(t, d).Flush(); err != nil {
			return e.errLine(err)
		}
		return "ok"

	case "close":
		err := e.needLog(t, d).Close()
		e.l = nil
		if err != nil {
			return e.errLine(err)
		}
		return "ok"

	case "crash":
		e.needLog(t, d)
		crashed := copyDir(t, e.dir)
		// The old directory is left behind with the log that "died"; the
		// copy is what the next process finds.
		e.closeLog(t)
		e.dir = crashed
		return "ok"

	case "truncate-tail":
		e.needClosed(t, d)
		n := seqArgs(t, d)[0]
		segs := segmentFiles(t, e.dir)
		if len(segs) == 0 {
			d.Fatalf(t, "truncate-tail: no segment")
		}
		path := filepath.Join(e.dir, segName(segs[len(segs)-1]))
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		size := fi.Size() - int64(n)
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s: %d -> %d bytes", filepath.Base(path), fi.Size(), size)

	case "replay", "replay-from":
		l := e.needLog(t, d)
		var r *Replayer
		var err error
		if d.Cmd == "replay" {
			r, err = l.Replay()
		} else {
			r, err = l.ReplayFrom(seqArgs(t, d)[0])
		}
		if err != nil {
			return e.errLine(err)
		}
		defer r.Close()
		var b strings.Builder
		for {
			ent, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.WriteString(e.errLine(err) + "\n")
				break
			}
			fmt.Fprintf(&b, "%d %s\n", ent.Seq, ent.Payload)
		}
		if b.Len() == 0 {
			return "<none>"
		}
		return b.String()

	case "files":
		files := dirFiles(t, e.dir)
		names := slices.Sorted(func(yield func(string) bool) {
			for name := range files {
				if name != lockName && !yield(name) {
					return
				}
			}
		})
		var b strings.Builder
		for _, name := range names {
			fmt.Fprintf(&b, "%s %d\n", name, len(files[name]))
		}
		if b.Len() == 0 {
			return "<none>"
		}
		return b.String()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}
