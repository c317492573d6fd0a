package streambuf

// Data-driven tests (github.com/cockroachdb/datadriven): every file under
// testdata is the story of buffers driven one command at a time; each
// command's output follows its ----. Run
//
//	go test ./internal/streambuf -run TestDataDriven -rewrite
//
// to rewrite the expected outputs from the current behaviour (then review
// the diff). testdata/join needs DuckDB and runs from join_test.go.
//
// # Commands
//
//	new type=<buffer type> [inputs=a,b] [nodecode]
//	    a buffer (its config the input, as JSON) started at time 0; for a
//	    join, Options.Inputs and a decoder of JSON objects (none with
//	    nodecode). The entries and emissions are numbered from 1 again.
//	write t=<time> [input=<name>] [col=<name>] [json]
//	    one entry: a batch of one int64 column v (col names it otherwise),
//	    one value a line of the input; with json, a utf8 column __value__
//	    of one JSON object a line.
//	tick t=<time> | flush t=<time>
//	deadline           the buffer's deadline, or "none"
//	ack [n=<emission>,…] [err=<message>]
//	    releases the emissions held (all, or those numbered), with an
//	    error when err is given
//	close
//
// Times are Go durations from the start. write, tick and flush print
// each emission ("emit #n [columns]: rows", each row its cells joined by
// |), or "ok"; every command then prints the entries whose
// acknowledgement completed ("acked: #i", with the error if any).
// At the end of a story (and before a new buffer) the buffer is closed,
// whatever is still held released, and the test checks that every
// acknowledgement completed once and every batch was released.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the stories of testdata (join apart).
func TestDataDriven(t *testing.T) {
	for _, name := range []string{"memory", "tumbling_window", "session_window", "sliding_window"} {
		t.Run(name, func(t *testing.T) { runStory(t, "testdata/"+name) })
	}
}

// runStory runs one testdata file.
func runStory(t *testing.T, path string) {
	var h *harness
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd == "new" {
			if h != nil {
				h.finish()
			}
			h = newHarness(t)
		}
		if h == nil {
			t.Fatalf("%s: %s before new", td.Pos, td.Cmd)
		}
		h.t = t
		out, err := h.command(td)
		if err != nil {
			out += "error: " + err.Error() + "\n"
		}
		out += h.completions()
		if out == "" {
			return "ok\n"
		}
		return out
	})
	if h != nil {
		h.finish()
	}
}

// command runs one command and returns its output and its error.
func (h *harness) command(td *datadriven.TestData) (string, error) {
	switch td.Cmd {
	case "new":
		var typ, inputs string
		td.ScanArgs(h.t, "type", &typ)
		td.MaybeScanArgs(h.t, "inputs", &inputs)
		var opts Options
		if inputs != "" {
			opts.Inputs = strings.Split(inputs, ",")
		}
		if !td.HasArg("nodecode") {
			opts.Decode = decodeJSON
		}
		return "", h.open(typ, td.Input, opts)
	case "write":
		now, e, err := h.parseWrite(td)
		if err != nil {
			return "", err
		}
		return h.printEmissions(h.buf.Write(now, e))
	case "tick":
		return h.printEmissions(h.buf.Tick(h.at(td)))
	case "flush":
		return h.printEmissions(h.buf.Flush(h.at(td)))
	case "deadline":
		d, ok := h.buf.Deadline()
		if !ok {
			return "none\n", nil
		}
		return fmt.Sprintf("%v\n", d.Sub(epoch)), nil
	case "ack":
		return "", h.ackCommand(td)
	case "close":
		h.buf.Close()
		return "", nil
	}
	h.t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
	return "", nil
}

// at is the time of the command's t argument.
func (h *harness) at(td *datadriven.TestData) time.Time {
	var s string
	td.ScanArgs(h.t, "t", &s)
	d, err := time.ParseDuration(s)
	if err != nil {
		h.t.Fatalf("%s: t=%s: %v", td.Pos, s, err)
	}
	return epoch.Add(d)
}

func (h *harness) parseWrite(td *datadriven.TestData) (time.Time, Entry, error) {
	now := h.at(td)
	var input, col string
	td.MaybeScanArgs(h.t, "input", &input)
	td.MaybeScanArgs(h.t, "col", &col)
	var lines []string
	for _, l := range strings.Split(td.Input, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	var rec arrow.RecordBatch
	if td.HasArg("json") {
		rec = texts(h.mem, or(col, defaultValueField), lines)
	} else {
		vals := make([]int64, len(lines))
		for i, l := range lines {
			v, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				return now, Entry{}, err
			}
			vals[i] = v
		}
		rec = ints(h.mem, or(col, "v"), vals)
	}
	return now, h.entry(input, rec), nil
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// printEmissions keeps and prints what a call emitted.
func (h *harness) printEmissions(es []Emission, err error) (string, error) {
	var b strings.Builder
	for _, e := range h.keep(es) {
		fmt.Fprintf(&b, "emit #%d %s\n", e.n, render(e.Rec))
	}
	return b.String(), err
}

func (h *harness) ackCommand(td *datadriven.TestData) error {
	var ns, msg string
	td.MaybeScanArgs(h.t, "n", &ns)
	td.MaybeScanArgs(h.t, "err", &msg)
	pick := map[int]bool{}
	for _, s := range strings.Split(ns, ",") {
		if s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return err
			}
			pick[n] = true
		}
	}
	var err error
	if msg != "" {
		err = errors.New(msg)
	}
	h.release(func(e held) bool { return len(pick) == 0 || pick[e.n] }, err)
	return nil
}
