package statestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/minio/crc64nvme"

	"github.com/arkflow-rs/arkflow-go/job"
)

// snapPopulate writes groups 0..127 of operators "a" and "bb", three keys
// a group, plus another job's entries.
func snapPopulate(t testing.TB, b Backend, now int64) int {
	var muts []Mutation
	for _, op := range []string{"a", "bb"} {
		for g := range 128 {
			for i := range 3 {
				exp := int64(0) // k0 never expires, k1 and k2 in 1 and 2 hours
				if i > 0 {
					exp = now + 3600_000*int64(i)
				}
				muts = append(muts, kvPut(Key{Job: "j", Operator: op, Namespace: "ns", KeyGroup: g, User: fmt.Appendf(nil, "k%d", i)},
					fmt.Sprintf("%s-%d-%d", op, g, i), exp))
			}
		}
	}
	muts = append(muts, kvPut(Key{Job: "other", Operator: "a", KeyGroup: 5, User: []byte("x")}, "y", 0))
	kvApply(t, b, muts...)
	return len(muts) - 1
}

func snapTake(t testing.TB, b Backend, scope Scope, now int64) ([]byte, SnapshotInfo) {
	t.Helper()
	var buf bytes.Buffer
	info, err := b.Snapshot(&buf, scope, now)
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != int64(buf.Len()) {
		t.Fatalf("info.Bytes %d, wrote %d", info.Bytes, buf.Len())
	}
	return buf.Bytes(), info
}

func TestSnapshotFormat(t *testing.T) {
	t.Parallel()
	now := kvNow()
	var snaps [][]byte
	for _, c := range kvCases() {
		b := c.open(t)
		n := snapPopulate(t, b, now)
		data, info := snapTake(t, b, Scope{Job: "j", Groups: job.KeyGroupRange{Start: 0, End: 127}}, now)
		b.Close()
		if info.Entries != int64(n) {
			t.Fatalf("%s: %d entries, want %d", c.name, info.Entries, n)
		}
		if !strings.HasPrefix(string(data), SnapshotMagic) {
			t.Fatal("no magic")
		}
		hlen := binary.BigEndian.Uint32(data[8:])
		var hdr map[string]any
		if err := json.Unmarshal(data[12:12+hlen], &hdr); err != nil {
			t.Fatal(err)
		}
		scope := hdr["scope"].(map[string]any)
		if hdr["format_version"] != 2.0 || hdr["created_at_ms"] != float64(now) || scope["job"] != "j" ||
			scope["groups"].(map[string]any)["end"] != 127.0 {
			t.Fatalf("header %s", data[12:12+hlen])
		}
		if want := objectCRC64(data); info.ObjectCRC64 != want {
			t.Fatalf("%s: ObjectCRC64 %s is not the CRC-64/NVME of the stream (%s)", c.name, info.ObjectCRC64, want)
		}
		tr := data[len(data)-trailerLenV2:]
		sum := crc64nvme.Checksum(data[:len(data)-trailerLenV2])
		if tr[0] != 2 || binary.BigEndian.Uint64(tr[1:]) != uint64(n) || binary.BigEndian.Uint64(tr[9:]) != sum {
			t.Fatal("bad trailer")
		}
		if info.Checksum != fmt.Sprintf("crc64nvme:%016x", sum) {
			t.Fatalf("checksum %s", info.Checksum)
		}
		snaps = append(snaps, data)
	}
	// Same state, same now: the same bytes from every backend.
	for i := range snaps {
		if !bytes.Equal(snaps[i], snaps[0]) {
			t.Fatalf("backend %d wrote different bytes", i)
		}
	}
}

