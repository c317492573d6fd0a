package walog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// An ArkFlow version 2 manifest as its object-store WAL writes it.
const arkflowManifest = `{"version":2,"node_id":"node-0","stream_id":"orders","cursor":41,"max_sealed_seq":57,` +
	`"active_segment":"00000003.wal","active_segment_compression":"none","sealed_segments":["00000001.wal","00000002.wal"]}`

func fullManifest() *Manifest {
	return &Manifest{
		Version:        ManifestVersion,
		NodeID:         "node-0",
		StreamID:       "orders",
		Cursor:         41,
		MaxSealedSeq:   57,
		ActiveSegment:  "00000003.wal",
		SealedSegments: []string{"00000001.wal", "00000002.wal"},
		CursorMeta:     []byte{0, 1, 2, 0xff},
		SegmentSeqs: map[string]SeqRange{
			"00000001.wal": {1, 20},
			"00000002.wal": {21, 40},
			"00000003.wal": {41, 57},
		},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	t.Parallel()
	m := fullManifest()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// The JSON field names are ArkFlow's, plus the two extensions.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "node_id", "stream_id", "cursor", "max_sealed_seq", "active_segment", "sealed_segments", "cursor_meta", "segment_seqs"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("encoded manifest lacks %q: %s", k, b)
		}
	}
	if string(raw["cursor_meta"]) != `"AAEC/w=="` {
		t.Errorf("cursor_meta = %s, want base64", raw["cursor_meta"])
	}
}

func TestManifestEncodeMinimal(t *testing.T) {
	t.Parallel()
	m := &Manifest{Version: ManifestVersion, NodeID: "n", StreamID: "s"}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// ArkFlow always writes sealed_segments; active_segment is omitted if
	// there is none, and so are empty extensions.
	want := `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"sealed_segments":[]}`
	if string(b) != want {
		t.Fatalf("Encode = %s\nwant %s", b, want)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: got %+v, want %+v", got, m)
	}
}

