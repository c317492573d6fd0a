package mqtt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// FuzzDecodePayload feeds message payloads from the network to the
// source's row builder, in both formats: it never panics; a payload that
// decodes adds exactly one row to every column, with the message's
// metadata and mark, and one that does not adds nothing; a raw payload
// always decodes, to its own bytes.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"name":"a","ok":true,"f":1.5,"ts":"2026-12-01T10:00:00Z"}`,
		`{"id":9223372036854775807,"name":null}`, `{"id":-1,"f":"NaN","ts":1700000000000}`,
		`{}`, `[]`, `null`, ``, `{"id":1.5}`, `{"id":"1"}`, `{"name":"\ud800"}`, "{\"id\":1}\n{\"id\":2}", `{"id":1`,
	} {
		f.Add([]byte(s), uint16(1))
	}
	schema := connectors.Schema{
		{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}, {Name: "ok", Type: "bool"},
		{Name: "f", Type: "float64"}, {Name: "ts", Type: "timestamp"},
	}
	jsonIn, err := newInput(SourceConfig{Host: "h", ClientID: "c", Topics: []string{"t"}, Schema: schema}, nil)
	if err != nil {
		f.Fatal(err)
	}
	rawIn, err := newInput(SourceConfig{Host: "h", ClientID: "c", Topics: []string{"t"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, pid uint16) {
		mk := markOf("t/y", data, pid)
		for _, in := range []*input{jsonIn, rawIn} {
			b, err := newRowBuilder(in)
			if err != nil {
				t.Fatal(err)
			}
			// A good row first, so that a bad payload after it is seen
			// to leave it alone.
			if err := b.add([]byte(`{"id":7}`), "src", 3, 41, "t/x", mark{}, false); err != nil && in == jsonIn {
				t.Fatal(err)
			}
			before := b.Rows
			err = b.add(data, "src", 3, 42, "t/y", mk, true)
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
				if got, ok := decodeMark(rec.Column(n + 4).(*array.Binary).Value(last)); !ok || got != mk {
					t.Fatalf("mark %+v, want %+v", got, mk)
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

// FuzzMarksFile loads arbitrary bytes as a file of redelivery marks: it
// never panics; a length that is not a multiple of 10 is an error, and
// otherwise every record is loaded, the last of a packet id winning, as a
// plain loop over the records says.
func FuzzMarksFile(f *testing.F) {
	f.Add([]byte{})
	f.Add(mark{pid: 1, hash: 2}.encode(mark{pid: 1, hash: 3}.encode(nil)))
	f.Add([]byte("123456789"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "KEYS")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		k := newMarks()
		err := k.open(path, slog.New(slog.DiscardHandler))
		if len(data)%10 != 0 {
			if err == nil {
				t.Fatalf("%d bytes loaded without an error", len(data))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint16]uint64{}
		for i := 0; i+10 <= len(data); i += 10 {
			want[binary.BigEndian.Uint16(data[i:])] = binary.BigEndian.Uint64(data[i+2:])
		}
		if len(k.accepted) != len(want) {
			t.Fatalf("%d marks loaded, want %d", len(k.accepted), len(want))
		}
		for pid, h := range want {
			if k.accepted[pid] != h {
				t.Fatalf("packet id %d: hash %x, want %x", pid, k.accepted[pid], h)
			}
		}
	})
}
