package push

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzDecodeKeyFile: the key log comes from disk. Any bytes decode, or
// fail as not a key log, without a panic; what decodes is a prefix of the
// input (good) whose records encode back to the same sums; and a valid
// log with any tail cut off decodes to a prefix of its records.
func FuzzDecodeKeyFile(f *testing.F) {
	a, b := SumOf("a"), SumOf("b")
	f.Add(encodeKeyFile(nil))
	f.Add(encodeKeyFile([]Sum{a}))
	f.Add(appendKeyRecord(encodeKeyFile([]Sum{a, b}), []Sum{b}))
	f.Add([]byte(keyMagic + "\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		sums, good, err := decodeKeyFile(data)
		if err != nil {
			return
		}
		if good > len(data) || (len(data) > 0 && good < len(keyMagic)) {
			t.Fatalf("good %d of %d bytes", good, len(data))
		}
		if len(data) == 0 {
			return
		}
		again, good2, err := decodeKeyFile(data[:good])
		if err != nil || good2 != good || !slices.Equal(again, sums) {
			t.Fatalf("the good prefix decodes to %d sums (good %d, %v), want %d (good %d)", len(again), good2, err, len(sums), good)
		}
		// The sums written whole read back the same.
		whole := encodeKeyFile(sums)
		back, n, err := decodeKeyFile(whole)
		if err != nil || n != len(whole) || !slices.Equal(back, sums) {
			t.Fatalf("re-encoded: %d sums, %d of %d bytes, %v", len(back), n, len(whole), err)
		}
		// A torn tail: every cut of a valid log reads as a prefix.
		for cut := len(keyMagic); cut < len(whole); cut += 1 + cut/3 {
			part, _, err := decodeKeyFile(whole[:cut])
			if err != nil || !bytes.Equal(sumBytes(part), sumBytes(sums[:len(part)])) {
				t.Fatalf("cut at %d: %d sums, %v; want a prefix of %d", cut, len(part), err, len(sums))
			}
		}
	})
}

func sumBytes(sums []Sum) []byte {
	var b []byte
	for _, s := range sums {
		b = append(b, s[:]...)
	}
	return b
}
