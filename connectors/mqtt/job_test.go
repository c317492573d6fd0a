package mqtt

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/job"
)

// In a job with a durability block, a payload that is not JSON fails the
// job with an error naming the topic, the message and the field; the rows
// before it reach the sink, and the bad message stays the broker's (a
// second run without the schema reads it).
func TestJobFailsOnMalformedMessage(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.Schema = connectors.Schema{{Name: "n", Type: "int64"}}
	var rows atomic.Int64
	j, err := arkflow.NewJob("mqtt-bad-input").
		Source("in", cfg, arkflow.Durable(job.Durability{})).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			rows.Add(rec.NumRows())
			return nil
		})).
		Build(arkflow.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- j.Run(ctx) }()
	// Publish once the source subscribed: its session did not exist before.
	for {
		if tok := client(t, nil).Publish(topic, 1, false, []byte(`{"n":1}`)); tok.Wait() && tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		if rows.Load() > 0 {
			break
		}
		select {
		case err := <-ran:
			t.Fatalf("the job ended before reading: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	publish(t, topic, 1, []byte(`{"n":"two"}`))
	err = <-ran
	if err == nil {
		t.Fatal("the job ran on past a malformed message")
	}
	for _, want := range []string{fmt.Sprintf("topic %q", topic), "message at offset", "packet id", "n"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	t.Logf("the job failed: %v", err)
	raw := cfg
	raw.Schema = nil
	bs := readBatches(t, openSource(t, buildInput(t, raw), 0, 1), 1)
	if got := column(t, bs, RawValueColumn)[0]; got != `{"n":"two"}` {
		t.Fatalf("the broker still has %q first, want the malformed message", got)
	}
}
