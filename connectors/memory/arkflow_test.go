package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// ArkFlow's form: each message is a row of a string column "value", one
// row a batch, in order, and the input ends after the last (a message
// that looks like JSON stays text).
func TestArkFlowMessages(t *testing.T) {
	msgs := []string{`{"a": 1}`, "plain text", "", "ünïcode ✓"}
	raw, _ := json.Marshal(map[string]any{"messages": msgs})
	s := open(t, input(t, string(raw), nil), 0, 1, nil)
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := s.Read(ctx)
		cancel()
		if errors.Is(err, connectors.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := b.Record.NumRows(); n != 1 {
			t.Errorf("a batch of %d rows, want 1 (ArkFlow's one message a batch)", n)
		}
		if f := b.Record.Schema().Field(0); f.Name != "value" || f.Type.String() != "utf8" {
			t.Fatalf("column %s", f)
		}
		col := b.Record.Column(0).(*array.String)
		for i := 0; i < col.Len(); i++ {
			got = append(got, col.Value(i))
		}
		b.Ack(nil)
		b.Record.Release()
	}
	if strings.Join(got, "|") != strings.Join(msgs, "|") {
		t.Errorf("read %q, want %q", got, msgs)
	}
}

func TestArkFlowMessagesExcludeSchema(t *testing.T) {
	f, _ := connectors.LookupInput("memory")
	_, err := f(connectors.BuildContext{Config: json.RawMessage(`{"messages": ["a"], "schema": [{"name": "n", "type": "int64"}]}`)})
	if err == nil || !strings.Contains(err.Error(), "messages: is ArkFlow's form and excludes schema and rows") {
		t.Errorf("error %v", err)
	}
}
