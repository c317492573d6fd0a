package mqtt

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The suites against a real Mosquitto. The source runs the suite of
// sources that cannot read again (connectors.Unrewindable: a broker gives
// a message to the clients subscribed when it arrives, and keeps nothing
// to read again after a Seek); source_test.go tests what QoS 1 adds
// (PUBACKs, redeliveries). The sink's rows are read back by a subscriber
// that subscribed before the first write.
func TestConformanceSource(t *testing.T) {
	h, p := broker(t)
	t.Run("qos0", func(t *testing.T) { sourceSuite(t, h, p, 0) })
	// At QoS 1 the broker sends at most max_inflight_messages without a
	// PUBACK (Mosquitto's default: 20), and ReadAll reads 21 rows before
	// it acknowledges any: a broker of the test's own allows more.
	t.Run("qos1", func(t *testing.T) {
		port := freePort(t)
		startMosquitto(t, fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nmax_inflight_messages 100\n", port), port)
		sourceSuite(t, "127.0.0.1", port, 1)
	})
}

func sourceSuite(t *testing.T, host string, port, qos int) {
	conformance.TestUnrewindableSource(t, conformance.UnrewindableHarness{
		Features: conformance.SourceFeatures{Meta: []string{connectors.MetaTopic, MetaMark}},
		New: func(t *testing.T, batchSize int) (connectors.Input, conformance.Send) {
			topic := uniqueName(t, "in")
			cfg := SourceConfig{Host: host, Port: port, ClientID: uniqueName(t, "src"), Topics: []string{topic},
				QoS: &qos, Schema: conformance.Declared(), BatchSize: batchSize}
			c := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://%s:%d", host, port)).SetClientID(uniqueName(t, "pub")))
			if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Fatalf("connecting the publisher: %v", tok.Error())
			}
			t.Cleanup(func() { c.Disconnect(100) })
			return buildInput(t, cfg), func(t *testing.T, rows []conformance.Row) {
				for _, r := range rows {
					if tok := c.Publish(topic, 1, false, r.JSON()); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
						t.Fatalf("publishing: %v", tok.Error())
					}
				}
			}
		},
	})
}

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
