package mqtt

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// column returns the values of a column of the batches, as strings.
func column(t testing.TB, bs []connectors.Batch, name string) []string {
	t.Helper()
	var out []string
	for _, b := range bs {
		idx := b.Record.Schema().FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("no column %q", name)
		}
		col := b.Record.Column(idx[0])
		for i := 0; i < col.Len(); i++ {
			switch a := col.(type) {
			case *array.String:
				out = append(out, a.Value(i))
			case *array.Binary:
				out = append(out, string(a.Value(i)))
			default:
				out = append(out, a.ValueStr(i))
			}
		}
	}
	return out
}

func rowsOf(n int, from int64) ([]conformance.Row, [][]byte) {
	rows := make([]conformance.Row, n)
	payloads := make([][]byte, n)
	for i := range rows {
		rows[i] = conformance.Row{ID: from + int64(i), Name: fmt.Sprintf("row %d \"é\"", from+int64(i))}
		payloads[i] = rows[i].JSON()
	}
	return rows, payloads
}

func wantIDs(rows []conformance.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r.ID)
	}
	return out
}

func TestSourceReadsJSONInOrder(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic+"/#")
	cfg.Schema = conformance.Declared()
	cfg.BatchSize = 7
	s := openSource(t, buildInput(t, cfg), 0, 1)
	// Fewer than the broker sends without a PUBACK (Mosquitto's
	// max_inflight_messages is 20).
	rows, payloads := rowsOf(18, 1)
	publish(t, topic+"/a", 1, payloads...)
	bs := readBatches(t, s, 18)
	if got, want := strings.Join(column(t, bs, "id"), ","), strings.Join(wantIDs(rows), ","); got != want {
		t.Fatalf("ids %s, want %s", got, want)
	}
	var prev int64 = -1
	for _, b := range bs {
		if n := b.Record.NumRows(); n > 7 {
			t.Errorf("batch of %d rows, batch_size 7", n)
		}
		offs := b.Record.Column(b.Record.Schema().FieldIndices(connectors.MetaOffset)[0]).(*array.Int64)
		for i := 0; i < offs.Len(); i++ {
			if offs.Value(i) <= prev {
				t.Fatalf("offset %d after %d", offs.Value(i), prev)
			}
			prev = offs.Value(i)
		}
	}
	for i, topicOf := range column(t, bs, connectors.MetaTopic) {
		if topicOf != topic+"/a" {
			t.Fatalf("row %d: __meta_topic %q, want %q", i, topicOf, topic+"/a")
		}
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	pos := s.Positions()
	if len(pos) != 1 || pos[0].Offset != prev+1 {
		t.Fatalf("positions %v after acknowledging everything, want offset %d", pos, prev+1)
	}
}

func TestSourceRawFormat(t *testing.T) {
	topic := uniqueName(t, "t")
	q := 0
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.QoS = &q
	s := openSource(t, buildInput(t, cfg), 0, 1)
	publish(t, topic, 0, []byte("one"), []byte{}, []byte("three \x00 bytes"))
	bs := readBatches(t, s, 3)
	if got := strings.Join(column(t, bs, RawValueColumn), "|"); got != "one||three \x00 bytes" {
		t.Fatalf("values %q", got)
	}
	for _, b := range bs {
		if mk := b.Record.Column(b.Record.Schema().FieldIndices(MetaMark)[0]); mk.NullN() != mk.Len() {
			t.Errorf("QoS 0 messages carry marks")
		}
	}
}

