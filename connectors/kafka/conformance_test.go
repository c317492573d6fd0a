package kafka

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The connector suite against a real broker: each subtest gets a fresh
// topic (one partition per data partition) and consumer group.
func TestConformanceSource(t *testing.T) {
	brokers(t)
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{
			Meta: []string{connectors.MetaTopic, connectors.MetaKey, connectors.MetaTimestamp},
			CheckRow: func(t testing.TB, want conformance.Row, partition int, rec arrow.RecordBatch, i int) {
				topic := rec.Column(rec.Schema().FieldIndices(connectors.MetaTopic)[0]).(*array.String).Value(i)
				if !strings.HasPrefix(topic, "t-") {
					t.Errorf("__meta_topic %q", topic)
				}
				key := rec.Column(rec.Schema().FieldIndices(connectors.MetaKey)[0]).(*array.Binary).Value(i)
				if !bytes.Equal(key, []byte(strconv.FormatInt(want.ID, 10))) {
					t.Errorf("__meta_key %q, want %d", key, want.ID)
				}
				ts := rec.Column(rec.Schema().FieldIndices(connectors.MetaTimestamp)[0]).(*array.Timestamp).Value(i)
				if w := baseTime.Add(time.Duration(want.ID) * time.Millisecond).UnixMilli(); int64(ts) != w {
					t.Errorf("__meta_timestamp %d, want %d", ts, w)
				}
			},
		},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			topic := newTopic(t, len(data))
			produceRows(t, topic, data)
			return sourceInput(t, SourceConfig{
				Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: uniqueName(t, "g"),
				Schema: conformance.Declared(), BatchSize: batchSize,
			})
		},
	})
}

func TestConformanceSink(t *testing.T) {
	brokers(t)
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			topic := newTopic(t, 2)
			out := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(topic), Key: "id"}, schema)
			return out, func(t *testing.T, n int) []map[string]any {
				return decodeValues(t, consumeAll(t, topic, "read_committed", n, 200*time.Millisecond))
			}
		},
	})
}
