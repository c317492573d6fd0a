package websocket

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	ws "github.com/coder/websocket"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

var userSchema = connectors.Schema{{Name: "user", Type: "string"}, {Name: "n", Type: "int64"}}

// rowsOf returns the user and n columns of batches, in order, as
// "user:n", and the offsets.
func rowsOf(t *testing.T, bs []connectors.Batch) (rows []string, offs []int64) {
	t.Helper()
	for _, b := range bs {
		rec := b.Record
		users := rec.Column(0).(*array.String)
		ns := rec.Column(1).(*array.Int64)
		off := rec.Column(int(rec.NumCols()) - 2).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, fmt.Sprintf("%s:%d", users.Value(i), ns.Value(i)))
			offs = append(offs, off.Value(i))
		}
	}
	return rows, offs
}

// Raw frames, text and binary, are one row each, bytes as sent (an empty
// frame an empty value); a JSON frame holds one object or NDJSON lines,
// blank lines between them ignored.
func TestFrames(t *testing.T) {
	srv := newServer(t, false, nil)
	raw := openSource(t, buildInput(t, SourceConfig{URL: srv.url()}), 0, 1)
	want := [][]byte{[]byte("text ✓"), {0, 1, 2, 255}, {}}
	srv.send(t, ws.MessageText, want[0])
	srv.send(t, ws.MessageBinary, want[1], want[2])
	var got [][]byte
	for _, b := range readN(t, raw, 3) {
		vals := b.Record.Column(0).(*array.Binary)
		for i := 0; i < vals.Len(); i++ {
			if vals.IsNull(i) {
				t.Errorf("row %d is null", len(got))
			}
			got = append(got, append([]byte{}, vals.Value(i)...))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("raw rows %v, want %v", got, want)
	}
	_ = raw.Close(context.Background())
	srv.waitJoined(t, 1)

	in := buildInput(t, SourceConfig{URL: srv.url(), Schema: userSchema, BatchSize: 2})
	js := openSource(t, in, 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"a","n":1}`), []byte("{\"user\":\"b\",\"n\":2}\n\n{\"user\":\"c\",\"n\":3}\n"))
	srv.send(t, ws.MessageBinary, []byte(`{"user":"d","n":4}`))
	bs := readN(t, js, 4)
	for _, b := range bs {
		if b.Record.NumRows() > 2 {
			t.Errorf("a batch of %d rows; batch_size 2", b.Record.NumRows())
		}
	}
	rows, offs := rowsOf(t, bs)
	if fmt.Sprint(rows) != "[a:1 b:2 c:3 d:4]" {
		t.Errorf("rows %v", rows)
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] != offs[i-1]+1 {
			t.Errorf("offsets %v are not consecutive", offs)
		}
	}
}

// A lost connection is opened again; rows sent after it are read, the
// offsets go on, and the metrics tell.
func TestReconnects(t *testing.T) {
	srv := newServer(t, false, nil)
	in := buildInput(t, SourceConfig{URL: srv.url(), Schema: userSchema, Reconnect: &Reconnect{InitialMS: 10, MaxMS: 50}})
	s := openSource(t, in, 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"a","n":1}`))
	before, offs1 := rowsOf(t, readN(t, s, 1))
	srv.dropAll()
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"b","n":2}`))
	after, offs2 := rowsOf(t, readN(t, s, 1))
	if fmt.Sprint(before, after) != "[a:1] [b:2]" {
		t.Errorf("rows %v then %v", before, after)
	}
	if offs2[0] <= offs1[0] {
		t.Errorf("offset %d after the reconnection, %d before", offs2[0], offs1[0])
	}
	m := map[string]float64{}
	for _, x := range s.Metrics() {
		m[x.Name] = x.Value
	}
	if m[MetricReconnects] != 1 || m[MetricConnected] != 1 {
		t.Errorf("metrics %v, want 1 reconnection and connected", m)
	}
}

// A frame that does not decode fails the source after the rows before
// it, naming its offset and the field; nothing is skipped.
func TestBadFrameFailsTheSource(t *testing.T) {
	srv := newServer(t, false, nil)
	s := openSource(t, buildInput(t, SourceConfig{URL: srv.url(), Schema: userSchema}), 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageText, []byte(`{"user":"a","n":1}`), []byte(`{"user":"b","n":2}`), []byte(`{"user":"c","n":"three"}`), []byte(`{"user":"d","n":4}`))
	deadline := time.Now().Add(30 * time.Second)
	var rows []string
	var err error
	for err == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var b connectors.Batch
		b, err = s.Read(ctx)
		cancel()
		if b.Record != nil {
			r, _ := rowsOf(t, []connectors.Batch{b})
			rows = append(rows, r...)
			b.Record.Release()
		}
	}
	if fmt.Sprint(rows) != "[a:1 b:2]" {
		t.Errorf("rows before the error %v, want [a:1 b:2]", rows)
	}
	if err == nil || !strings.Contains(err.Error(), "offset") || !strings.Contains(err.Error(), `"n"`) {
		t.Fatalf("error %v, want one naming the offset and the field n", err)
	}
	if _, again := s.Read(context.Background()); again == nil || again.Error() != err.Error() {
		t.Errorf("next Read: %v, want the same error", again)
	}
}

// A frame over max_message_bytes fails the source, naming the key.
func TestFrameTooLarge(t *testing.T) {
	srv := newServer(t, false, nil)
	s := openSource(t, buildInput(t, SourceConfig{URL: srv.url(), MaxMessageBytes: 16}), 0, 1)
	srv.waitJoined(t, 1)
	srv.send(t, ws.MessageBinary, []byte("0123456789abcdef"), []byte("0123456789abcdefg"))
	got := readN(t, s, 1)
	if n := got[0].Record.NumRows(); n != 1 {
		t.Fatalf("%d rows, want the 16-byte frame", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.Read(ctx)
	if err == nil || !strings.Contains(err.Error(), "max_message_bytes (16 bytes)") {
		t.Fatalf("Read: %v, want the frame over max_message_bytes", err)
	}
}

// headers go with the handshake; only subtask 0 connects.
func TestHeadersAndSubtasks(t *testing.T) {
	srv := newServer(t, false, nil)
	in := buildInput(t, SourceConfig{URL: srv.url(), Headers: map[string]string{"Authorization": "Bearer t0k"}})
	openSource(t, in, 0, 2)
	s1 := openSource(t, in, 1, 2)
	srv.waitJoined(t, 1)
	if h := <-srv.headers; h.Get("Authorization") != "Bearer t0k" {
		t.Errorf("Authorization %q", h.Get("Authorization"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s1.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("subtask 1 Read: %v", err)
	}
	select {
	case <-srv.joined:
		t.Error("subtask 1 connected too")
	default:
	}
}

// Connect fails, naming the URL, when nothing listens or the server
// refuses the handshake.
func TestConnectFails(t *testing.T) {
	srv := newServer(t, false, nil)
	url := srv.url()
	srv.Close()
	in := buildInput(t, SourceConfig{URL: url, Timeout: 2})
	s, _ := in.NewSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err := s.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), url) {
		t.Errorf("Connect to a closed server: %v", err)
	}
	_ = s.Close(context.Background())
	if err := s.Connect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Connect after Close: %v", err)
	}
}
