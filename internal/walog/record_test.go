package walog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// encodeRecords is the segment a log writes for payloads with consecutive
// sequences from first.
func encodeRecords(first uint64, payloads ...[]byte) []byte {
	var b []byte
	for i, p := range payloads {
		b = AppendRecord(b, first+uint64(i), p)
	}
	return b
}

func testPayloads() [][]byte {
	return [][]byte{
		[]byte("alpha"),
		{0}, // one zero byte
		bytes.Repeat([]byte{0xab}, 300),
		[]byte("delta"),
	}
}

func checkEntries(t *testing.T, got []Entry, first uint64, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Seq != first+uint64(i) {
			t.Errorf("entry %d: seq %d, want %d", i, e.Seq, first+uint64(i))
		}
		if !bytes.Equal(e.Payload, want[i]) {
			t.Errorf("entry %d (seq %d): payload %q, want %q", i, e.Seq, e.Payload, want[i])
		}
	}
}

// TestRecordLayout pins the byte layout shared with ArkFlow's object-store
// segments: seq u64 BE | len u32 BE | payload | crc32-IEEE(payload) u32 BE
// (both backends and ArkFlow decode the same records).
func TestRecordLayout(t *testing.T) {
	t.Parallel()
	got := AppendRecord([]byte("x"), 0x0102030405060708, []byte("hi"))
	want := []byte{'x', 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 2, 'h', 'i'}
	want = binary.BigEndian.AppendUint32(want, crc32.ChecksumIEEE([]byte("hi")))
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendRecord = % x, want % x", got, want)
	}
	if n := RecordSize(2); n != len(want)-1 {
		t.Fatalf("RecordSize(2) = %d, want %d", n, len(want)-1)
	}
}

// TestDecodeRoundTrip: what AppendRecord writes, DecodeSegment reads back,
// with or without a required first sequence.
func TestDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	ps := testPayloads()
	b := encodeRecords(7, ps...)
	for _, first := range []uint64{0, 7} {
		seg, err := DecodeSegment("s", b, first)
		if err != nil {
			t.Fatalf("first=%d: %v", first, err)
		}
		if seg.Torn != "" || seg.Intact != len(b) {
			t.Fatalf("first=%d: torn %q, intact %d of %d", first, seg.Torn, seg.Intact, len(b))
		}
		checkEntries(t, seg.Entries, 7, ps)
	}
	seg, err := DecodeSegment("s", nil, 1)
	if err != nil || len(seg.Entries) != 0 || seg.Intact != 0 || seg.Torn != "" {
		t.Fatalf("empty segment: %+v, %v", seg, err)
	}
}

