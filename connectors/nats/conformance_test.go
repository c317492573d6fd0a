package nats

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The connector suite against a real nats-server. The JetStream source
// runs it with one stream per subtest and one subject per data partition
// (mode.subjects). The core source keeps no messages, so it runs the
// suite of sources that cannot read again: rows are published while it is
// subscribed.
func TestConformanceJetStreamSource(t *testing.T) {
	serverURL(t)
	var subjects []string // of the subtest running
	conformance.TestSource(t, conformance.SourceHarness{
		Features: conformance.SourceFeatures{
			Meta: []string{connectors.MetaTopic, connectors.MetaTimestamp},
			CheckRow: func(t testing.TB, want conformance.Row, partition int, rec arrow.RecordBatch, i int) {
				subject := rec.Column(rec.Schema().FieldIndices(connectors.MetaTopic)[0]).(*array.String).Value(i)
				if subject != subjects[partition] {
					t.Errorf("__meta_topic %q in partition %d, want %q", subject, partition, subjects[partition])
				}
				if rec.Column(rec.Schema().FieldIndices(connectors.MetaTimestamp)[0]).IsNull(i) {
					t.Errorf("__meta_timestamp is null")
				}
			},
		},
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			stream, js := newStream(t, nil)
			subjects = subjects[:0]
			for p, rows := range data {
				subject := fmt.Sprintf("%s.p%d", stream, p)
				subjects = append(subjects, subject)
				payloads := make([][]byte, len(rows))
				for i, r := range rows {
					payloads[i] = r.JSON()
				}
				publishJS(t, js, subject, payloads...)
			}
			return buildInput(t, SourceConfig{
				URL:       serverURL(t),
				Mode:      SourceMode{Type: ModeJetStream, Stream: stream, ConsumerName: uniqueName(t, "c"), Subjects: append([]string(nil), subjects...)},
				Schema:    conformance.Declared(),
				BatchSize: batchSize,
			})
		},
	})
}

func TestConformanceCoreSource(t *testing.T) {
	serverURL(t)
	conformance.TestUnrewindableSource(t, conformance.UnrewindableHarness{
		Features: conformance.SourceFeatures{Meta: []string{connectors.MetaTopic, connectors.MetaTimestamp}},
		New: func(t *testing.T, batchSize int) (connectors.Input, conformance.Send) {
			subject := uniqueName(t, "core")
			in := buildInput(t, SourceConfig{URL: serverURL(t), Mode: SourceMode{Type: ModeRegular, Subject: subject}, Schema: conformance.Declared(), BatchSize: batchSize})
			nc := conn(t)
			return in, func(t *testing.T, rows []conformance.Row) {
				for _, r := range rows {
					if err := nc.Publish(subject, r.JSON()); err != nil {
						t.Fatal(err)
					}
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

func TestConformanceCoreSink(t *testing.T) {
	serverURL(t)
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			subject := uniqueName(t, "core")
			c := collect(t, subject)
			out := buildOutput(t, SinkConfig{URL: serverURL(t), Mode: SinkMode{Type: ModeRegular, Subject: Subject(subject)}}, schema)
			return out, func(t *testing.T, n int) []map[string]any {
				var rows []map[string]any
				for _, m := range c.wait(t, n) {
					rows = append(rows, conformance.DecodeLines(t, m.Data)...)
				}
				return rows
			}
		},
	})
}

func TestConformanceJetStreamSink(t *testing.T) {
	serverURL(t)
	conformance.TestSink(t, conformance.SinkHarness{
		New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
			stream, js := newStream(t, nil)
			out := buildOutput(t, SinkConfig{URL: serverURL(t), Mode: SinkMode{Type: ModeJetStream, Subject: Subject(stream + ".out")}, MsgIDFields: []string{"id"}}, schema)
			return out, func(t *testing.T, n int) []map[string]any {
				return payloadRows(t, streamMsgs(t, js, stream, n, 0))
			}
		},
	})
}

// payloadRows decodes the JSON payloads of messages.
func payloadRows(t testing.TB, msgs []jetstream.Msg) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, m := range msgs {
		rows = append(rows, conformance.DecodeLines(t, m.Data())...)
	}
	return rows
}
