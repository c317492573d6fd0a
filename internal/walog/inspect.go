package walog

// This file reads a log without opening it: what a restart would recover
// (cursor, segments, the entries it would replay), through the same scans
// as recovery (scanLocal, objStorage.scan) but with nothing repaired,
// locked or created. It is what the public package wal's Inspect reports.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// Inspection describes one log as a restart would find it.
type Inspection struct {
	// Cursor is the persisted cursor and Meta the bytes stored with it
	// (Options.CursorMeta's).
	Cursor uint64
	Meta   []byte
	// Segments are the stored segments, oldest first.
	Segments []SegmentInfo
	// First and Last are the oldest and newest stored sequences (0 when
	// no entry is stored).
	First, Last uint64
	// Pending is the number of stored entries after the cursor: what a
	// restart replays.
	Pending int
	// Torn describes the newest segment's torn tail, which a restart cuts
	// off ("" when it ends cleanly). In a log a process is writing, it
	// may be a write in progress.
	Torn string
}

// SegmentInfo describes one stored segment.
type SegmentInfo struct {
	// Name is the file's name (a local log) or the object's key (an
	// object-store log).
	Name string
	// First and Last are its first and last sequences, and Entries their
	// number (0, 0 and 0 for an empty segment).
	First, Last uint64
	Entries     int
	// Bytes is its size, torn tail and stale records of a recycled file
	// included.
	Bytes int64
	// Passed is set when the cursor had passed every entry of it:
	// recovery does not read it, and it is deleted (or recycled) at the
	// next cursor save unless the log retains or holds it.
	Passed bool
	// Damage says why a passed segment does not decode (its entries are
	// those before the damage). Damage in a segment a restart reads fails
	// the inspection instead, as it fails the restart.
	Damage string
}

// InspectDir reads the local log in dir without opening it: no lock is
// taken (a log a process has open can be inspected, with what it wrote
// so far) and nothing is changed, not even a torn tail. The rules are
// recovery's, so InspectDir fails exactly where OpenDir would, with the
// same *CorruptError, and otherwise reports what OpenDir would recover.
// each, if not nil, is called with every stored entry, in sequence order
// (its Payload is valid only during the call); an error from it ends the
// inspection with that error.
func InspectDir(dir string, each func(Entry) error) (Inspection, error) {
	var in Inspection
	fi, err := os.Stat(dir)
	if err != nil {
		return in, fmt.Errorf("wal: %w", err)
	}
	if !fi.IsDir() {
		return in, fmt.Errorf("wal: %s is not a directory", dir)
	}
	c := cursorSlots{dir: dir}
	if in.Cursor, in.Meta, err = c.read(); err != nil {
		return in, err
	}
	segs, err := listSegments(dir)
	if err != nil {
		return in, err
	}
	var eachErr error
	sc, err := scanLocal(dir, segs, in.Cursor, func(first uint64, size int64, seg Segment, passed bool, derr error) {
		in.add(segName(first), size, seg, passed, derr)
		if eachErr == nil && each != nil {
			eachErr = eachEntry(seg, each)
		}
	})
	if err != nil {
		return Inspection{}, err
	}
	if eachErr != nil {
		return Inspection{}, eachErr
	}
	in.Torn = sc.torn
	in.countPending()
	return in, nil
}

// InspectObjects reads the object-store log of nodeID and stream under
// prefix ("" for none) in st, which holds bucket's objects, as
// InspectDir reads a local one: through recovery's rules, writing
// nothing (a torn tail is reported, not cut). ctx bounds every request.
func InspectObjects(ctx context.Context, st blob.Storage, bucket, prefix, nodeID, stream string, each func(Entry) error) (Inspection, error) {
	var in Inspection
	if nodeID == "" || stream == "" || strings.Contains(nodeID+stream, "/") {
		return in, fmt.Errorf("wal: node_id %q and stream %q must be non-empty, without '/'", nodeID, stream)
	}
	var base string
	if p := strings.Trim(prefix, "/"); p != "" {
		base = p + "/"
	}
	base += nodeID + "/" + stream + "/"
	s := &objStorage{st: st, bucket: bucket, base: base, nodeID: nodeID, stream: stream}
	var eachErr error
	sc, err := s.scan(ctx, func(index uint64, size int64, seg Segment, passed bool, derr error) {
		in.add(s.segKey(index), size, seg, passed, derr)
		if eachErr == nil && each != nil {
			eachErr = eachEntry(seg, each)
		}
	})
	if err != nil {
		return Inspection{}, err
	}
	if eachErr != nil {
		return Inspection{}, eachErr
	}
	if sc.man != nil {
		in.Cursor, in.Meta = sc.man.Cursor, sc.man.CursorMeta
	}
	if sc.torn != nil {
		in.Torn = sc.torn.seg.Torn
	}
	in.countPending()
	return in, nil
}

