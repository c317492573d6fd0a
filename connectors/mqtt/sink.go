package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/expr"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// output is a validated MQTT output.
type output struct {
	cfg   SinkConfig
	topic *expr.Expr // topic.expr compiled against the rows' schema, or nil
}

func newOutput(cfg SinkConfig, schema *arrow.Schema, zero map[string]bool) (*output, error) {
	var f connectors.Fields
	f.Merge("", checkSink(&cfg, zero))
	o := &output{cfg: cfg}
	if schema != nil {
		o.checkSchema(&f, schema)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return o, nil
}

// checkSchema checks the columns the config names, and compiles the topic
// expression, against the rows' schema.
func (o *output) checkSchema(f *connectors.Fields, schema *arrow.Schema) {
	cfg := &o.cfg
	cols := make([]string, 0, schema.NumFields())
	for _, fd := range schema.Fields() {
		cols = append(cols, fd.Name)
	}
	if cfg.ValueField != "" {
		if i := schema.FieldIndices(cfg.ValueField); len(i) == 0 {
			f.Add("value_field", "%s", suggest.UnknownColumn(cfg.ValueField, cols))
		} else if t := schema.Field(i[0]).Type.ID(); t != arrow.STRING && t != arrow.BINARY {
			f.Add("value_field", "column %q has type %s; the payload column must be string or binary", cfg.ValueField, schema.Field(i[0]).Type)
		}
	} else if err := rowjson.CheckSchema(connectors.StripMetaSchema(schema)); err != nil {
		f.Add("", "the rows cannot be written as JSON payloads: %v (or name a string or binary column in value_field)", err)
	}
	if cfg.Topic.Expr != "" {
		e, err := expr.Compile(cfg.Topic.Expr, schema)
		switch {
		case err != nil:
			f.Add("topic.expr", "%v", err)
		case e.Type().ID() != arrow.STRING:
			f.Add("topic.expr", "gives %s; a topic must be a string", e.Type())
		default:
			o.topic = e
		}
	}
}

// NewSink returns the sink of one subtask. It does no I/O.
func (o *output) NewSink(info connectors.TaskInfo) (connectors.Sink, error) {
	if o.cfg.Topic.Expr != "" && o.topic == nil {
		return nil, errors.New("mqtt: topic.expr was not compiled (the output was built without the rows' schema)")
	}
	lg := info.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	cfg := &o.cfg
	return &sink{
		cfg: cfg, topic: o.topic, log: lg.With("connector", "mqtt"),
		ep: endpoint{
			host: cfg.Host, port: cfg.Port, clientID: subtaskClientID(cfg.ClientID, info.Subtask),
			username: cfg.Username, password: cfg.Password, cleanSession: *cfg.CleanSession,
			keepAlive: cfg.KeepAlive, tls: cfg.TLS,
		},
	}, nil
}

// sink publishes rows, one message a row, with the configured QoS and
// retain flag. Write returns once every message is acknowledged as its
// QoS has it: QoS 0 once written to the connection, QoS 1 once the broker
// sent PUBACK, QoS 2 once it sent PUBCOMP.
type sink struct {
	cfg   *SinkConfig
	topic *expr.Expr
	log   *slog.Logger
	ep    endpoint

	client    paho.Client
	connected bool
	closed    bool

	connects atomic.Int64
}

// Connect connects. ctx bounds only connecting.
func (s *sink) Connect(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	if s.connected {
		return errors.New("mqtt: already connected")
	}
	o, err := s.ep.options()
	if err != nil {
		return err
	}
	o.SetOnConnectHandler(func(paho.Client) {
		if s.connects.Add(1) > 1 {
			s.log.Info("reconnected to the MQTT broker", "broker", s.ep.address())
		}
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.log.Warn("lost the connection to the MQTT broker; reconnecting", "broker", s.ep.address(), "error", err)
	})
	c := paho.NewClient(o)
	if _, err := connect(ctx, c, s.ep); err != nil {
		return err
	}
	s.client = c
	s.connected = true
	return nil
}

// Write publishes the rows and returns once the broker acknowledged every
// one as its QoS has it, or with the first error.
func (s *sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if s.closed {
		return ErrClosed
	}
	if !s.connected {
		return errNotConnected
	}
	if rec.NumRows() == 0 {
		return nil
	}
	payloads, err := s.payloads(rec)
	if err != nil {
		return err
	}
	topics, err := s.topics(rec)
	if err != nil {
		return err
	}
	qos := byte(*s.cfg.QoS)
	// The client drops a QoS 0 message published while it reconnects, and
	// reports it sent: Write says so instead.
	notConnected := func() error {
		if qos == 0 && !s.client.IsConnectionOpen() {
			return fmt.Errorf("mqtt: publishing %d rows to %q (QoS 0): not connected to the broker at %s (reconnecting), and QoS 0 messages are not kept for later",
				len(payloads), topics(0), s.ep.address())
		}
		return nil
	}
	if err := notConnected(); err != nil {
		return err
	}
	toks := make([]paho.Token, len(payloads))
	for i, p := range payloads {
		toks[i] = s.client.Publish(topics(i), qos, s.cfg.Retain, p)
	}
	for i, tok := range toks {
		if err := wait(ctx, tok, RequestTimeout); err != nil {
			return fmt.Errorf("mqtt: publishing row %d of %d to %q (QoS %d): %w", i, len(toks), topics(i), qos, err)
		}
	}
	return notConnected()
}

// topics returns the function giving row i's topic.
func (s *sink) topics(rec arrow.RecordBatch) (func(i int) string, error) {
	if s.topic == nil {
		t := s.cfg.Topic.Value
		return func(int) string { return t }, nil
	}
	arr, err := s.topic.Eval(rec)
	if err != nil {
		return nil, fmt.Errorf("mqtt: evaluating topic.expr %q: %w", s.cfg.Topic.Expr, err)
	}
	defer arr.Release()
	col, ok := arr.(*array.String)
	if !ok {
		return nil, fmt.Errorf("mqtt: topic.expr %q gives %s, not a string", s.cfg.Topic.Expr, arr.DataType())
	}
	out := make([]string, col.Len())
	for i := range out {
		if col.IsNull(i) || col.Value(i) == "" {
			return nil, fmt.Errorf("mqtt: topic.expr %q gives no topic (null or empty) for row %d", s.cfg.Topic.Expr, i)
		}
		if v := col.Value(i); strings.ContainsAny(v, "+#") {
			return nil, fmt.Errorf("mqtt: topic.expr %q gives %q for row %d: a topic to publish to has no wildcards", s.cfg.Topic.Expr, v, i)
		}
		out[i] = strings.Clone(col.Value(i))
	}
	return func(i int) string { return out[i] }, nil
}

// payloads returns every row's payload: value_field's bytes, or the row
// as a JSON object without its __meta_* columns. They are copies, which
// stay valid after rec is released.
func (s *sink) payloads(rec arrow.RecordBatch) ([][]byte, error) {
	n := int(rec.NumRows())
	out := make([][]byte, n)
	if s.cfg.ValueField != "" {
		idx := rec.Schema().FieldIndices(s.cfg.ValueField)
		if len(idx) == 0 {
			return nil, fmt.Errorf("mqtt: value_field column %q is not in the rows", s.cfg.ValueField)
		}
		col := rec.Column(idx[0])
		for i := 0; i < n; i++ {
			switch a := col.(type) {
			case *array.Binary:
				out[i] = append([]byte{}, a.Value(i)...)
			case *array.String:
				out[i] = []byte(a.Value(i))
			default:
				return nil, fmt.Errorf("mqtt: value_field column %q has type %s, not string or binary", s.cfg.ValueField, col.DataType())
			}
		}
		return out, nil
	}
	stripped := connectors.StripMeta(rec)
	defer stripped.Release()
	buf, err := rowjson.AppendRecord(nil, stripped)
	if err != nil {
		return nil, fmt.Errorf("mqtt: encoding rows as JSON: %w", err)
	}
	row, start := 0, 0
	for i, c := range buf {
		if c == '\n' {
			out[row] = buf[start:i:i]
			row++
			start = i + 1
		}
	}
	if row != n {
		return nil, fmt.Errorf("mqtt: encoded %d rows, want %d", row, n)
	}
	return out, nil
}

// Close disconnects, after the publishes in flight (at most 250 ms).
// Safe without Connect and more than once.
func (s *sink) Close(context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.connected = false
	if s.client != nil {
		s.client.Disconnect(250)
		s.client = nil
	}
	return nil
}

var (
	_ connectors.Output = (*output)(nil)
	_ connectors.Sink   = (*sink)(nil)
)
