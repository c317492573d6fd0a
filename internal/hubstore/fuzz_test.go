package hubstore

import (
	"bytes"
	"testing"
)

// SpecDigest decodes specs the store did not write: it must never panic,
// and canonicalisation must be a fixed point with a stable digest.
func FuzzSpecDigest(f *testing.F) {
	for _, s := range []string{`{"id":"j","parallelism":1}`, ` { "b" : [1, 2.50e3, null, true], "a": {"z":"\u00e9<>&"} } `, `[]`, `"x"`, `1e999`, `{"a":1}{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d1, c1, err := SpecDigest(b)
		if err != nil {
			return
		}
		d2, c2, err := SpecDigest(c1)
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", c1, err)
		}
		if d1 != d2 || !bytes.Equal(c1, c2) {
			t.Fatalf("not a fixed point: %q -> %q", c1, c2)
		}
	})
}