// A message read and not acknowledged is delivered again after the client
// reconnects with its persistent session; once acknowledged it is not; and
// messages published while no client was connected wait in the session.
func TestSourceRedeliversUnacknowledged(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.Schema = conformance.Declared()
	in := buildInput(t, cfg)

	first := openSource(t, in, 0, 1)
	rows, payloads := rowsOf(5, 1)
	publish(t, topic, 1, payloads...)
	readBatches(t, first, 5) // not acknowledged
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := openSource(t, in, 0, 1)
	bs := readBatches(t, second, 5)
	if got, want := strings.Join(column(t, bs, "id"), ","), strings.Join(wantIDs(rows), ","); got != want {
		t.Fatalf("after the reconnect: ids %s, want %s", got, want)
	}
	if n := second.redelivered.Load(); n != 5 {
		t.Errorf("%d messages came with the DUP flag, want 5", n)
	}
	for _, b := range bs {
		b.Ack(nil)
	}
	if err := second.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	more, payloads := rowsOf(3, 100)
	publish(t, topic, 1, payloads...)

	third := openSource(t, in, 0, 1)
	bs = readBatches(t, third, 3)
	if got, want := strings.Join(column(t, bs, "id"), ","), strings.Join(wantIDs(more), ","); got != want {
		t.Fatalf("after acknowledging: ids %s, want only those published since, %s", got, want)
	}
	expectNothing(t, third)
}

// Behind a write-ahead log a message is acknowledged once the log holds
// it (Accepted), before the sinks acknowledge it.
func TestSourceAcknowledgesOnAcceptBehindWAL(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	in := buildInput(t, cfg)
	first := newTestSource(t, in, 0, 1)
	first.SetCovered(func() []connectors.Position { return nil })
	connectSource(t, first)
	_, payloads := rowsOf(4, 1)
	publish(t, topic, 1, payloads...)
	for _, b := range readBatches(t, first, 4) {
		if b.Accepted == nil {
			t.Fatal("a batch behind a WAL has no Accepted")
		}
		b.Accepted(nil) // Ack never comes
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := openSource(t, in, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if b, err := second.Read(ctx); err == nil {
		t.Fatalf("read %q again (%d with DUP)", column(t, []connectors.Batch{b}, RawValueColumn), second.redelivered.Load())
	}
}

// A payload that is not JSON fails the source with an error naming the
// topic, the message and the field, after the rows before it; the message
// is not acknowledged, so the broker still has it.
func TestSourceMalformedJSONFails(t *testing.T) {
	topic := uniqueName(t, "t")
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.Schema = conformance.Declared()
	in := buildInput(t, cfg)
	s := openSource(t, in, 0, 1)
	publish(t, topic, 1, []byte(`{"id":1,"name":"a"}`), []byte(`{"id":"two","name":"b"}`), []byte(`{"id":3,"name":"c"}`))
	bs := readBatches(t, s, 1)
	if got := strings.Join(column(t, bs, "id"), ","); got != "1" {
		t.Fatalf("ids before the bad message: %s, want 1", got)
	}
	_, err := s.Read(context.Background())
	if err == nil {
		t.Fatal("Read after a malformed message succeeded")
	}
	for _, want := range []string{fmt.Sprintf("topic %q", topic), "message at offset", "packet id", "id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, again := s.Read(context.Background()); again == nil || again.Error() != err.Error() {
		t.Errorf("the next Read returned %v, want the same error", again)
	}
	bs[0].Ack(nil)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The bad message and the one after it are the broker's still.
	raw := cfg
	raw.Schema, raw.Format = nil, FormatRaw
	again := readBatches(t, openSource(t, buildInput(t, raw), 0, 1), 2)
	if got := strings.Join(column(t, again, RawValueColumn), "|"); got != `{"id":"two","name":"b"}|{"id":3,"name":"c"}` {
		t.Fatalf("redelivered after the failure: %s", got)
	}
}

// Only subtask 0 subscribes to plain topics; the others read nothing.
func TestSourceSubtasks(t *testing.T) {
	topic := uniqueName(t, "t")
	in := buildInput(t, sourceConfig(t, uniqueName(t, "src"), topic))
	if in.Partitions() != 1 {
		t.Fatalf("Partitions %d, want 1", in.Partitions())
	}
	s0, s1 := openSource(t, in, 0, 2), openSource(t, in, 1, 2)
	if s0.ep.clientID != in.cfg.ClientID || s1.ep.clientID != in.cfg.ClientID+"-1" {
		t.Fatalf("client IDs %q and %q", s0.ep.clientID, s1.ep.clientID)
	}
	publish(t, topic, 1, []byte("x"))
	readBatches(t, s0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s1.Read(ctx); err != context.Canceled {
		t.Fatalf("subtask 1 Read: %v, want context.Canceled", err)
	}
}

// With shared subscriptions every subtask subscribes, and the broker
// gives each message to one of them.
func TestSourceSharedSubscription(t *testing.T) {
	topic := uniqueName(t, "t")
	in := buildInput(t, sourceConfig(t, uniqueName(t, "src"), "$share/g/"+topic))
	if in.Partitions() != 0 {
		t.Fatalf("Partitions %d, want 0", in.Partitions())
	}
	subs := []*source{openSource(t, in, 0, 2), openSource(t, in, 1, 2)}
	const n = 40
	_, payloads := rowsOf(n, 1)
	publish(t, topic, 1, payloads...)
	var mu sync.Mutex
	got := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b, err := s.Read(ctx)
				if err != nil {
					return
				}
				if b.Partition != int(s.part) {
					t.Errorf("batch of partition %d from subtask %d", b.Partition, s.part)
				}
				mu.Lock()
				for _, v := range column(t, []connectors.Batch{b}, RawValueColumn) {
					got[v]++
				}
				if len(got) == n {
					cancel()
				}
				mu.Unlock()
				b.Ack(nil)
				b.Record.Release()
			}
		}()
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("read %d distinct messages, want %d", len(got), n)
	}
	for v, c := range got {
		if c != 1 {
			t.Errorf("message %s read %d times", v, c)
		}
	}
}

