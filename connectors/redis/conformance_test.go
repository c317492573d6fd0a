package redis

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The connector suite against a real redis-server: the streams input
// with one stream per data partition, and the sink writing to a stream
// and to a list, read back with XRANGE and LRANGE. The pub/sub input runs
// the suite of sources that cannot read again: rows are published while
// it is subscribed. The list input runs neither: a list has no positions
// to seek to (source_test.go tests what it does instead).
func TestConformanceStreamSource(t *testing.T) {
	serverURL(t)
	var keys []string // of the subtest running
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{
			Meta: []string{connectors.MetaTopic, connectors.MetaTimestamp},
			CheckRow: func(t testing.TB, want conformance.Row, partition int, rec arrow.RecordBatch, i int) {
				key := rec.Column(rec.Schema().FieldIndices(connectors.MetaTopic)[0]).(*array.String).Value(i)
				if key != keys[partition] {
					t.Errorf("__meta_topic %q in partition %d, want %q", key, partition, keys[partition])
				}
				if rec.Column(rec.Schema().FieldIndices(connectors.MetaTimestamp)[0]).IsNull(i) {
					t.Errorf("__meta_timestamp is null")
				}
			},
		},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			c := newClient(t)
			prefix := uniqueKey(t, "s")
			keys = keys[:0]
			for p, rows := range data {
				key := prefix + ":" + string(rune('a'+p))
				keys = append(keys, key)
				payloads := make([][]byte, len(rows))
				for i, r := range rows {
					payloads[i] = r.JSON()
				}
				xadd(t, c, key, payloads...)
			}
			return buildInput(t, SourceConfig{
				Mode:      single(t),
				RedisType: SourceType{Type: TypeStream, Streams: append([]string(nil), keys...), Group: "g"},
				Schema:    conformance.Declared(),
				BatchSize: batchSize,
			})
		},
	})
}

func TestConformanceSubscribeSource(t *testing.T) {
	serverURL(t)
	conformance.TestUnrewindableSource(t, conformance.UnrewindableHarness{
		Features: conformance.SourceFeatures{Meta: []string{connectors.MetaTopic}},
		New: func(t *testing.T, batchSize int) (connectors.Input, conformance.Send) {
			c := newClient(t)
			ch := uniqueKey(t, "ch")
			in := buildInput(t, SourceConfig{
				Mode:      single(t),
				RedisType: SourceType{Type: TypeSubscribe, Subscribe: &Subscribe{Type: "channels", Channels: []string{ch}}},
				Schema:    conformance.Declared(),
				BatchSize: batchSize,
			})
			return in, func(t *testing.T, rows []conformance.Row) {
				for _, r := range rows {
					if err := c.Publish(context.Background(), ch, r.JSON()).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
	})
}

func TestConformanceStreamSink(t *testing.T) {
	serverURL(t)
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			key := uniqueKey(t, "out")
			c := newClient(t)
			out := buildOutput(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypeStream, Key: &Expr{Value: key}}}, schema)
			return out, func(t *testing.T, n int) []map[string]any {
				msgs, err := c.XRange(context.Background(), key, "-", "+").Result()
				if err != nil {
					t.Fatal(err)
				}
				var rows []map[string]any
				for _, m := range msgs {
					rows = append(rows, conformance.DecodeLines(t, []byte(m.Values[DefaultField].(string)))...)
				}
				return rows
			}
		},
	})
}

func TestConformanceListSink(t *testing.T) {
	serverURL(t)
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			key := uniqueKey(t, "list")
			c := newClient(t)
			out := buildOutput(t, SinkConfig{Mode: single(t), RedisType: SinkType{Type: TypeList, Key: &Expr{Value: key}}}, schema)
			return out, func(t *testing.T, n int) []map[string]any {
				vals, err := c.LRange(context.Background(), key, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				var rows []map[string]any
				for _, v := range vals {
					rows = append(rows, conformance.DecodeLines(t, []byte(v))...)
				}
				return rows
			}
		},
	})
}
