package windowop

import (
	"encoding/json"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The runtime reaches the floor only through the Built: it keeps state,
// is driven by the watermark, and carries its floor as an ops.Carrier
// whose key and encoding are the floor's.
func TestBuildCarriesTheFloor(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(Tumbling(1e9, job.Count("n")))
	if err != nil {
		t.Fatal(err)
	}
	spec := &job.Spec{ID: "j",
		Operators: []job.Operator{{ID: "in", Kind: job.KindSource}, {ID: "w", Kind: job.KindWindow, KeyField: "k", Config: raw}},
		Edges:     []job.Edge{{ID: "in-w", From: "in", To: "w", Partitioned: true}},
		Sources:   []job.Source{{OperatorID: "in", InputType: "memory"}},
	}
	built, err := Build(ops.Context{JobID: "j", Spec: spec, Op: &spec.Operators[1], Input: inputSchema, Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	if !built.State || !built.Timed || built.Carry == nil {
		t.Fatalf("Built: State %v Timed %v Carry %v; want state, timed and a carrier", built.State, built.Timed, built.Carry)
	}
	c := built.Carry
	if got, want := c.MarkKey("ns", "w", 64), FloorKey("ns", "w", 64); got.Namespace != want.Namespace || string(got.User) != string(want.User) || got.KeyGroup != 64 || got.Operator != "w" || got.Job != "ns" {
		t.Fatalf("MarkKey = %+v, want the floor key %+v", got, want)
	}
	for _, wm := range []int64{-5, 0, 1_704_164_645_000} {
		v := c.EncodeMark(wm)
		if got, ok := DecodeFloor(v); !ok || got != wm {
			t.Fatalf("EncodeMark(%d) decodes as a floor to %d %v", wm, got, ok)
		}
		if got, ok := c.DecodeMark(v); !ok || got != wm {
			t.Fatalf("DecodeMark(EncodeMark(%d)) = %d %v", wm, got, ok)
		}
	}
	if _, ok := c.DecodeMark([]byte{1, 2}); ok {
		t.Fatal("a 2-byte value decoded as a mark")
	}
	// The floor an end of time wrote also holds the watermark its input
	// had reached; the runtime still reads the floor.
	v := encodeFloorReached(500, 120)
	if got, ok := c.DecodeMark(v); !ok || got != 500 {
		t.Fatalf("DecodeMark of a floor reached up to 120 = %d %v, want 500", got, ok)
	}
	if got, ok := decodeReached(v); !ok || got != 120 {
		t.Fatalf("decodeReached = %d %v, want 120", got, ok)
	}
	if got, ok := decodeReached(c.EncodeMark(500)); !ok || got != 500 || len(encodeFloorReached(500, 500)) != 8 {
		t.Fatalf("a floor reached by the watermark: reached %d %v, %d bytes; want 500 and 8", got, ok, len(encodeFloorReached(500, 500)))
	}
}
