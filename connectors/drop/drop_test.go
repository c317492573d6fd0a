package drop

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

func TestDrop(t *testing.T) {
	f, ok := connectors.LookupOutput("drop")
	if !ok {
		t.Fatal("drop not registered")
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, cfg := range []string{``, `{}`, `null`} {
		out, err := f(connectors.BuildContext{Config: json.RawMessage(cfg)}, schema)
		if err != nil {
			t.Fatalf("%q: %v", cfg, err)
		}
		s, err := out.NewSink(connectors.TaskInfo{Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		rb.Field(0).(*array.Int64Builder).Append(1)
		rec := rb.NewRecordBatch()
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		rb.Release()
	}
	_, err := f(connectors.BuildContext{Config: json.RawMessage(`{"y": 1, "x": {}}`)}, schema)
	if err == nil || err.Error() != "x: unknown field (the drop output takes no config)\ny: unknown field (the drop output takes no config)" {
		t.Errorf("got %v", err)
	}
	_, err = f(connectors.BuildContext{Config: json.RawMessage(`[1]`)}, schema)
	if err == nil || err.Error() != "must be an object (got a list)" {
		t.Errorf("got %v", err)
	}
	if (Config{}).OutputType() != "drop" {
		t.Error("OutputType")
	}
}
