package arrowjson

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fuzzSep splits one fuzz input into the values of a batch.
const fuzzSep = 0x1e

var decodeSeeds = []string{
	`{"a":1,"b":10.0,"s":"x"}`,
	"{\"a\":1}\x1e{\"a\":2.5,\"b\":null}\x1e{\"c\":[1,null]}",
	`{"o":{"p":[{"q":true},null]},"e":[],"n":[null],"m":[[]]}`,
	"{\"a\":\"\\ud83d\\ude00\\n\"}\x1e{\"a\":-0,\"a\":1e400}",
	"{\"x\":1}\x1e{\"x\":\"s\"}",
	"[1]\x1e5\x1enull\x1e\x1e{}",
	`{"a":1} {"a":2}`,
	`{"big":18446744073709551615,"neg":-9223372036854775809}`,
	"{\"l\":[{\"a\":1},{\"b\":[1.5,2]}]}\x1e{\"l\":[]}\x1e{\"l\":null,\"s\":\"\\u0000\\\"\"}",
	"{\"a\":true,\"o\":{}}\x1e{\"a\":false,\"o\":{\"x\":{\"y\":[[1],[2,3]]}}}",
	" {\n\t\"a\" : 1e-400 , \"b\":[ ] }\r\n",
}

func splitValues(data []byte) [][]byte {
	return bytes.Split(data, []byte{fuzzSep})
}

func encodeOrFail(t *testing.T, rec arrow.RecordBatch) [][]byte {
	t.Helper()
	lines, err := Encode(rec, nil)
	if err != nil {
		t.Fatalf("a decoded record does not encode: %v\nschema %s", err, rec.Schema())
	}
	if int64(len(lines)) != rec.NumRows() {
		t.Fatalf("%d lines for %d rows", len(lines), rec.NumRows())
	}
	return lines
}

// FuzzDecode: decoding never panics nor leaks; Decode on a binary column
// agrees with DecodeValues; what decodes encodes, and encoding is stable
// under a further decode and encode.
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		vals := splitValues(data)
		rows := make([]int, len(vals))
		for i := range rows {
			rows[i] = i
		}
		got, err := decodeRows(mem, vals, rows, nil)
		viaRecord := decodeBinaryColumn(t, mem, vals)
		if (err == nil) != (viaRecord != nil) {
			t.Fatalf("DecodeValues error %v, Decode record %v", err, viaRecord)
		}
		if err != nil {
			return
		}
		defer got.Release()
		defer viaRecord.Release()
		if !array.RecordEqual(got, viaRecord) || !got.Schema().Equal(viaRecord.Schema()) {
			t.Fatalf("Decode and DecodeValues differ")
		}
		if got.NumRows() < int64(nonBlank(vals)) {
			t.Fatalf("%d rows from %d values that are not blank", got.NumRows(), nonBlank(vals))
		}
		first := encodeOrFail(t, got)
		again, err := decodeRows(mem, first, make([]int, len(first)), nil)
		if err != nil {
			t.Fatalf("encoded rows do not decode: %v\n%s", err, first)
		}
		defer again.Release()
		second := encodeOrFail(t, again)
		for i := range first {
			if !bytes.Equal(first[i], second[i]) {
				t.Fatalf("row %d: encoding not stable:\n%s\n%s", i, first[i], second[i])
			}
		}
		projected, err := decodeRows(mem, vals, rows, []string{"a", "o"})
		if err != nil {
			t.Fatalf("projection fails where the whole succeeds: %v", err)
		}
		projected.Release()
	})
}

// decodeBinaryColumn decodes vals through Decode on a binary __value__
// column, returning nil on error.
func decodeBinaryColumn(t *testing.T, mem memory.Allocator, vals [][]byte) arrow.RecordBatch {
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	b.AppendValues(vals, nil)
	col := b.NewArray()
	b.Release()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: DefaultValueField, Type: arrow.BinaryTypes.Binary}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(vals)))
	defer rec.Release()
	out, err := decode(mem, rec, "", nil)
	if err != nil {
		return nil
	}
	return out
}

// FuzzDecodeDebezium: decoding envelopes never panics nor leaks, and what
// decodes encodes.
func FuzzDecodeDebezium(f *testing.F) {
	for _, s := range []string{
		`{"before":null,"after":{"id":1,"name":"alice"},"op":"c","ts_ms":1700000000000,"source":{"db":"shop","table":"users"}}`,
		"{\"before\":{\"id\":1},\"after\":null,\"op\":\"d\",\"ts_ms\":1}\x1e\x1e{\"schema\":{},\"payload\":{\"after\":{\"id\":2},\"op\":\"c\"}}",
		`{"after":{"op":"x","before":[1.5e300,-0,18446744073709551616]},"source":"s"}`,
		"[]\x1enot json",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		rec, err := decodeDebezium(mem, splitValues(data))
		if err != nil {
			return
		}
		defer rec.Release()
		encodeOrFail(t, rec)
	})
}

// nonBlank counts the values that are not only whitespace: each gives at
// least one row.
func nonBlank(vals [][]byte) int {
	n := 0
	for _, v := range vals {
		if len(bytes.TrimSpace(v)) > 0 {
			n++
		}
	}
	return n
}