// TestDecodeTornTail: a crash in the middle of a write leaves a torn last
// record. Each kind keeps the whole records before it and is not an error
// (recovery cuts the tail and replays the intact prefix).
func TestDecodeTornTail(t *testing.T) {
	t.Parallel()
	ps := testPayloads()
	good := encodeRecords(1, ps...)
	last := AppendRecord(nil, 5, []byte("the torn one"))
	badCRC := bytes.Clone(last)
	badCRC[len(badCRC)-1] ^= 0xff
	badBody := bytes.Clone(last)
	badBody[headerSize] ^= 0x01
	cases := []struct {
		name string
		tail []byte
	}{
		{"short header", last[:headerSize-1]},
		{"one byte", last[:1]},
		{"header only", last[:headerSize]},
		{"short body", last[:headerSize+3]},
		{"missing trailer", last[:len(last)-1]},
		{"bad crc on last record", badCRC},
		{"flipped payload bit on last record", badBody},
		{"zero-filled tail", make([]byte, 4096)},
		{"zero-filled, shorter than a header", make([]byte, 5)},
		{"torn record then zeros", append(bytes.Clone(last[:headerSize+2]), make([]byte, 100)...)},
		// A header torn after its sequence: length 0 and a checksum of 0
		// (the checksum of nothing) must not decode as an empty entry.
		{"sequence then zeros", append(bytes.Clone(last[:8]), make([]byte, 100)...)},
		{"zero-length record at the end", AppendRecord(nil, 5, nil)},
		// A torn record whose payload happens to hold a valid record, but
		// with a sequence its position rules out: still a tear.
		{"torn record holding a record of a far sequence", func() []byte {
			inner := AppendRecord(nil, 1000, []byte("nested"))
			return AppendRecord(nil, 5, append(bytes.Repeat([]byte{1}, 40), inner...))[:headerSize+40+len(inner)+2]
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := append(bytes.Clone(good), tc.tail...)
			seg, err := DecodeSegment("s", b, 1)
			if err != nil {
				t.Fatalf("torn tail reported as %v", err)
			}
			if seg.Torn == "" {
				t.Fatalf("torn tail not reported")
			}
			if seg.Intact != len(good) {
				t.Fatalf("intact prefix %d, want %d", seg.Intact, len(good))
			}
			checkEntries(t, seg.Entries, 1, ps)
		})
	}
	// A segment that is nothing but a torn record keeps nothing.
	seg, err := DecodeSegment("s", last[:7], 5)
	if err != nil || seg.Torn == "" || seg.Intact != 0 || len(seg.Entries) != 0 {
		t.Fatalf("lone torn record: %+v, %v", seg, err)
	}
}

// TestDecodeCorrupt: damage that a crash cannot explain (a bad record with
// more data after it, a sequence out of order) is a *CorruptError naming
// the segment and the offset of the bad record, never silently dropped.
func TestDecodeCorrupt(t *testing.T) {
	t.Parallel()
	ps := testPayloads()
	good := encodeRecords(1, ps...)
	// Offset of record i.
	offs := []int{0}
	for _, p := range ps {
		offs = append(offs, offs[len(offs)-1]+RecordSize(len(p)))
	}
	// Out of order: 1, 2, then 4.
	ooo := AppendRecord(AppendRecord(AppendRecord(nil, 1, []byte("a")), 2, []byte("b")), 4, []byte("d"))
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x10
		return b
	}
	cases := []struct {
		name   string
		b      []byte
		first  uint64
		offset int
		reason string
	}{
		{"bad crc followed by a good record", flip(offs[2] + headerSize + 5), 1, offs[2], "checksum"},
		{"bad trailer followed by a good record", flip(offs[3] - 1), 1, offs[2], "checksum"},
		{"out-of-order seq", ooo, 0, 2 * RecordSize(1), "sequence 4 where 3 was expected"},
		{"first seq mismatch", encodeRecords(2, ps...), 1, 0, "sequence 2 where 1 was expected"},
		{"sequence zero", encodeRecords(0, []byte("z")), 0, 0, "sequence 0"},
		// A bad record in the middle that a valid record follows is damage,
		// even where a torn tail would look the same: a crash leaves no
		// valid record after a torn one.
		{"length runs past the end, a valid record follows", func() []byte {
			b := bytes.Clone(good)
			b[offs[1]+9] ^= 0x01 // length + 64 KiB
			return b
		}(), 1, offs[1], "a valid entry (sequence 3) follows at offset"},
		{"length runs past the end, a later valid record follows", func() []byte {
			b := bytes.Clone(good)
			b[offs[1]+9] ^= 0x01
			b[offs[2]+headerSize] ^= 0x01 // record 3 is bad as well
			return b
		}(), 1, offs[1], "a valid entry (sequence 4) follows at offset"},
		{"zeros in the middle, a valid record follows", func() []byte {
			b := bytes.Clone(good)
			clear(b[offs[1]+8 : offs[2]])
			return b
		}(), 1, offs[1], "length 0"},
		{"length swallows the rest of the segment, valid records inside", func() []byte {
			b := bytes.Clone(good)
			binary.BigEndian.PutUint32(b[offs[1]+8:], uint32(len(b)-offs[1]-headerSize-trailerSize))
			return b
		}(), 1, offs[1], "fails its checksum, but a valid entry (sequence 3) follows"},
		{"length 0 followed by data", func() []byte {
			b := bytes.Clone(good)
			copy(b[offs[2]+8:], []byte{0, 0, 0, 0})
			return b
		}(), 1, offs[2], "length 0"},
		{"first record of unknown sequence runs past the end, a valid one follows", func() []byte {
			b := bytes.Clone(good)
			b[9] ^= 0x01
			return b
		}(), 0, 0, "a valid entry (sequence 2) follows"},
		{"length above the limit", func() []byte {
			b := bytes.Clone(good)
			binary.BigEndian.PutUint32(b[offs[1]+8:], MaxPayload+1)
			return b
		}(), 1, offs[1], "exceeds the limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := DecodeSegment("00000000000000000001.wal", tc.b, tc.first)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("got %+v, %v; want a *CorruptError", seg, err)
			}
			if ce.Segment != "00000000000000000001.wal" || ce.Offset != int64(tc.offset) {
				t.Fatalf("error names %s at %d, want offset %d", ce.Segment, ce.Offset, tc.offset)
			}
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("reason %q does not mention %q", ce.Reason, tc.reason)
			}
			if seg.Intact != tc.offset {
				t.Fatalf("intact %d, want %d", seg.Intact, tc.offset)
			}
			msg := err.Error()
			for _, part := range []string{"00000000000000000001.wal", "offset"} {
				if !strings.Contains(msg, part) {
					t.Fatalf("error %q does not mention %q", msg, part)
				}
			}
		})
	}
}

