package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// The test's own connectors: "counting" emits one-row batches n = 0..count-1
// and records each batch's acknowledgement; "collecting" keeps the rows
// written to it under its name, failing every write of a row whose n is
// in fail.
func init() {
	connectors.RegisterInput("counting", func(bc connectors.BuildContext) (connectors.Input, error) {
		var cfg struct {
			Label string `json:"label"`
			Count int    `json:"count"`
		}
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		return &countingInput{name: cfg.Label, count: cfg.Count}, nil
	})
	connectors.RegisterOutput("collecting", func(bc connectors.BuildContext, _ *arrow.Schema) (connectors.Output, error) {
		var cfg struct {
			Label string  `json:"label"`
			Fail  []int64 `json:"fail"`
		}
		if err := connectors.DecodeConfig(bc.Config, &cfg); err != nil {
			return nil, err
		}
		fail := map[int64]bool{}
		for _, n := range cfg.Fail {
			fail[n] = true
		}
		return collectingOutput{name: cfg.Label, fail: fail}, nil
	})
}

var countingSchema = arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)

// acks are the acknowledgements of each counting input by name: n → the
// errors it was acknowledged with (one entry each call).
var (
	testMu    sync.Mutex
	acks      = map[string]map[int64][]error{}
	collected = map[string][][]int64{} // name → the n of each batch written
)

func resetTestConnectors() {
	testMu.Lock()
	defer testMu.Unlock()
	acks = map[string]map[int64][]error{}
	collected = map[string][][]int64{}
}

type countingInput struct {
	name  string
	count int
}

func (in *countingInput) Schema() *arrow.Schema { return countingSchema }
func (in *countingInput) Partitions() int       { return 1 }
func (in *countingInput) NewSource(connectors.TaskInfo) (connectors.Source, error) {
	return &countingSource{in: in}, nil
}

type countingSource struct {
	in   *countingInput
	next int64
}

func (s *countingSource) Connect(context.Context) error { return nil }
func (s *countingSource) Close(context.Context) error   { return nil }

func (s *countingSource) Read(ctx context.Context) (connectors.Batch, error) {
	if s.next >= int64(s.in.count) {
		return connectors.Batch{}, connectors.ErrEndOfInput
	}
	n := s.next
	s.next++
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.Append(n)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(countingSchema, []arrow.Array{col}, 1)
	name := s.in.name
	return connectors.Batch{Record: rec, Ack: func(err error) {
		testMu.Lock()
		defer testMu.Unlock()
		if acks[name] == nil {
			acks[name] = map[int64][]error{}
		}
		acks[name][n] = append(acks[name][n], err)
	}}, nil
}

type collectingOutput struct {
	name string
	fail map[int64]bool
}

func (o collectingOutput) NewSink(connectors.TaskInfo) (connectors.Sink, error) {
	return &collectingSink{o: o}, nil
}

type collectingSink struct{ o collectingOutput }

func (s *collectingSink) Connect(context.Context) error { return nil }
func (s *collectingSink) Close(context.Context) error   { return nil }

func (s *collectingSink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	i := rec.Schema().FieldIndices("n")
	if len(i) != 1 {
		raw, _ := json.Marshal(rec)
		return fmt.Errorf("no column n in %s", raw)
	}
	col := rec.Column(i[0]).(*array.Int64)
	ns := append([]int64(nil), col.Int64Values()...)
	for _, n := range ns {
		if s.o.fail[n] {
			return fmt.Errorf("row %d refused", n)
		}
	}
	testMu.Lock()
	defer testMu.Unlock()
	collected[s.o.name] = append(collected[s.o.name], ns)
	return nil
}

// freeAddr is a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
