package windowop

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// The first drop warns at once; later ones at most every
// warnInterval ms of the clock given, each warning with the count since
// the previous one; flush reports what is left.
func TestDropWarnerRateLimit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	spec := &job.Spec{Operators: []job.Operator{{ID: "in", Kind: job.KindSource}, {ID: "w", Kind: job.KindWindow}},
		Edges: []job.Edge{{ID: "e", From: "in", To: "w"}},
		Sources: []job.Source{{OperatorID: "in", Time: &job.Time{Mode: job.EventTime, TimestampField: "ts",
			Watermark: &job.Watermark{Strategy: job.BoundedOutOfOrderness}}}}}
	d := newDropWarner(spec, "w")
	var lines []string
	take := func() []string {
		out := strings.Split(strings.TrimSpace(buf.String()), "\n")
		buf.Reset()
		if out[0] == "" {
			return nil
		}
		lines = append(lines, out...)
		return out
	}
	d.dropped(log, 1000, 0, 0) // nothing dropped: nothing said
	if got := take(); got != nil {
		t.Fatalf("warned about no drops: %v", got)
	}
	d.dropped(log, 1000, 1, 0)
	if got := take(); len(got) != 1 || !strings.Contains(got[0], "dropped=1 ") {
		t.Fatalf("first drop: %v", got)
	}
	d.dropped(log, 1000, 2, 0)
	d.dropped(log, 1000+warnInterval-1, 3, 1)
	if got := take(); got != nil {
		t.Fatalf("warned within the interval: %v", got)
	}
	d.dropped(log, 1000+warnInterval, 4, 0)
	got := take()
	if len(got) != 2 || !strings.Contains(got[0], "dropped=9 ") || !strings.Contains(got[1], "without an event time") || !strings.Contains(got[1], "dropped=1 ") {
		t.Fatalf("after the interval: %v", got)
	}
	d.dropped(log, 1000+warnInterval+1, 5, 0)
	d.flush(log)
	if got := take(); len(got) != 1 || !strings.Contains(got[0], "dropped=5 ") {
		t.Fatalf("flush: %v", got)
	}
	d.flush(log)
	if got := take(); got != nil {
		t.Fatalf("a second flush warned again: %v", got)
	}
	want := `level=WARN msg="window dropped late rows (event time behind the watermark; counted in its late_dropped metric)" source=in dropped=1 fix="raise sources[0].time.watermark.out_of_orderness_ms (0) above the event-time span of a batch and the disorder of the input (arkflow.EventTime{OutOfOrderness: d} in Go); or set sources[0].time.watermark.advance to per_row so that in-order rows are never late whatever the batching (arkflow.EventTime{PerRow: true} in Go); or route late rows to a sink: sources[0].time.late_event_policy route (arkflow.EventTime{RouteLate: id} and .LateSink(id, ...) in Go)"`
	if lines[0] != want {
		t.Errorf("warning:\n got %s\nwant %s", lines[0], want)
	}
	if !strings.Contains(lines[2], `fix="give every row its event time \"ts\", or route rows without one to a sink: sources[0].time.late_event_policy route (arkflow.EventTime{RouteLate: id} and .LateSink(id, ...) in Go)"`) {
		t.Errorf("null warning: %s", lines[2])
	}
	// A nil warner (an operator built without one) ignores everything.
	var none *dropWarner
	none.dropped(log, 0, 1, 1)
	none.flush(log)
}
