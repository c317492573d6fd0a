package httpconn

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// FuzzDecodeBody feeds request bodies from the network to the json and
// ndjson decoders: they never panic; a body that decodes gives as many
// rows as a count made without them (non-blank lines; the elements of a
// JSON array, or one object), and one that does not gives none and leaves
// the decoder clean for the next body.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"name":"a","ok":true,"ts":"2026-12-01T10:00:00Z"}`,
		`[{"id":1},{"id":2,"name":null}]`, `[]`, ` [ ] `, `[{"id":1}] x`, `[{"id":1},]`, `[1]`,
		"{\"id\":1}\n\n{\"id\":2}\n", "{\"id\":1}\r\n{\"id\":2}", `{"id":1`, ``, `null`, `{"id":1.5}`, `{"name":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	schema, err := connectors.Schema{{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}, {Name: "ok", Type: "bool"}, {Name: "ts", Type: "timestamp"}}.Arrow("schema")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, format := range []string{FormatJSON, FormatNDJSON} {
			d, err := newBodyDecoder(format, schema)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := d.decode(body)
			if err == nil {
				if want, ok := countRows(format, body); ok && int(rec.NumRows()) != want {
					t.Fatalf("%s %q: %d rows, want %d", format, body, rec.NumRows(), want)
				}
				rec.Release()
			}
			good, err := d.decode([]byte(`{"id":7}`))
			if err != nil {
				t.Fatalf("%s: a good body after %q: %v", format, body, err)
			}
			if good.NumRows() != 1 || good.Column(0).(*array.Int64).Value(0) != 7 {
				t.Fatalf("%s: a good body after %q: %d rows", format, body, good.NumRows())
			}
			good.Release()
			d.release()
		}
	})
}

// countRows counts the rows of a body that decoded, without the decoder:
// ok is false when the count cannot be told simply.
func countRows(format string, body []byte) (int, bool) {
	if format == FormatNDJSON {
		n := 0
		for _, line := range bytes.Split(body, []byte{'\n'}) {
			if !rowjson.IsBlank(line) {
				n++
			}
		}
		return n, true
	}
	var elems []json.RawMessage
	if json.Unmarshal(body, &elems) == nil {
		return len(elems), true
	}
	return 1, true
}