// A snapshot of groups [0,127] restored with scope [s,e] holds exactly
// the groups [s,e], in every backend combination.
func TestSnapshotRestoreGroupRange(t *testing.T) {
	t.Parallel()
	now := kvNow()
	for _, src := range kvCases() {
		b := src.open(t)
		n := snapPopulate(t, b, now)
		data, info := snapTake(t, b, Scope{Job: "j", Groups: job.KeyGroupRange{Start: 0, End: 127}}, now)
		want := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)
		b.Close()
		for _, dst := range kvCases() {
			for _, r := range []job.KeyGroupRange{{Start: 0, End: 127}, {Start: 0, End: 0}, {Start: 37, End: 90}, {Start: 127, End: 127}, {Start: 64, End: 200}} {
				t.Run(fmt.Sprintf("%s-to-%s-%v", src.name, dst.name, r), func(t *testing.T) {
					d := dst.open(t)
					defer d.Close()
					ri, err := d.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: r}, now)
					if err != nil {
						t.Fatal(err)
					}
					hi := min(r.End, 127)
					inRange := (hi - r.Start + 1) * 6
					if ri.Entries != int64(inRange) || ri.Skipped != int64(n-inRange) || ri.Checksum != info.Checksum || ri.Bytes != int64(len(data)) {
						t.Fatalf("restore info %+v, want %d entries", ri, inRange)
					}
					got := kvScan(t, d, Scope{Job: "j", Groups: AllKeyGroups}, now)
					var wantHere []kvEntry
					for _, e := range want {
						if e.Group >= r.Start && e.Group <= r.End {
							wantHere = append(wantHere, e)
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(wantHere) {
						t.Fatalf("restored %d entries, want %d", len(got), len(wantHere))
					}
					if got := kvScan(t, d, Scope{Job: "other", Groups: AllKeyGroups}, now); len(got) != 0 {
						t.Fatal("another job's entries restored")
					}
				})
			}
		}
	}
}

func TestSnapshotScopes(t *testing.T) {
	t.Parallel()
	forEachKV(t, func(t *testing.T, b Backend) {
		now := kvNow()
		snapPopulate(t, b, now)
		// A snapshot of one operator's groups [10, 20].
		data, info := snapTake(t, b, Scope{Job: "j", Operator: "bb", Groups: job.KeyGroupRange{Start: 10, End: 20}}, now)
		if info.Entries != 11*3 {
			t.Fatalf("%d entries", info.Entries)
		}
		d := NewMemory()
		if _, err := d.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: AllKeyGroups}, now); err != nil {
			t.Fatal(err)
		}
		got := kvScan(t, d, Scope{Job: "j", Groups: AllKeyGroups}, now)
		if len(got) != 33 || got[0].Op != "bb" || got[0].Group != 10 || got[32].Group != 20 {
			t.Fatalf("restored %+v", got)
		}
		// Restoring one operator of a whole-job snapshot.
		data, _ = snapTake(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)
		d = NewMemory()
		ri, err := d.Restore(bytes.NewReader(data), Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, now)
		if err != nil || ri.Entries != 128*3 || ri.Skipped != 128*3 {
			t.Fatalf("%+v %v", ri, err)
		}
		// Another job's snapshot, or another operator's, is refused.
		if _, err := NewMemory().Restore(bytes.NewReader(data), Scope{Job: "k", Groups: AllKeyGroups}, now); err == nil || !strings.Contains(err.Error(), `job "j"`) {
			t.Fatalf("restore into another job: %v", err)
		}
		opData, _ := snapTake(t, b, Scope{Job: "j", Operator: "a", Groups: AllKeyGroups}, now)
		if _, err := NewMemory().Restore(bytes.NewReader(opData), Scope{Job: "j", Operator: "bb", Groups: AllKeyGroups}, now); err == nil {
			t.Fatal("restore of operator a into operator bb accepted")
		}
		// A failing writer fails the snapshot.
		if _, err := b.Snapshot(failWriter{}, Scope{Job: "j", Groups: AllKeyGroups}, now); err == nil {
			t.Fatal("snapshot to a failing writer succeeded")
		}
	})
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// The restore scope must be empty; disjoint group ranges of one job can
// be restored one after the other (tasks sharing a store).
func TestRestoreIntoNonEmptyScope(t *testing.T) {
	t.Parallel()
	forEachKV(t, func(t *testing.T, b Backend) {
		now := kvNow()
		src := NewMemory()
		snapPopulate(t, src, now)
		data, _ := snapTake(t, src, Scope{Job: "j", Groups: AllKeyGroups}, now)

		kvApply(t, b, kvPut(Key{Job: "j", Operator: "a", KeyGroup: 7, User: []byte("mine")}, "keep", 0))
		_, err := b.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: AllKeyGroups}, now)
		if err == nil || !strings.Contains(err.Error(), "already has entries") {
			t.Fatalf("restore into a non-empty scope: %v", err)
		}
		got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)
		if len(got) != 1 || got[0].Value != "keep" {
			t.Fatalf("the existing entries changed: %+v", got)
		}
		if _, err := b.Restore(bytes.NewReader(data), Scope{Job: "j", Operator: "a", Groups: job.KeyGroupRange{Start: 0, End: 63}}, now); err == nil {
			t.Fatal("restore into a non-empty operator range accepted")
		}
		// Groups [64,127] of the job are empty.
		if _, err := b.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: job.KeyGroupRange{Start: 64, End: 127}}, now); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: job.KeyGroupRange{Start: 100, End: 110}}, now); err == nil {
			t.Fatal("second restore of the same groups accepted")
		}
		if n := len(kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now)); n != 1+64*6 {
			t.Fatalf("%d entries", n)
		}
	})
}

