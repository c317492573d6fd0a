package walog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func recycled(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for name := range dirFiles(t, dir) {
		if strings.HasPrefix(name, recyclePrefix) {
			out = append(out, name)
		}
	}
	return out
}

// Segments the cursor passed are kept (at most maxRecycled) and the next
// segments are written over them in place; a recycled segment holds the
// old records past the new ones, and reopening and replaying reads the
// new ones only.
func TestRecycledSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := LocalOptions{SegmentBytes: 4 * int64(RecordSize(len(payloadOf(10))))}
	l := mustOpen(t, dir, opts)
	fill(t, l, 1, 40) // 10 segments of 4
	for seq := uint64(1); seq <= 40; seq++ {
		if err := l.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := recycled(t, dir); len(got) != maxRecycled {
		t.Fatalf("recycle files after the cursor passed 9 segments: %v, want %d", got, maxRecycled)
	}
	// The next segments take the recycled files: shorter entries, so the
	// old records remain past them.
	for seq := uint64(41); seq <= 46; seq++ {
		if _, err := l.Append(t.Context(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	fill2 := func(from, to uint64) {
		for seq := from; seq <= to; seq++ {
			if s, err := l.Append(t.Context(), payloadOf(seq)[:5]); err != nil || s != seq {
				t.Fatalf("append %d: %d, %v", seq, s, err)
			}
		}
	}
	fill2(47, 80)
	if got := recycled(t, dir); len(got) != 0 {
		t.Fatalf("recycle files left after rotations: %v, want none", got)
	}
	var stale int
	for name, b := range dirFiles(t, dir) {
		if strings.HasSuffix(name, segSuffix) && bytes.Contains(b, []byte("payload of entry")) {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no segment holds old records: none was recycled")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	defer l.Close()
	if l.Cursor() != 40 || l.Last() != 80 {
		t.Fatalf("reopened: cursor %d, last %d; want 40, 80", l.Cursor(), l.Last())
	}
	r, err := l.Replay()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := uint64(41)
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		if e.Seq != want {
			t.Fatalf("replayed %d, want %d", e.Seq, want)
		}
		if want >= 47 && !bytes.Equal(e.Payload, payloadOf(want)[:5]) {
			t.Fatalf("entry %d: %q", want, e.Payload)
		}
		want++
	}
	if want != 81 {
		t.Fatalf("replay ended before %d, want 81", want)
	}
}

// A segment whose entries end early is damage when the next segment does
// not start right after them, recycled or not; and a recycled segment's
// stale records never continue the log.
func TestRecycledSegmentDecoding(t *testing.T) {
	t.Parallel()
	rec := func(seq uint64, p string) []byte {
		return AppendRecord(nil, seq, []byte(p))
	}
	var b []byte
	b = append(b, rec(10, "new ten")...)
	b = append(b, rec(11, "new eleven")...)
	b = append(b, rec(3, "old three, a stale record")...)
	b = append(b, rec(4, "old four")...)
	seg, err := DecodeRecycledSegment("s", b, 10)
	if err != nil || len(seg.Entries) != 2 || seg.Torn == "" || seg.Intact != len(rec(10, "new ten"))+len(rec(11, "new eleven")) {
		t.Fatalf("recycled: %d entries, torn %q at %d, %v", len(seg.Entries), seg.Torn, seg.Intact, err)
	}
	if _, err := DecodeSegment("s", b, 10); err == nil {
		t.Fatal("the strict decoder took a stale record")
	}
	// Damage inside the log: a valid later entry follows the bad one.
	bad := append([]byte(nil), b[:len(rec(10, "new ten"))]...)
	broken := rec(11, "new eleven")
	broken[len(broken)-1] ^= 1
	bad = append(bad, broken...)
	bad = append(bad, rec(12, "new twelve")...)
	var ce *CorruptError
	if _, err := DecodeRecycledSegment("s", bad, 10); !errors.As(err, &ce) {
		t.Fatalf("damage followed by entry 12: %v, want a *CorruptError", err)
	}
	// A stale tail of garbage (the middle of an old record) ends the log.
	junk := append(append([]byte(nil), rec(10, "new ten")...), bytes.Repeat([]byte{0xa5}, 100)...)
	if seg, err := DecodeRecycledSegment("s", junk, 10); err != nil || len(seg.Entries) != 1 {
		t.Fatalf("garbage tail: %d entries, %v", len(seg.Entries), err)
	}
}

// With NoRecycle, passed segments are deleted.
func TestNoRecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := LocalOptions{SegmentBytes: 4 * int64(RecordSize(len(payloadOf(10)))), NoRecycle: true}
	l := mustOpen(t, dir, opts)
	defer l.Close()
	fill(t, l, 1, 20)
	for seq := uint64(1); seq <= 20; seq++ {
		l.Ack(seq)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := recycled(t, dir); len(got) != 0 {
		t.Fatalf("recycle files with NoRecycle: %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, segName(1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first segment is still there: %v", err)
	}
}

// FuzzDecodeRecycledSegment: no panic; the entries are first, first+1, …
// with the payloads of the records they were read from; and what the
// tolerant decoder accepts is exactly what the strict one reads from the
// intact prefix (it only decides where the log ends).
func FuzzDecodeRecycledSegment(f *testing.F) {
	good := encodeRecords(7, testPayloads()...)
	f.Add(good, uint8(7))
	f.Add(append(bytes.Clone(good), encodeRecords(2, []byte("stale"), []byte("older"))...), uint8(7))
	f.Add(append(bytes.Clone(good), bytes.Repeat([]byte{0x5a}, 70)...), uint8(7))
	f.Add(good[:len(good)-3], uint8(7))
	corrupt := bytes.Clone(good)
	corrupt[20] ^= 1
	f.Add(corrupt, uint8(7))
	f.Fuzz(func(t *testing.T, b []byte, first uint8) {
		if first == 0 {
			first = 1
		}
		seg, err := DecodeRecycledSegment("fuzz", b, uint64(first))
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CorruptError", err)
			}
			return
		}
		if seg.Intact < 0 || seg.Intact > len(b) {
			t.Fatalf("intact %d of %d bytes", seg.Intact, len(b))
		}
		for i, e := range seg.Entries {
			if e.Seq != uint64(first)+uint64(i) {
				t.Fatalf("entry %d has sequence %d, want %d", i, e.Seq, uint64(first)+uint64(i))
			}
		}
		strict, err := DecodeSegment("fuzz", b[:seg.Intact], uint64(first))
		if err != nil || strict.Torn != "" || len(strict.Entries) != len(seg.Entries) {
			t.Fatalf("the intact prefix decodes strictly as %d entries (torn %q, %v), the tolerant decoder read %d", len(strict.Entries), strict.Torn, err, len(seg.Entries))
		}
		for i := range seg.Entries {
			if !bytes.Equal(strict.Entries[i].Payload, seg.Entries[i].Payload) {
				t.Fatalf("entry %d differs", i)
			}
		}
	})
}
