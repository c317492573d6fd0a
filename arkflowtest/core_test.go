package arkflowtest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/window"
)

// The machinery under the typed API, exercised with Arrow records.

var clickSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

type rawInput struct{ in *input }

func newRawInput(parts int) *rawInput            { return &rawInput{newInput(clickSchema, parts)} }
func (r *rawInput) InputType() string            { return inputType }
func (r *rawInput) MarshalJSON() ([]byte, error) { return r.in.MarshalJSON() }
func (r *rawInput) core() *input                 { return r.in }

// push appends "user@ts" rows as one batch.
func (r *rawInput) push(p int, rows ...string) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, clickSchema)
	defer b.Release()
	for _, row := range rows {
		var user string
		var ts int64
		i := strings.IndexByte(row, '@')
		user = row[:i]
		fmt.Sscan(row[i+1:], &ts)
		b.Field(0).(*array.StringBuilder).Append(user)
		b.Field(1).(*array.Int64Builder).Append(ts)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	r.in.after(r.in.push(p, rec))
}

type rawOutput struct {
	mu   sync.Mutex
	rows []string
}

func (o *rawOutput) OutputType() string           { return outputType }
func (o *rawOutput) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }
func (o *rawOutput) check(*arrow.Schema) error    { return nil }
func (o *rawOutput) write(rec arrow.RecordBatch) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := 0; i < int(rec.NumRows()); i++ {
		var cells []string
		for c, f := range rec.Schema().Fields() {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			cells = append(cells, rec.Column(c).ValueStr(i))
		}
		o.rows = append(o.rows, strings.Join(cells, " "))
	}
	return nil
}

func (o *rawOutput) take() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	sort.Strings(o.rows)
	s := strings.Join(o.rows, "; ")
	o.rows = nil
	return s
}

func TestCoreTumbling(t *testing.T) {
	in, out := newRawInput(1), &rawOutput{}
	b := arkflow.NewJob("j").Source("in", in, arkflow.EventTime("ts")).KeyBy("user").
		Window("w", window.Tumbling(10*time.Second).Count("n")).Sink("out", out)
	h := New(t, b)
	in.push(0, "ann@1000", "bob@2000", "ann@9999")
	if got := out.take(); got != "" {
		t.Fatalf("fired early: %s", got)
	}
	h.AdvanceWatermark(10_000)
	if got := out.take(); got != "ann 1970-01-01T00:00:00Z 1970-01-01T00:00:10Z 2; bob 1970-01-01T00:00:00Z 1970-01-01T00:00:10Z 1" {
		t.Fatalf("got %q", got)
	}
	in.push(0, "ann@500")
	if n := h.Counter("w", "late_dropped"); n != 1 {
		t.Fatalf("late_dropped %d", n)
	}
}

// A partition that has delivered nothing holds the watermark back; an
// advance of that partition alone releases it.
func TestCorePartitionHoldsWatermark(t *testing.T) {
	in, out := newRawInput(2), &rawOutput{}
	b := arkflow.NewJob("j").Source("in", in, arkflow.EventTime("ts")).KeyBy("user").
		Window("w", window.Tumbling(time.Second).Count("n")).Sink("out", out)
	New(t, b)
	in.push(0, "ann@100", "ann@5000")
	if got := out.take(); got != "" {
		t.Fatalf("fired while partition 1 holds the watermark back: %s", got)
	}
	in.in.advance(1, 2000)
	in.in.after(nil)
	if got := out.take(); got != "ann 1970-01-01T00:00:00Z 1970-01-01T00:00:01Z 1" {
		t.Fatalf("got %q", got)
	}
}

// Processing time: the fake clock's ticks fire processing-time windows.
func TestCoreProcessingTime(t *testing.T) {
	in, out := newRawInput(1), &rawOutput{}
	b := arkflow.NewJob("j").Source("in", in).KeyBy("user").
		Window("w", window.Tumbling(time.Second).Count("n")).Sink("out", out)
	h := New(t, b)
	in.push(0, "ann@0", "ann@0")
	h.AdvanceClock(500 * time.Millisecond)
	in.push(0, "ann@0")
	if got := out.take(); got != "" {
		t.Fatalf("fired early: %s", got)
	}
	h.AdvanceClock(500 * time.Millisecond)
	if got := out.take(); got != "ann 1970-01-01T00:00:00Z 1970-01-01T00:00:01Z 3" {
		t.Fatalf("got %q", got)
	}
}

// A snapshot taken while a window holds rows restores them by replay.
func TestCoreSnapshotRestore(t *testing.T) {
	mk := func() (*rawInput, *rawOutput, *arkflow.Builder) {
		in, out := newRawInput(1), &rawOutput{}
		return in, out, arkflow.NewJob("j").Source("in", in, arkflow.EventTime("ts")).KeyBy("user").
			Window("w", window.Tumbling(time.Second).Count("n")).Sink("out", out)
	}
	in, out, b := mk()
	h := New(t, b)
	in.push(0, "ann@100")
	in.push(0, "bob@1500", "ann@1200")
	if got := out.take(); got != "ann 1970-01-01T00:00:00Z 1970-01-01T00:00:01Z 1" {
		t.Fatalf("got %q", got)
	}
	snap := h.Snapshot()
	in.push(0, "ann@1300") // after the snapshot: only the same builder's input has it
	h.Stop()

	// A new version of the job, with new inputs and outputs.
	in2, out2, b2 := mk()
	h2 := Restore(t, b2, snap)
	in2.push(0, "ann@1400")
	h2.AdvanceWatermark(2000)
	if got := out2.take(); got != "ann 1970-01-01T00:00:01Z 1970-01-01T00:00:02Z 2; bob 1970-01-01T00:00:01Z 1970-01-01T00:00:02Z 1" {
		t.Fatalf("restored: got %q", got)
	}

	// The same builder again, after its harness stopped.
	h2.Stop()
	h3 := Restore(t, b, snap)
	h3.AdvanceWatermark(2000)
	if got := out.take(); got != "ann 1970-01-01T00:00:01Z 1970-01-01T00:00:02Z 2; bob 1970-01-01T00:00:01Z 1970-01-01T00:00:02Z 1" {
		t.Fatalf("restored into the same builder: got %q", got)
	}
}