// checkSegmentInvariants is the fuzz oracle for DecodeSegment: whatever it
// accepts re-encodes to exactly the bytes of the intact prefix, so no
// garbage is ever accepted as an entry, and a torn tail is one a crash
// could have left.
func checkSegmentInvariants(t *testing.T, b []byte, first uint64) {
	seg, err := DecodeSegment("f", b, first)
	if seg.Intact < 0 || seg.Intact > len(b) {
		t.Fatalf("intact %d outside 0..%d", seg.Intact, len(b))
	}
	var re []byte
	for i, e := range seg.Entries {
		if e.Seq == 0 {
			t.Fatalf("accepted sequence 0")
		}
		if len(e.Payload) == 0 {
			t.Fatalf("accepted an empty entry (sequence %d)", e.Seq)
		}
		if i == 0 && first != 0 && e.Seq != first {
			t.Fatalf("first entry %d, want %d", e.Seq, first)
		}
		if i > 0 && e.Seq != seg.Entries[i-1].Seq+1 {
			t.Fatalf("entry %d follows %d", e.Seq, seg.Entries[i-1].Seq)
		}
		re = AppendRecord(re, e.Seq, e.Payload)
	}
	if !bytes.Equal(re, b[:seg.Intact]) {
		t.Fatalf("entries re-encode to %d bytes that differ from the intact prefix of %d", len(re), seg.Intact)
	}
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *CorruptError", err)
		}
		if ce.Offset != int64(seg.Intact) {
			t.Fatalf("corruption at %d, intact prefix %d", ce.Offset, seg.Intact)
		}
		if seg.Intact == len(b) {
			t.Fatalf("corruption reported with nothing after the intact prefix")
		}
		return
	}
	rest := b[seg.Intact:]
	if seg.Torn == "" {
		if len(rest) != 0 {
			t.Fatalf("%d bytes after the intact prefix, not reported torn", len(rest))
		}
		return
	}
	// A torn tail: zeros, a short header, a record running past the end,
	// or a whole last record failing its checksum or of length 0 ...
	torn := allZero(rest) || len(rest) < headerSize
	if !torn {
		n := int(binary.BigEndian.Uint32(rest[8:]))
		end := headerSize + n + trailerSize
		torn = end > len(rest) ||
			allZero(rest[end:]) && (n == 0 || crc32.ChecksumIEEE(rest[headerSize:headerSize+n]) != binary.BigEndian.Uint32(rest[headerSize+n:]))
	}
	if !torn {
		t.Fatalf("tail % x reported torn (%s) but a crash cannot leave it", rest[:min(len(rest), 32)], seg.Torn)
	}
	// ... and no valid record after it: not one whose sequence is the one
	// the torn record should have had, or a later one that fits between.
	next := first
	if n := len(seg.Entries); n > 0 {
		next = seg.Entries[n-1].Seq + 1
	}
	for p := seg.Intact + 1; p+headerSize < len(b); p++ {
		r := b[p:]
		seq, n := binary.BigEndian.Uint64(r), int(binary.BigEndian.Uint32(r[8:]))
		if n == 0 || headerSize+n+trailerSize > len(r) || crc32.ChecksumIEEE(r[headerSize:headerSize+n]) != binary.BigEndian.Uint32(r[headerSize+n:]) {
			continue
		}
		if seq >= max(next, 1) && (next == 0 || seq <= next+uint64((p-seg.Intact)/RecordSize(1))) {
			t.Fatalf("tail reported torn (%s), but a valid record of sequence %d follows at %d", seg.Torn, seq, p)
		}
	}
}

