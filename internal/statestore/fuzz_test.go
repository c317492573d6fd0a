package statestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/minio/crc64nvme"

	"github.com/arkflow-rs/arkflow-go/job"
)

// FuzzRestore feeds arbitrary bytes to the memory backend's Restore: it
// must not panic, a failed restore must leave the scope empty, and a
// restore that succeeds must have read a valid stream — magic, header and
// a trailer whose SHA-256 covers every byte before it — so garbage is never
// accepted.
func FuzzRestore(f *testing.F) {
	now := kvNow()
	src := NewMemory()
	snapPopulate(f, src, now)

	small, _ := snapTake(f, src, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 2}}, now)
	empty, _ := snapTake(f, NewMemory(), Scope{Job: "j", Groups: AllKeyGroups}, now)

	for _, seed := range [][]byte{small, empty, snapV1(small), snapV1(empty)} {
		f.Add(seed)
		for _, c := range snapCorruptions(seed) {
			f.Add(c)
		}
	}
	f.Add([]byte(SnapshotMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := NewMemory()
		scope := Scope{Job: "j", Groups: AllKeyGroups}
		info, err := b.Restore(bytes.NewReader(data), scope, now)
		var n int
		if serr := b.Scan(scope, now, func(Entry) error { n++; return nil }); serr != nil {
			t.Fatal(serr)
		}
		if err != nil {
			if n != 0 {
				t.Fatalf("failed restore left %d entries: %v", n, err)
			}
			return
		}
		if !fuzzValidStream(data) {
			t.Fatalf("accepted an invalid stream (%d bytes): %+v", len(data), info)
		}
		if int64(n) != info.Entries || info.Bytes != int64(len(data)) {
			t.Fatalf("restore info %+v, %d entries visible, %d bytes", info, n, len(data))
		}
	})
}

// fuzzValidStream checks a stream independently of the reader: magic,
// header length in bounds, and a trailer at the very end whose checksum
// covers every byte before it: a SHA-256 (format version 1) or a
// CRC-64/NVME (version 2).
func fuzzValidStream(data []byte) bool {
	if len(data) < 12 || string(data[:8]) != SnapshotMagic {
		return false
	}
	hlen := int(binary.BigEndian.Uint32(data[8:]))
	for _, n := range []int{1 + 8 + 32, 1 + 8 + 8} {
		if len(data) < 12+n || 12+hlen > len(data)-n {
			continue
		}
		tr, body := data[len(data)-n:], data[:len(data)-n]
		if tr[0] != snapKindEnd {
			continue
		}
		if n == 1+8+32 {
			if sum := sha256.Sum256(body); bytes.Equal(tr[9:], sum[:]) {
				return true
			}
		} else if binary.BigEndian.Uint64(tr[9:]) == crc64nvme.Checksum(body) {
			return true
		}
	}
	return false
}

// FuzzLayer feeds arbitrary bytes to the parse of a restored layer and
// reads the layer it gives over the same bytes: nothing may panic, only a
// valid stream is accepted, and every key the layer's cursor visits is
// found again by its lookup.
func FuzzLayer(f *testing.F) {
	now := kvNow()
	src := NewMemory()
	snapPopulate(f, src, now)
	small, _ := snapTake(f, src, Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 2}}, now)
	f.Add(small)
	for _, c := range snapCorruptions(small) {
		f.Add(c)
	}
	f.Add([]byte{})
	scope := Scope{Job: "j", Groups: AllKeyGroups}
	prefix, _ := keyJobPrefix("j")
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, info, err := parseLayer(bytes.NewReader(data), RestoreSource{Scope: scope}, prefix, now, nil)
		if err != nil {
			return
		}
		if !fuzzValidStream(data) || info.Bytes != int64(len(data)) {
			t.Fatalf("accepted an invalid stream (%d bytes): %+v", len(data), info)
		}
		l := newLayer(layerMeta{Scope: toSnapScope(scope)}, "fuzz", ix, data, nil)
		c := &layerCursor{l: l}
		n := int64(0)
		for c.seek(nil); c.valid(); c.next() {
			k := bytes.Clone(c.key())
			if _, _, found, err := l.get(k); err != nil || !found {
				t.Fatalf("key %x from the cursor: found %v, %v", k, found, err)
			}
			n++
		}
		if c.err != nil {
			t.Fatal(c.err)
		}
		if n != info.Entries+info.Skipped {
			t.Fatalf("cursor visited %d records, the parse saw %d", n, info.Entries+info.Skipped)
		}
	})
}
