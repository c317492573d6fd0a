package kafka

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/logtest"
)

// The input's partition lookup, which runs outside any subtask, logs its
// failure and librdkafka's own log lines through the operator's logger
// (BuildContext.Logger), never through slog.Default. No broker
// is needed: the lookup fails against a closed port, after
// MetadataTimeout.
func TestPartitionLookupLogsToTheJobsLogger(t *testing.T) {
	if testing.Short() {
		t.Skip("waits MetadataTimeout")
	}
	def := logtest.New()
	prev := slog.Default()
	slog.SetDefault(slog.New(def))
	t.Cleanup(func() { slog.SetDefault(prev) })

	own := logtest.New()
	f, _ := connectors.LookupInput(Type)
	in, err := f(connectors.BuildContext{Config: json.RawMessage(`{"brokers":["127.0.0.1:1"],"topics":["t"],"consumer_group":"g"}`), Logger: slog.New(own)})
	if err != nil {
		t.Fatal(err)
	}
	if n := in.Partitions(); n != 0 {
		t.Fatalf("partitions %d without a broker", n)
	}
	var lookup, librdkafka bool
	for _, m := range own.Messages() {
		lookup = lookup || strings.HasPrefix(m, "cannot look up the partitions")
		librdkafka = librdkafka || strings.HasPrefix(m, "librdkafka: ")
	}
	if !lookup || !librdkafka {
		t.Errorf("the operator's logger got (lookup failure %v, librdkafka lines %v):\n%s", lookup, librdkafka, strings.Join(own.Messages(), "\n"))
	}
	if got := def.Messages(); len(got) > 0 {
		t.Errorf("logged through the default logger:\n%s", strings.Join(got, "\n"))
	}
}
