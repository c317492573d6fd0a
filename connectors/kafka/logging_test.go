package kafka

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// recorder is a slog.Handler that keeps the messages it gets.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// The input's partition lookup, which runs outside any subtask, logs its
// failure and librdkafka's own log lines through the operator's logger
// (BuildContext.Logger), never through slog.Default (issue 21). No broker
// is needed: the lookup fails against a closed port, after
// MetadataTimeout.
func TestPartitionLookupLogsToTheJobsLogger(t *testing.T) {
	if testing.Short() {
		t.Skip("waits MetadataTimeout")
	}
	def := &recorder{}
	prev := slog.Default()
	slog.SetDefault(slog.New(def))
	t.Cleanup(func() { slog.SetDefault(prev) })

	own := &recorder{}
	f, _ := connectors.LookupInput(Type)
	in, err := f(connectors.BuildContext{Config: json.RawMessage(`{"brokers":["127.0.0.1:1"],"topics":["t"],"consumer_group":"g"}`), Logger: slog.New(own)})
	if err != nil {
		t.Fatal(err)
	}
	if n := in.Partitions(); n != 0 {
		t.Fatalf("partitions %d without a broker", n)
	}
	var lookup, librdkafka bool
	for _, m := range own.messages() {
		lookup = lookup || strings.HasPrefix(m, "cannot look up the partitions")
		librdkafka = librdkafka || strings.HasPrefix(m, "librdkafka: ")
	}
	if !lookup || !librdkafka {
		t.Errorf("the operator's logger got (lookup failure %v, librdkafka lines %v):\n%s", lookup, librdkafka, strings.Join(own.messages(), "\n"))
	}
	if got := def.messages(); len(got) > 0 {
		t.Errorf("logged through the default logger:\n%s", strings.Join(got, "\n"))
	}
}