// FuzzDecodeSegment: no panics; every accepted entry re-encodes to exactly
// the input bytes of the intact prefix.
func FuzzDecodeSegment(f *testing.F) {
	good := encodeRecords(1, testPayloads()...)
	f.Add(good, uint8(1))
	f.Add(good, uint8(0))
	f.Add(good[:len(good)-3], uint8(1))
	f.Add(append(bytes.Clone(good), make([]byte, 64)...), uint8(1))
	f.Add(encodeRecords(3, []byte("x"), []byte("y")), uint8(3))
	f.Add(encodeRecords(0, []byte("x")), uint8(0))
	f.Add([]byte{}, uint8(1))
	corrupt := bytes.Clone(good)
	corrupt[20] ^= 1
	f.Add(corrupt, uint8(1))
	longer := bytes.Clone(good)
	longer[RecordSize(5)+9] ^= 1 // the second record's length, past the end
	f.Add(longer, uint8(1))
	f.Add(append(binary.BigEndian.AppendUint64(bytes.Clone(good), 5), make([]byte, 40)...), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, first uint8) {
		checkSegmentInvariants(t, b, uint64(first))
	})
}

// encodeCursor is the cursor slot format, written out independently of
// encodeCursorSlot: magic | generation u64 | cursor u64 BE | meta length
// u32 BE | meta | crc32.
func encodeCursor(gen, cursor uint64, meta []byte) []byte {
	b := []byte("AFWALCS1")
	b = binary.BigEndian.AppendUint64(b, gen)
	b = binary.BigEndian.AppendUint64(b, cursor)
	b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// TestCursorFile: the slots are written in turn in the documented format,
// a shorter record over a longer one leaves the tail ignored, DecodeCursor
// reads them back, and any damage is an error rather than a wrong cursor.
func TestCursorFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := cursorSlots{dir: dir}
	long := []byte(`{"partition":3,"offset":42,"more":"xxxxxxxxxxxxxxxx"}`)
	for i, meta := range [][]byte{long, nil, []byte(`{"p":1}`), nil} {
		gen := uint64(i + 1)
		if err := c.write(12345+uint64(i), meta); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, cursorSlotNames[gen%2]))
		if err != nil {
			t.Fatal(err)
		}
		want := encodeCursor(gen, 12345+uint64(i), meta)
		if !bytes.HasPrefix(b, want) {
			t.Fatalf("slot %d: % x, want prefix % x", gen%2, b, want)
		}
		g, cur, m, n, err := DecodeCursor(b)
		if err != nil || g != gen || cur != 12345+uint64(i) || !bytes.Equal(m, meta) || n != len(want) {
			t.Fatalf("DecodeCursor = %d, %d, %q, %d, %v", g, cur, m, n, err)
		}
		r := cursorSlots{dir: dir}
		if cur, m, err := r.read(); err != nil || cur != 12345+uint64(i) || !bytes.Equal(m, meta) || r.gen != gen {
			t.Fatalf("read = %d, %q, %v (gen %d), want %d", cur, m, err, r.gen, gen)
		}
		b = b[:n]
		for i := range b {
			d := bytes.Clone(b)
			d[i] ^= 0x04
			if _, _, _, _, err := DecodeCursor(d); err == nil {
				t.Fatalf("a flipped bit at %d was accepted", i)
			}
		}
		for k := range len(b) {
			if _, _, _, _, err := DecodeCursor(b[:k]); err == nil {
				t.Fatalf("a cursor record cut to %d bytes was accepted", k)
			}
		}
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range cursorSlotNames {
		if _, err := os.Stat(filepath.Join(dir, name+".tmp")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary cursor file left behind: %v", err)
		}
	}
}