// snapCorruptions returns named corruptions of a valid snapshot.
func snapCorruptions(data []byte) map[string][]byte {
	flip := func(off int) []byte {
		c := bytes.Clone(data)
		c[off] ^= 0x40
		return c
	}
	hlen := int(binary.BigEndian.Uint32(data[8:]))
	first := 12 + hlen
	end := len(data) - snapTrailerLen(data)
	return map[string][]byte{
		"magic":            flip(3),
		"header":           flip(14),
		"first record key": flip(first + 12),
		"record length":    flip(first + 3),
		"record kind":      flip(first),
		"middle record":    flip(first + (end-first)/2),
		"last record crc":  flip(end - 1),
		"trailer count":    flip(end + 8),
		"trailer checksum": flip(len(data) - 1),
		"trailer kind":     flip(end),
		"truncated header": data[:first-3],
		"truncated record": data[:first+(end-first)/2],
		"no trailer":       data[:end],
		"short trailer":    data[:len(data)-1],
		"extra byte":       append(bytes.Clone(data), 0),
		"empty":            nil,
	}
}

// snapTrailerLen is the trailer length of a stream's format version,
// read from its header: 41 bytes for version 1 (a SHA-256), 17 for 2 (a
// CRC-64).
func snapTrailerLen(data []byte) int {
	hlen := binary.BigEndian.Uint32(data[8:])
	var hdr struct {
		V int `json:"format_version"`
	}
	if json.Unmarshal(data[12:12+hlen], &hdr) == nil && hdr.V == 1 {
		return 1 + 8 + 32
	}
	return 1 + 8 + 8
}

// snapV1 rewrites a format-2 snapshot stream as format version 1 wrote
// it: the header's format_version 1 and a trailer carrying the SHA-256 of
// every byte before it.
func snapV1(data []byte) []byte {
	hlen := binary.BigEndian.Uint32(data[8:])
	hdr := bytes.Replace(data[12:12+hlen], []byte(`"format_version":2`), []byte(`"format_version":1`), 1)
	out := append(bytes.Clone(data[:12]), hdr...)
	out = append(out, data[12+hlen:len(data)-17]...)
	sum := sha256.Sum256(out)
	out = append(out, data[len(data)-17:len(data)-8]...) // kind and count
	return append(out, sum[:]...)
}

// A corrupt or truncated snapshot fails the restore and leaves the scope
// empty, even when the damage is found only at the end.
func TestRestoreCorruptSnapshot(t *testing.T) {
	t.Parallel()
	now := kvNow()
	src := NewMemory()
	snapPopulate(t, src, now)
	data, _ := snapTake(t, src, Scope{Job: "j", Groups: AllKeyGroups}, now)
	forEachKV(t, func(t *testing.T, b Backend) {
		kvApply(t, b, kvPut(Key{Job: "other", Operator: "a", User: []byte("x")}, "y", 0))
		bads := snapCorruptions(data)
		for name, bad := range snapCorruptions(snapV1(data)) {
			bads["v1 "+name] = bad
		}
		for name, bad := range bads {
			_, err := b.Restore(bytes.NewReader(bad), Scope{Job: "j", Groups: AllKeyGroups}, now)
			if err == nil {
				t.Fatalf("%s: restore succeeded", name)
			}
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Errorf("%s: the error does not wrap ErrCorruptSnapshot: %v", name, err)
			}
			if !strings.Contains(err.Error(), "offset") && !strings.HasSuffix(name, "header") {
				t.Errorf("%s: error does not name an offset: %v", name, err)
			}
			if got := kvScan(t, b, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 0 {
				t.Fatalf("%s: %d entries left after a failed restore", name, len(got))
			}
			if n, _ := b.Size("j", ""); n != 0 {
				t.Fatalf("%s: size %d after a failed restore", name, n)
			}
			t.Logf("%s: %.160s", name, err)
		}
		if got := kvScan(t, b, Scope{Job: "other", Groups: AllKeyGroups}, now); len(got) != 1 {
			t.Fatal("a failed restore touched another job")
		}
		// The intact stream still restores.
		ri, err := b.Restore(bytes.NewReader(data), Scope{Job: "j", Groups: AllKeyGroups}, now)
		if err != nil || ri.Entries != 128*6 {
			t.Fatalf("%+v %v", ri, err)
		}
	})
}

