package redis

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// FuzzDecodePayload feeds payloads from the network (stream entries, list
// elements, pub/sub messages) to the source's row builder, in both
// formats: it never panics; a payload that decodes adds exactly one row
// to every column, with the message's metadata, and one that does not
// adds nothing; a raw payload always decodes, to its own bytes.
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
	mode := Mode{Type: ModeSingle, URL: "redis://h:1"}
	rt := SourceType{Type: TypeStream, Streams: []string{"s"}, Group: "g"}
	jsonIn, err := newInput(SourceConfig{Mode: mode, RedisType: rt, Schema: schema}, nil)
	if err != nil {
		f.Fatal(err)
	}
	rawIn, err := newInput(SourceConfig{Mode: mode, RedisType: rt}, nil)
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
			if err := b.add([]byte(`{"id":7}`), "src", 3, 41, "s", 5); err != nil && in == jsonIn {
				t.Fatal(err)
			}
			before := b.Rows
			err = b.add(data, "src", 3, 42, "s", -1)
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
			want := before
			if err == nil {
				want++
			}
			if int(rec.NumRows()) != want {
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

// FuzzParseID checks the parser of stream entry IDs (from the server)
// against a plain model with big integers: MS-SEQ in decimal digits, MS
// below 2^43 and SEQ below 2^20, else an error; an accepted ID's offset
// formats back to the same numbers, and offsets order as the IDs do.
func FuzzParseID(f *testing.F) {
	for _, p := range [][2]string{
		{"0-0", "0-1"}, {"1700000000000-5", "1700000000000-6"}, {"1-1048575", "2-0"},
		{"1-1048576", "8796093022208-0"}, {"x-1", "12"}, {"-1", "1-"}, {"+1-2", "01-2"},
		{"18446744073709551615-18446744073709551615", "18446744073709551616-0"},
	} {
		f.Add(p[0], p[1])
	}
	model := func(id string) (ms, seq *big.Int, ok bool) {
		a, b, found := strings.Cut(id, "-")
		digits := func(s string) bool {
			if s == "" {
				return false
			}
			for _, c := range s {
				if c < '0' || c > '9' {
					return false
				}
			}
			return true
		}
		if !found || !digits(a) || !digits(b) {
			return nil, nil, false
		}
		ms, _ = new(big.Int).SetString(a, 10)
		seq, _ = new(big.Int).SetString(b, 10)
		if ms.BitLen() > 43 || seq.BitLen() > 20 {
			return nil, nil, false
		}
		return ms, seq, true
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		offs := make([]int64, 2)
		keys := make([]*big.Int, 2)
		for i, id := range []string{a, b} {
			off, err := parseID(id)
			ms, seq, ok := model(id)
			if ok != (err == nil) {
				t.Fatalf("parseID(%q): %d, %v; the model says ok=%v", id, off, err, ok)
			}
			if !ok {
				return
			}
			if back := formatID(off); back != ms.String()+"-"+seq.String() {
				t.Fatalf("parseID(%q) = %d, which formats as %q", id, off, back)
			}
			offs[i] = off
			keys[i] = new(big.Int).Add(new(big.Int).Lsh(ms, 64), seq)
		}
		if c := keys[0].Cmp(keys[1]); (offs[0] < offs[1]) != (c < 0) || (offs[0] == offs[1]) != (c == 0) {
			t.Fatalf("%q and %q: offsets %d and %d do not order as the IDs", a, b, offs[0], offs[1])
		}
	})
}
