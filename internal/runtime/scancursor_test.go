package runtime

import (
	"bytes"
	"testing"
)

// A cursor decodes to what encoded it, and any other string is refused
// or decodes to some cursor, without panicking.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(0, nil))
	f.Add(encodeCursor(127, []byte("ann")))
	f.Add(encodeCursor(1<<20, []byte{0, 0xff}))
	f.Add("!!")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		g, k, err := decodeCursor(s)
		if err != nil {
			return
		}
		g2, k2, err := decodeCursor(encodeCursor(g, k))
		if err != nil || g2 != g || !bytes.Equal(k2, k) {
			t.Fatalf("%q: (%d, %x) round-trips to (%d, %x), %v", s, g, k, g2, k2, err)
		}
	})
}