// proxy forwards connections to the test broker until cut closes them.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	h, p := broker(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{l: l}
	t.Cleanup(func() { l.Close(); px.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", net.JoinHostPort(h, strconv.Itoa(p)))
			if err != nil {
				c.Close()
				continue
			}
			px.mu.Lock()
			px.conns = append(px.conns, c, up)
			px.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return px
}

func (px *proxy) port() int { return px.l.Addr().(*net.TCPAddr).Port }

// cut closes every connection through the proxy, as a network failure
// would.
func (px *proxy) cut() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, c := range px.conns {
		c.Close()
	}
	px.conns = nil
}

// A connection lost while messages are taken and not yet acknowledged:
// the client reconnects, the broker delivers them again, and the source
// skips the redeliveries; the PUBACKs, once the rows are acknowledged, go
// out on the new connection, so the broker has nothing left to deliver.
func TestSourceSkipsRedeliveriesAfterReconnect(t *testing.T) {
	topic := uniqueName(t, "t")
	px := newProxy(t)
	cfg := sourceConfig(t, uniqueName(t, "src"), topic)
	cfg.Port = px.port()
	in := buildInput(t, cfg)
	s := openSource(t, in, 0, 1)
	_, payloads := rowsOf(6, 1)
	publish(t, topic, 1, payloads...)
	bs := readBatches(t, s, 6)
	px.cut()
	// The broker delivers the six again after the reconnect; a message
	// published after them is read, once.
	publish(t, topic, 1, []byte("after"))
	more := readBatches(t, s, 1)
	if got := strings.Join(column(t, more, RawValueColumn), ","); got != "after" {
		t.Fatalf("after the reconnect: read %q, want only the new message", got)
	}
	if n, k := s.redelivered.Load(), s.skipped.Load(); n != 6 || k != 6 {
		t.Fatalf("%d redeliveries, %d skipped; want 6 and 6", n, k)
	}
	if n := s.connects.Load(); n < 2 {
		t.Fatalf("%d connects, want a reconnect", n)
	}
	for _, b := range append(bs, more...) {
		b.Ack(nil)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, openSource(t, in, 0, 1))
}
