package websocket

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Any frame either decodes into rows, one per non-blank line, or fails
// with an error after the rows of the lines before the bad one; the
// offsets count the rows; nothing panics.
func FuzzFrame(f *testing.F) {
	for _, seed := range []string{
		`{"user":"a","n":1}`, "{\"user\":\"a\",\"n\":1}\n{\"user\":\"b\",\"n\":2}\n", "\n\n", `{"n":"x"}`,
		`{"user":null,"n":9223372036854775807}`, "{\"user\":\"\\u00e9\"}\n{", `[1,2]`, "",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	in, err := newInput(SourceConfig{URL: "ws://x", Schema: userSchema}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, batch uint8) {
		cfg := in.cfg
		cfg.BatchSize = int(batch%8) + 1
		b, err := newRowBuilder(in)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		s := &source{in: &input{cfg: cfg, declared: in.declared, schema: in.schema}, b: b, tracker: connectors.NewTracker(""), next: 100}
		s.tracker.Start(0, 100)
		s.pend, s.pendAt = data, 1
		if len(data) == 0 {
			s.pend = nil
		}
		lines := 0
		for _, l := range bytes.Split(data, []byte{'\n'}) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		rows := 0
		for s.pend != nil && s.failed == nil {
			s.decodePending()
			bt, _ := s.batch()
			if bt.Record == nil {
				continue
			}
			if n := int(bt.Record.NumRows()); n > cfg.BatchSize {
				t.Fatalf("%d rows in a batch of %d", n, cfg.BatchSize)
			}
			offs := bt.Record.Column(4).(*array.Int64)
			for i := 0; i < offs.Len(); i++ {
				if offs.Value(i) != int64(100+rows+i) {
					t.Fatalf("offset %d for row %d", offs.Value(i), rows+i)
				}
			}
			rows += int(bt.Record.NumRows())
			bt.Record.Release()
		}
		if s.failed == nil && rows != lines {
			t.Fatalf("%d rows of %d lines without an error", rows, lines)
		}
		if s.failed != nil && rows >= lines {
			t.Fatalf("error %v after all %d lines", s.failed, lines)
		}
	})
}