// Records are checked against the header, order included: a stream
// rewritten with valid CRCs and trailer but inconsistent content fails,
// in either format version, and so does a trailer of the other version's
// checksum.
func TestRestoreInconsistentStream(t *testing.T) {
	t.Parallel()
	now := kvNow()
	key := func(g int, u string) []byte {
		k, _ := keyEncode(nil, Key{Job: "j", Operator: "o", KeyGroup: g, User: []byte(u)})
		return k
	}
	// build writes a stream by hand; trailer is the trailer's checksum
	// format version.
	build := func(hdr string, trailer int, keys [][]byte, exp int64, count int) []byte {
		var b []byte
		b = append(b, SnapshotMagic...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(hdr)))
		b = append(b, hdr...)
		for _, k := range keys {
			start := len(b)
			b = append(b, 1)
			b = binary.BigEndian.AppendUint32(b, uint32(4+len(k)+4+1+8))
			b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
			b = append(b, k...)
			b = binary.BigEndian.AppendUint32(b, 1)
			b = append(b, 'v')
			b = binary.BigEndian.AppendUint64(b, uint64(exp))
			b = binary.BigEndian.AppendUint32(b, crcOf(b[start:]))
		}
		sha, crc := sha256.Sum256(b), crc64nvme.Checksum(b)
		b = append(b, 2)
		b = binary.BigEndian.AppendUint64(b, uint64(count))
		if trailer == 1 {
			return append(b, sha[:]...)
		}
		return binary.BigEndian.AppendUint64(b, crc)
	}
	for _, v := range []int{1, 2} {
		hdr := fmt.Sprintf(`{"format_version":%d,"created_at_ms":1,"scope":{"job":"j","operator":"o","groups":{"start":0,"end":10}}}`, v)
		ok := build(hdr, v, [][]byte{key(1, "a"), key(1, "b"), key(2, "a")}, 0, 3)
		m := NewMemory()
		if ri, err := m.Restore(bytes.NewReader(ok), Scope{Job: "j", Groups: AllKeyGroups}, now); err != nil || ri.Entries != 3 {
			t.Fatalf("hand-built stream of version %d: %+v %v", v, ri, err)
		}
		if got := kvScan(t, m, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 3 || string(got[1].User) != "b" {
			t.Fatalf("version %d: restored %v", v, got)
		}
		for name, bad := range map[string][]byte{
			"out of order":   build(hdr, v, [][]byte{key(1, "b"), key(1, "a")}, 0, 2),
			"duplicate":      build(hdr, v, [][]byte{key(1, "a"), key(1, "a")}, 0, 2),
			"outside groups": build(hdr, v, [][]byte{key(11, "a")}, 0, 1),
			"other operator": build(hdr, v, [][]byte{func() []byte {
				k, _ := keyEncode(nil, Key{Job: "j", Operator: "p", KeyGroup: 1})
				return k
			}()}, 0, 1),
			"negative expiry": build(hdr, v, [][]byte{key(1, "a")}, -1, 1),
			"bad key":         build(hdr, v, [][]byte{{1, 0, 1, 'j', 0, 9}}, 0, 1),
			"wrong count":     build(hdr, v, [][]byte{key(1, "a")}, 0, 2),
			"other trailer":   build(hdr, 3-v, [][]byte{key(1, "a")}, 0, 1),
			"version 3":       build(strings.Replace(hdr, fmt.Sprintf(`"format_version":%d`, v), `"format_version":3`, 1), v, nil, 0, 0),
			"version 0":       build(strings.Replace(hdr, fmt.Sprintf(`"format_version":%d`, v), `"format_version":0`, 1), v, nil, 0, 0),
			"unknown field":   build(strings.Replace(hdr, `"created_at_ms"`, `"x":1,"created_at_ms"`, 1), v, nil, 0, 0),
		} {
			m := NewMemory()
			if _, err := m.Restore(bytes.NewReader(bad), Scope{Job: "j", Groups: AllKeyGroups}, now); err == nil {
				t.Errorf("version %d, %s: accepted", v, name)
			} else if got := kvScan(t, m, Scope{Job: "j", Groups: AllKeyGroups}, now); len(got) != 0 {
				t.Errorf("version %d, %s: entries left", v, name)
			}
		}
	}
}

func crcOf(b []byte) uint32 {
	h := crc32cNew()
	h.Write(b)
	return h.Sum32()
}

func crc32cNew() hash.Hash32 { return crc32.New(crc32c) }
