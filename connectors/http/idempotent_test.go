package httpconn

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/job"
)

// keptSource connects an idempotent input's source as the WAL wrapper
// does: its keys file opened first.
func startedKept(t *testing.T, in *input, keys string) (*accepting, string) {
	t.Helper()
	s, err := in.NewSource(connectors.TaskInfo{OperatorID: "in", Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	k, ok := s.(*keptSource)
	if !ok {
		t.Fatalf("the source of an idempotent input is a %T, which keeps no keys", s)
	}
	if err := k.OpenKeeper(keys, nil); err != nil {
		t.Fatal(err)
	}
	a := &accepting{source: k.source}
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, "http://" + in.boundAddr() + in.cfg.Path
}

// A request sent again with its key is answered 200 with every row a
// duplicate and enters the job once; racing copies enter once too.
func TestIdempotencyKey(t *testing.T) {
	in := newTestInput(t, map[string]any{"address": "127.0.0.1:0", "format": "ndjson", "schema": testSchema, "idempotency": map[string]any{}})
	src, url := startedKept(t, in, filepath.Join(t.TempDir(), "KEYS"))
	body := []byte("{\"user\":\"a\",\"n\":1}\n{\"user\":\"b\",\"n\":2}\n")
	key := map[string]string{"Idempotency-Key": "req-1"}
	first := postBg(t, nil, url, body, key)
	if got := readN(t, src, 2); fmt.Sprint(got) != "[a:1 b:2]" {
		t.Fatalf("read %v", got)
	}
	if a := <-first; a.code != http.StatusOK || a.resp.Accepted != 2 || a.resp.Duplicates != 0 {
		t.Fatalf("first: %d %+v", a.code, a.resp)
	}
	if code, resp := post(t, nil, url, body, key); code != http.StatusOK || resp.Accepted != 0 || resp.Duplicates != 2 {
		t.Errorf("sent again: %d %+v, want 200 with 2 duplicates", code, resp)
	}
	expectNothing(t, src)
	// Racing copies of a new request: one enters, the other waits for it
	// and is answered as duplicates.
	key2 := map[string]string{"Idempotency-Key": "req-2"}
	a1, a2 := postBg(t, nil, url, body, key2), postBg(t, nil, url, body, key2)
	readN(t, src, 2)
	r1, r2 := <-a1, <-a2
	if r1.code != 200 || r2.code != 200 || r1.resp.Accepted+r2.resp.Accepted != 2 || r1.resp.Duplicates+r2.resp.Duplicates != 2 {
		t.Errorf("racing copies: %+v and %+v, want one accepted, one duplicate", r1, r2)
	}
	expectNothing(t, src)
	// A request without the header always enters.
	plain := postBg(t, nil, url, body, nil)
	readN(t, src, 2)
	<-plain
}

// An idempotent input without a write-ahead log is refused at build,
// naming the field.
func TestIdempotencyNeedsDurability(t *testing.T) {
	spec := `
id: idem
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - operator_id: in
    input_type: http
    config: {address: "127.0.0.1:0", format: ndjson, schema: [{name: n, type: int64}], idempotency: {}}
sinks:
  - {operator_id: out, output_type: drop}
`
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	_, err = arkflow.FromSpec(s)
	if err == nil || !strings.Contains(err.Error(), "sources[0].config.idempotency") || !strings.Contains(err.Error(), "durability") {
		t.Fatalf("FromSpec without durability: %v, want an error naming sources[0].config.idempotency and durability", err)
	}
}
