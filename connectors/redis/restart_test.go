package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// A server killed (SIGKILL) and started again, with its data kept (an
// append-only file synced on every write): the streams source goes on
// reading where it was, and a sink write made while the server is away
// is sent again until it is done; nothing is lost.
func TestSurvivesServerRestart(t *testing.T) {
	srv := newServer(t, false, "--appendonly", "yes", "--appendfsync", "always")
	url := fmt.Sprintf("redis://127.0.0.1:%d", srv.port)
	o, _ := goredis.ParseURL(url)
	c := goredis.NewClient(o)
	defer c.Close()
	xadd(t, c, "in", jsonRows(0, 5)...)

	in := buildInput(t, SourceConfig{Mode: Mode{Type: ModeSingle, URL: url}, RedisType: SourceType{Type: TypeStream, Streams: []string{"in"}, Group: "g"}, Schema: conformance.Declared()})
	src := openSource(t, in, 0, 1, nil)
	b, err := readBatch(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(idsOf(b.Record)); got != "[0 1 2 3 4]" {
		t.Fatalf("before the restart: ids %s", got)
	}
	b.Ack(nil)

	out := buildOutput(t, SinkConfig{Mode: Mode{Type: ModeSingle, URL: url}, RedisType: SinkType{Type: TypeList, Key: &Expr{Value: "out"}}}, in.Schema())
	snk, err := out.NewSink(connectors.TaskInfo{JobID: "j", OperatorID: "snk"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := snk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer snk.Close(ctx)

	srv.kill()
	wrote := make(chan error, 1)
	go func() { wrote <- snk.Write(ctx, b.Record) }()
	time.Sleep(300 * time.Millisecond) // the write starts while the server is away
	srv.start()
	if err := <-wrote; err != nil {
		t.Fatalf("a write while the server restarts: %v", err)
	}
	b.Record.Release()
	if got := c.LLen(ctx, "out").Val(); got != 5 {
		t.Errorf("the list holds %d elements after the write, want 5", got)
	}

	xadd(t, c, "in", jsonRows(5, 8)...)
	var ids []int64
	for len(ids) < 3 {
		b, err := readBatch(t, src)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, idsOf(b.Record)...)
		b.Ack(nil)
		b.Record.Release()
	}
	if fmt.Sprint(ids) != "[5 6 7]" {
		t.Fatalf("after the restart the source read %v, want [5 6 7]", ids)
	}
	src.Close(ctx)
	if n := c.XPending(ctx, "in", "g").Val().Count; n != 0 {
		t.Errorf("%d entries pending after everything was acknowledged", n)
	}
}