func TestManifestDecodeArkFlow(t *testing.T) {
	t.Parallel()
	m, err := DecodeManifest([]byte(arkflowManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Cursor != 41 || m.MaxSealedSeq != 57 || m.ActiveSegment != "00000003.wal" || len(m.SealedSegments) != 2 || m.SegmentSeqs != nil {
		t.Fatalf("decoded %+v", m)
	}
}

func TestManifestDecodeAccepts(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"unknown fields":          `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"sealed_segments":[],"future":{"x":1}}`,
		"cursor past max_sealed":  `{"version":2,"node_id":"n","stream_id":"s","cursor":9,"max_sealed_seq":3,"active_segment":"00000001.wal","sealed_segments":[]}`,
		"no sealed_segments":      `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0}`,
		"index zero":              `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"active_segment":"00000000.wal"}`,
		"nine digit index":        `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"active_segment":"123456789.wal"}`,
		"partial segment_seqs":    `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":9,"active_segment":"00000002.wal","sealed_segments":["00000001.wal"],"segment_seqs":{"00000002.wal":{"first":5,"last":9}}}`,
		"unsorted sealed":         `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"sealed_segments":["00000002.wal","00000001.wal"]}`,
		"empty compression field": `{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"active_segment_compression":""}`,
	} {
		if _, err := DecodeManifest([]byte(doc)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestManifestDecodeRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, doc, want string }{
		{"not json", `{"version":2`, "not valid JSON"},
		{"trailing data", `{"version":2,"node_id":"n","stream_id":"s"} {}`, "not valid JSON"},
		{"version 1", `{"version":1,"node_id":"n","stream_id":"s"}`, "version 1"},
		{"version 3", `{"version":3,"node_id":"n","stream_id":"s"}`, "version 3"},
		{"no version", `{"node_id":"n","stream_id":"s"}`, "version 0"},
		{"negative cursor", `{"version":2,"node_id":"n","stream_id":"s","cursor":-1}`, "not valid JSON"},
		{"empty node_id", `{"version":2,"node_id":"","stream_id":"s"}`, "node_id is empty"},
		{"missing stream_id", `{"version":2,"node_id":"n"}`, "stream_id is empty"},
		{"short name", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["1.wal"]}`, `"1.wal" is not a segment name`},
		{"upper-case suffix", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["00000001.WAL"]}`, "not a segment name"},
		{"hex name", `{"version":2,"node_id":"n","stream_id":"s","active_segment":"0000000a.wal"}`, "not a segment name"},
		{"path name", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["../00000001.wal"]}`, "not a segment name"},
		{"empty name", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":[""]}`, "not a segment name"},
		{"leading zero beyond eight digits", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["000000001.wal"]}`, "not a segment name"},
		{"duplicate sealed", `{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["00000001.wal","00000001.wal"]}`, "appears twice"},
		{"active also sealed", `{"version":2,"node_id":"n","stream_id":"s","active_segment":"00000001.wal","sealed_segments":["00000001.wal"]}`, "appears twice"},
		{"zstd", `{"version":2,"node_id":"n","stream_id":"s","active_segment_compression":"zstd"}`, "not supported"},
		{"range for unnamed segment", `{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":5,"segment_seqs":{"00000001.wal":{"first":1,"last":5}}}`, "not a segment the manifest names"},
		{"range from 0", `{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":5,"active_segment":"00000001.wal","segment_seqs":{"00000001.wal":{"first":0,"last":5}}}`, "sequence 0"},
		{"inverted range", `{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":5,"active_segment":"00000001.wal","segment_seqs":{"00000001.wal":{"first":5,"last":4}}}`, "first 5 > last 4"},
		{"range past max_sealed", `{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":5,"active_segment":"00000001.wal","segment_seqs":{"00000001.wal":{"first":1,"last":6}}}`, "past max_sealed_seq"},
		{"overlapping ranges", `{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":9,"active_segment":"00000002.wal","sealed_segments":["00000001.wal"],"segment_seqs":{"00000001.wal":{"first":1,"last":5},"00000002.wal":{"first":5,"last":9}}}`, "not after 00000001.wal"},
	} {
		_, err := DecodeManifest([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestManifestEncodeRefusesInvalid(t *testing.T) {
	t.Parallel()
	m := fullManifest()
	m.NodeID = ""
	if _, err := m.Encode(); err == nil || !strings.Contains(err.Error(), "node_id is empty") {
		t.Fatalf("Encode of a manifest without node_id: %v", err)
	}
}

func TestObjectSegmentName(t *testing.T) {
	t.Parallel()
	for _, i := range []uint64{0, 1, 99999999, 100000000, 1<<64 - 1} {
		got, ok := parseObjectSegment(objectSegmentName(i))
		if !ok || got != i {
			t.Errorf("parseObjectSegment(%q) = %d, %v", objectSegmentName(i), got, ok)
		}
	}
	for _, name := range []string{"", ".wal", "1.wal", "+0000001.wal", "-0000001.wal", "00000001", "00000001.wal.tmp", "18446744073709551616.wal"} {
		if _, ok := parseObjectSegment(name); ok {
			t.Errorf("parseObjectSegment(%q) accepted it", name)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	full, err := fullManifest().Encode()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(full),
		arkflowManifest,
		`{"version":2,"node_id":"n","stream_id":"s","cursor":0,"max_sealed_seq":0,"sealed_segments":[]}`,
		`{"version":2,"node_id":"n","stream_id":"s","cursor":9,"max_sealed_seq":3,"cursor_meta":"","segment_seqs":{}}`,
		`{"version":2,"node_id":"n","stream_id":"s","sealed_segments":["00000001.wal","00000001.wal"]}`,
		`{"version":2,"node_id":"n","stream_id":"s","max_sealed_seq":5,"active_segment":"00000001.wal","segment_seqs":{"00000001.wal":{"first":5,"last":4}}}`,
		`{"version":1}`,
		`{"version":2,"NODE_ID":"n","stream_id":"s","cursor_meta":"AA=="}`,
		`null`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			if m != nil {
				t.Fatalf("DecodeManifest returned a manifest with error %v", err)
			}
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v\ninput %q", err, b)
		}
		again, err := DecodeManifest(enc)
		if err != nil {
			t.Fatalf("re-encoded manifest is refused: %v\ninput %q\nencoded %s", err, b, enc)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the manifest:\n first %+v\nsecond %+v\ninput %q", m, again, b)
		}
		enc2, err := again.Encode()
		if err != nil || string(enc2) != string(enc) {
			t.Fatalf("encoding is not stable: %s vs %s (%v)", enc, enc2, err)
		}
	})
}