// TestCursorTornSlot: a crash in the middle of overwriting a slot leaves it
// damaged; recovery takes the other slot (the previous generation), and the
// next write goes over the damaged one. Both damaged is an error.
func TestCursorTornSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := cursorSlots{dir: dir}
	for i := range 3 { // generations 1, 2, 3: slot 1 holds 3, slot 0 holds 2
		if err := c.write(uint64(10*(i+1)), []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	c.close()
	newest := filepath.Join(dir, cursorSlotNames[1])
	b, _ := os.ReadFile(newest)
	b[len(b)-6] ^= 0xff // torn: part of the new record on disk
	os.WriteFile(newest, b, 0o644)
	r := cursorSlots{dir: dir}
	if cur, _, err := r.read(); err != nil || cur != 20 || r.gen != 2 {
		t.Fatalf("read with the newest slot torn = %d, %v (gen %d), want 20 from generation 2", cur, err, r.gen)
	}
	if err := r.write(40, nil); err != nil {
		t.Fatal(err)
	}
	r.close()
	if b, _ := os.ReadFile(newest); !bytes.HasPrefix(b, encodeCursor(3, 40, nil)) {
		t.Fatalf("generation 3 did not go over the torn slot: % x", b)
	}
	r = cursorSlots{dir: dir}
	if cur, _, err := r.read(); err != nil || cur != 40 {
		t.Fatalf("read = %d, %v, want 40", cur, err)
	}
	for _, name := range cursorSlotNames {
		os.WriteFile(filepath.Join(dir, name), []byte("AFWALCS1 garbage garbage garbage"), 0o644)
	}
	r = cursorSlots{dir: dir}
	if _, _, err := r.read(); err == nil || !strings.Contains(err.Error(), "CURSOR.0") || !strings.Contains(err.Error(), "CURSOR.1") {
		t.Fatalf("both slots damaged: %v", err)
	}
}

// FuzzDecodeCursor: no panics; whatever is accepted re-encodes to exactly
// the accepted prefix of the input.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(1, 0, nil))
	f.Add(encodeCursor(2, 7, []byte("meta")))
	f.Add(append(encodeCursor(3, 1<<63, bytes.Repeat([]byte{0}, 40)), "stale tail"...))
	f.Add([]byte("AFWALCS1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, c, meta, n, err := DecodeCursor(b)
		if err != nil {
			if gen != 0 || c != 0 || meta != nil || n != 0 {
				t.Fatalf("error %v with generation %d, cursor %d, meta %q, n %d", err, gen, c, meta, n)
			}
			return
		}
		if re := encodeCursor(gen, c, meta); !bytes.Equal(re, b[:n]) {
			t.Fatalf("accepted % x, which re-encodes to % x", b[:n], re)
		}
	})
}