// add records a segment the scan read.
func (in *Inspection) add(name string, size int64, seg Segment, passed bool, derr error) {
	g := SegmentInfo{Name: name, Entries: len(seg.Entries), Bytes: size, Passed: passed}
	if derr != nil {
		g.Damage = derr.Error()
		var ce *CorruptError
		if errors.As(derr, &ce) {
			g.Damage = fmt.Sprintf("offset %d: %s", ce.Offset, ce.Reason)
		}
	}
	if n := len(seg.Entries); n > 0 {
		g.First, g.Last = seg.Entries[0].Seq, seg.Entries[n-1].Seq
		if in.First == 0 {
			in.First = g.First
		}
		in.Last = max(in.Last, g.Last)
	}
	in.Segments = append(in.Segments, g)
}

// countPending counts the stored entries after the cursor. A segment's
// entries have consecutive sequences (decoding checks it).
func (in *Inspection) countPending() {
	in.Pending = 0
	for _, g := range in.Segments {
		if g.Entries > 0 && g.Last > in.Cursor {
			in.Pending += int(g.Last - max(g.First-1, in.Cursor))
		}
	}
}

func eachEntry(seg Segment, each func(Entry) error) error {
	for _, e := range seg.Entries {
		if err := each(e); err != nil {
			return err
		}
	}
	return nil
}

// IsLogDir reports whether dir holds a local log: its lock file, a cursor
// slot or a segment.
func IsLogDir(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if name == lockName || slices.Contains(cursorSlotNames[:], name) || strings.HasSuffix(name, segSuffix) {
			return true
		}
	}
	return false
}

// FindLogDirs returns dir if it is a log (IsLogDir), else every log
// directory below it, sorted.
func FindLogDirs(dir string) ([]string, error) {
	if IsLogDir(dir) {
		return []string{dir}, nil
	}
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && IsLogDir(path) {
			out = append(out, path)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// Namespace is an object-store log found by FindNamespaces.
type Namespace struct {
	// Prefix, NodeID and Stream locate it: {Prefix}/{NodeID}/{Stream}/.
	Prefix, NodeID, Stream string
}

// FindNamespaces lists the object-store logs whose keys begin with prefix:
// every {p}/{node}/{stream}/ holding a manifest.json or a segments/ object,
// sorted. prefix may be a namespace's own prefix, or any prefix above it.
func FindNamespaces(ctx context.Context, st blob.Storage, bucket, prefix string) ([]Namespace, error) {
	prefix = strings.Trim(prefix, "/")
	list := prefix
	if list != "" {
		list += "/"
	}
	names, err := st.List(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("wal: LIST s3://%s/%s: %w", bucket, list, blob.Hint(err, bucket, blob.WALKeys))
	}
	seen := map[Namespace]bool{}
	var out []Namespace
	for _, name := range names {
		var base string
		switch {
		case strings.HasSuffix(name, "/"+manifestObject):
			base = strings.TrimSuffix(name, manifestObject)
		case strings.Contains(name, "/"+segmentsDir):
			i := strings.LastIndex(name, "/"+segmentsDir)
			if _, ok := parseObjectSegment(name[i+1+len(segmentsDir):]); !ok {
				continue
			}
			base = name[:i+1]
		default:
			continue
		}
		parts := strings.Split(strings.TrimSuffix(base, "/"), "/")
		if len(parts) < 2 {
			continue
		}
		ns := Namespace{Prefix: strings.Join(parts[:len(parts)-2], "/"), NodeID: parts[len(parts)-2], Stream: parts[len(parts)-1]}
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	slices.SortFunc(out, func(a, b Namespace) int {
		return strings.Compare(a.Prefix+"/"+a.NodeID+"/"+a.Stream, b.Prefix+"/"+b.NodeID+"/"+b.Stream)
	})
	return out, nil
}
