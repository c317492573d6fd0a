package walog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/corruption"
)

// ManifestVersion is the manifest format this package reads and writes:
// ArkFlow's version 2.
const ManifestVersion = 2

// Manifest is the document an object-store log keeps at
// {prefix}/{node_id}/{stream}/manifest.json. The fields up to
// SealedSegments are ArkFlow's version 2 manifest, with the same JSON
// names; CursorMeta and SegmentSeqs are this package's extensions, which
// ArkFlow ignores (and which this package does without when reading a
// manifest ArkFlow wrote).
//
// The manifest is an index and a cursor, not the only record of the data:
// segments are immutable objects that are durable once their PUT returns,
// and recovery takes the union of the segments the manifest names and the
// ones a LIST of segments/ finds.
type Manifest struct {
	// Version is always ManifestVersion.
	Version int `json:"version"`
	// NodeID and StreamID name the namespace the manifest belongs to.
	NodeID   string `json:"node_id"`
	StreamID string `json:"stream_id"`
	// Cursor is the highest contiguous acknowledged sequence number:
	// every entry at or below it has been handled and is never replayed.
	//
	// Unlike ArkFlow, which clamps its cursor to MaxSealedSeq, the cursor
	// may exceed MaxSealedSeq: in the periodic and none sync modes an
	// entry can be acknowledged before its segment is PUT, and the cursor
	// then covers sequence numbers that were never stored. A reopened log
	// continues after max(Cursor, MaxSealedSeq), so they are not reused.
	Cursor uint64 `json:"cursor"`
	// MaxSealedSeq is the highest sequence number in any segment the
	// writer had PUT when it wrote the manifest.
	MaxSealedSeq uint64 `json:"max_sealed_seq"`
	// ActiveSegment names the newest segment object, which is sealed like
	// every other (as in ArkFlow, it is not an open buffer). Empty when
	// there is no segment.
	ActiveSegment string `json:"active_segment,omitempty"`
	// ActiveSegmentCompression is ArkFlow's field; segments are never
	// compressed, so it is empty or "none".
	ActiveSegmentCompression string `json:"active_segment_compression,omitempty"`
	// SealedSegments names the older segments, "%08d.wal" each.
	SealedSegments []string `json:"sealed_segments"`

	// CursorMeta (extension) is the meta stored with the cursor (see
	// Options.CursorMeta); base64 in the JSON.
	CursorMeta []byte `json:"cursor_meta,omitempty"`
	// SegmentSeqs (extension) maps a segment name to the sequence numbers
	// it holds, so that recovery need not read segments wholly at or
	// below the cursor (kept with Retain, or not yet deleted). A segment
	// without an entry here (an empty one, or any segment of a manifest
	// ArkFlow wrote) is read.
	SegmentSeqs map[string]SeqRange `json:"segment_seqs,omitempty"`
}

// SeqRange is the first and last sequence number in a segment.
type SeqRange struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// DecodeManifest parses and checks a manifest. Unknown fields are ignored
// (a newer writer may add some); these are rejected:
//   - a version other than ManifestVersion;
//   - an empty node_id or stream_id;
//   - a segment name that is not "%08d.wal" (eight or more decimal
//     digits, no sign), or that appears twice (active_segment included);
//   - active_segment_compression other than "none";
//   - a segment_seqs entry for a segment the manifest does not name, one
//     with first 0 or first > last or last > max_sealed_seq, or ranges
//     that are not increasing in segment-index order.
//
// The cursor is not checked against max_sealed_seq: see Manifest.Cursor.
// Empty lists and maps decode as nil.
func DecodeManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, corruption.Mark(fmt.Errorf("wal: manifest is not valid JSON: %w", err))
	}
	if len(m.SealedSegments) == 0 {
		m.SealedSegments = nil
	}
	if len(m.CursorMeta) == 0 {
		m.CursorMeta = nil
	}
	if len(m.SegmentSeqs) == 0 {
		m.SegmentSeqs = nil
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Encode checks the manifest as DecodeManifest does and returns its JSON.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	c := *m
	if c.SealedSegments == nil {
		// ArkFlow always writes the list.
		c.SealedSegments = []string{}
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("wal: encoding manifest: %w", err)
	}
	return b, nil
}

func (m *Manifest) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("wal: manifest: "+format, args...))
	}
	if m.Version != ManifestVersion {
		bad("version %d is not supported (want %d)", m.Version, ManifestVersion)
	}
	if m.NodeID == "" {
		bad("node_id is empty")
	}
	if m.StreamID == "" {
		bad("stream_id is empty")
	}
	switch m.ActiveSegmentCompression {
	case "", "none":
	default:
		bad("active_segment_compression %q is not supported (segments are never compressed)", m.ActiveSegmentCompression)
	}
	index := map[string]uint64{}
	check := func(field, name string) {
		i, ok := parseObjectSegment(name)
		if !ok {
			bad("%s: %q is not a segment name (%%08d.wal)", field, name)
			return
		}
		if _, dup := index[name]; dup {
			bad("%s: segment %s appears twice", field, name)
			return
		}
		index[name] = i
	}
	for _, name := range m.SealedSegments {
		check("sealed_segments", name)
	}
	if m.ActiveSegment != "" {
		check("active_segment", m.ActiveSegment)
	}
	names := make([]string, 0, len(m.SegmentSeqs))
	for name, r := range m.SegmentSeqs {
		if _, ok := index[name]; !ok {
			bad("segment_seqs: %q is not a segment the manifest names", name)
			continue
		}
		switch {
		case r.First == 0:
			bad("segment_seqs: %s starts at sequence 0 (sequences start at 1)", name)
		case r.First > r.Last:
			bad("segment_seqs: %s has first %d > last %d", name, r.First, r.Last)
		case r.Last > m.MaxSealedSeq:
			bad("segment_seqs: %s ends at %d, past max_sealed_seq %d", name, r.Last, m.MaxSealedSeq)
		default:
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return index[names[i]] < index[names[j]] })
	for i := 1; i < len(names); i++ {
		prev, cur := m.SegmentSeqs[names[i-1]], m.SegmentSeqs[names[i]]
		if cur.First <= prev.Last {
			bad("segment_seqs: %s starts at %d, not after %s, which ends at %d", names[i], cur.First, names[i-1], prev.Last)
		}
	}
	return errors.Join(errs...)
}

const objectSegmentSuffix = ".wal"

// objectSegmentName is a segment object's name below segments/.
func objectSegmentName(index uint64) string {
	return fmt.Sprintf("%08d%s", index, objectSegmentSuffix)
}

// parseObjectSegment returns the index a segment name encodes, accepting
// only the spelling objectSegmentName produces.
func parseObjectSegment(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, objectSegmentSuffix)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || objectSegmentName(i) != name {
		return 0, false
	}
	return i, true
}
