package mqtt

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The sink suite against a real Mosquitto, read back by a subscriber that
// subscribed before the first write. The source does not run the source
// suite: an MQTT broker keeps no messages to read again after a Seek (the
// source is connectors.Unrewindable, its offsets count what it read), and
// has no partitions to split among subtasks; source_test.go tests what it
// does instead.
func TestConformanceSink(t *testing.T) {
	broker(t)
	for _, qos := range []int{0, 1, 2} {
		t.Run(map[int]string{0: "qos0", 1: "qos1", 2: "qos2"}[qos], func(t *testing.T) {
			conformance.TestSink(t, conformance.SinkHarness{
				Features: conformance.SinkFeatures{Ordered: true},
				New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
					topic := uniqueName(t, "out")
					c := collect(t, topic, 2)
					cfg := sinkConfig(t, topic)
					cfg.QoS = &qos
					out := buildOutput(t, cfg, schema)
					return out, func(t *testing.T, n int) []map[string]any {
						var rows []map[string]any
						for _, m := range c.wait(t, n) {
							rows = append(rows, conformance.DecodeLines(t, m.Payload())...)
						}
						return rows
					}
				},
			})
		})
	}
}
