//go:build cgo

package streambuf

import (
	"fmt"
	"testing"
	"time"

	_ "github.com/arkflow-rs/arkflow-go/connectors/duckdb"
)

// TestJoinDataDriven runs testdata/join, whose queries need DuckDB.
func TestJoinDataDriven(t *testing.T) { runStory(t, "testdata/join") }

// A result of several batches (DuckDB's chunks hold 2048 rows) is as
// many emissions, which all hold the window's acknowledgement.
func TestJoinResultOfSeveralBatches(t *testing.T) {
	h := newHarness(t)
	defer h.finish()
	cfg := `{"interval": "1s", "join": {"query": "SELECT o.n, u.name FROM orders o JOIN users u ON o.u = u.id", "codec": {"type": "json"}}}`
	if err := h.open("tumbling_window", cfg, Options{Inputs: []string{"users", "orders"}, Decode: decodeJSON}); err != nil {
		t.Fatal(err)
	}
	orders := make([]string, 5000)
	for i := range orders {
		orders[i] = fmt.Sprintf(`{"u": 1, "n": %d}`, i)
	}
	for _, e := range []Entry{
		h.entry("users", texts(h.mem, defaultValueField, []string{`{"id": 1, "name": "ann"}`})),
		h.entry("orders", texts(h.mem, defaultValueField, orders)),
	} {
		if _, err := h.buf.Write(epoch, e); err != nil {
			t.Fatal(err)
		}
	}
	es, err := h.buf.Tick(epoch.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hs := h.keep(es)
	rows := 0
	for _, e := range hs {
		rows += int(e.Rec.NumRows())
	}
	if len(hs) < 2 || rows != len(orders) {
		t.Fatalf("%d emissions of %d rows in all, want several of %d", len(hs), rows, len(orders))
	}
	for _, e := range hs[:len(hs)-1] {
		h.release(func(x held) bool { return x.n == e.n }, nil)
		if len(h.order) > 0 {
			t.Fatalf("entries acknowledged after emission %d of %d", e.n, len(hs))
		}
	}
	h.release(func(held) bool { return true }, nil)
	if len(h.order) != 2 {
		t.Fatalf("%d entries acknowledged after every emission was released, want 2", len(h.order))
	}
}
