package nats

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// FuzzDecodePayload feeds message payloads from the network to the
// source's row builder, in both formats: it never panics; a payload that
// decodes adds exactly one row to every column, with the message's
// metadata, and one that does not adds nothing; a raw payload always
// decodes, to its own bytes.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"name":"a","ok":true,"f":1.5,"ts":"2026-12-01T10:00:00Z"}`,
		`{"id":9223372036854775807,"name":null}`, `{"id":-1,"f":"NaN","ts":1700000000000}`,
		`{}`, `[]`, `null`, ``, `{"id":1.5}`, `{"id":"1"}`, `{"name":"\ud800"}`, "{\"id\":1}\n{\"id\":2}", `{"id":1`,
	} {
		f.Add([]byte(s))
	}
	schema := connectors.Schema{
		{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}, {Name: "ok", Type: "bool"},
		{Name: "f", Type: "float64"}, {Name: "ts", Type: "timestamp"},
	}
	jsonIn, err := newInput(SourceConfig{URL: "n:1", Mode: SourceMode{Type: ModeRegular, Subject: "s"}, Schema: schema}, nil)
	if err != nil {
		f.Fatal(err)
	}
	rawIn, err := newInput(SourceConfig{URL: "n:1", Mode: SourceMode{Type: ModeRegular, Subject: "s"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range []*input{jsonIn, rawIn} {
			b, err := newRowBuilder(in)
			if err != nil {
				t.Fatal(err)
			}
			// A good row first, so that a bad payload after it is seen
			// to leave it alone.
			if err := b.add([]byte(`{"id":7}`), "src", 3, 41, "s.x", 5); err != nil && in == jsonIn {
				t.Fatal(err)
			}
			before := b.Rows
			err = b.add(data, "src", 3, 42, "s.y", -1)
			if in == rawIn && err != nil {
				t.Fatalf("a raw payload failed: %v", err)
			}
			if err == nil && b.Rows != before+1 || err != nil && b.Rows != before {
				t.Fatalf("rows %d after %d (error %v)", b.Rows, before, err)
			}
			rec := b.Take()
			b.Release()
			if rec == nil {
				continue
			}
			if want := before + boolInt(err == nil); int(rec.NumRows()) != want {
				t.Fatalf("a batch of %d rows, want %d", rec.NumRows(), want)
			}
			for i, c := range rec.Columns() {
				if c.Len() != int(rec.NumRows()) {
					t.Fatalf("column %d has %d values in a batch of %d rows", i, c.Len(), rec.NumRows())
				}
			}
			last := int(rec.NumRows()) - 1
			n := in.declared.NumFields()
			if err == nil {
				if off := rec.Column(n + 2).(*array.Int64).Value(last); off != 42 {
					t.Fatalf("offset %d of the decoded row", off)
				}
				if !rec.Column(n + 4).IsNull(last) {
					t.Fatal("a null timestamp was not null")
				}
				if in == rawIn && !bytes.Equal(rec.Column(0).(*array.Binary).Value(last), data) {
					t.Fatalf("raw value %q, want %q", rec.Column(0).(*array.Binary).Value(last), data)
				}
				if in == jsonIn && !json.Valid(data) {
					t.Fatalf("%q decoded but is not valid JSON", data)
				}
			}
			rec.Release()
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzMsgIDDistinct checks that distinct values make distinct message IDs
// (escapeID is injective, and a null is none of them), and that IDs hold
// only printable ASCII, as a header value must.
func FuzzMsgIDDistinct(f *testing.F) {
	for _, p := range [][2]string{{"a:b", "a%3Ab"}, {"%N", ""}, {"é", "\xc3\xa9x"}, {"a b", "a\tb"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ida, idb := string(escapeID(nil, a)), string(escapeID(nil, b))
		if a != b && ida == idb {
			t.Fatalf("%q and %q both escape to %q", a, b, ida)
		}
		for _, id := range []string{ida, idb} {
			if id == "%N" {
				t.Fatalf("a value escapes to the null marker")
			}
			for i := 0; i < len(id); i++ {
				if id[i] < '!' || id[i] > '~' {
					t.Fatalf("%q holds byte %#x", id, id[i])
				}
			}
		}
		// Within an ID, the parts stay apart: no escaped value holds ':'.
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		defer sb.Release()
		sb.Append(a)
		col := sb.NewStringArray()
		defer col.Release()
		if bytes.IndexByte(appendIDPart(nil, col, 0), ':') >= 0 {
			t.Fatalf("the ID part of %q holds ':'", a)
		}
	})
}

// FuzzParseAckReply checks the source's parser of JetStream reply
// subjects (bytes from the server) against a plain model of nats.go's
// rules: split on '.', 9 tokens or at least 11, "$JS.ACK." first.
func FuzzParseAckReply(f *testing.F) {
	for _, s := range []string{
		"$JS.ACK.S.c.1.42.7.1700000000000000000.3",
		"$JS.ACK._.HASH.S.c.2.42.7.1700000000000000000.3.tok",
		"$JS.ACK.dom.HASH.S.c.2.42.7.1700000000000000000.3",
		"$JS.ACK.S.c.1.4x.7.1.3", "$JS.ACK.S.c.1", "$JS.ACK.a.b.c.d.e.f.g.h.i.j", "_INBOX.x", "",
		"$JS.ACK.S.c.1.18446744073709551615.7.1.3",
	} {
		f.Add(s)
	}
	num := func(s string) uint64 {
		if s == "" {
			return 0
		}
		var n uint64
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0
			}
			n = n*10 + uint64(c-'0')
		}
		return n
	}
	f.Fuzz(func(t *testing.T, reply string) {
		got, ok := parseAckReply(reply)
		toks := strings.Split(reply, ".")
		wantOK := len(toks) >= 2 && toks[0] == "$JS" && toks[1] == "ACK" && (len(toks) == 9 || len(toks) >= 11)
		if ok != wantOK {
			t.Fatalf("%q: ok %v, want %v", reply, ok, wantOK)
		}
		if !ok {
			return
		}
		base := 2
		if len(toks) >= 11 {
			base = 4
		}
		want := ackInfo{streamSeq: num(toks[base+3]), tsNanos: num(toks[base+5]), pending: num(toks[base+6])}
		if got != want {
			t.Fatalf("%q: %+v, want %+v", reply, got, want)
		}
	})
}
