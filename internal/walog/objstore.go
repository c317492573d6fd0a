package walog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/arkflow-rs/arkflow-go/internal/blob"
)

// Object-store defaults.
const (
	// DefaultObjectPrefix is where namespaces live in the bucket.
	DefaultObjectPrefix = "arkflow/wal"
	// DefaultObjectSegmentBytes bounds the bytes buffered in memory before
	// a write PUTs them as a segment without waiting for a sync.
	DefaultObjectSegmentBytes = 8 << 20
	// DefaultRequestTimeout bounds one object-store request (with the
	// client's own retries) made after the log is open.
	DefaultRequestTimeout = 30 * time.Second
)

// ErrConflict matches the error returned when another writer changed the
// log's namespace: the manifest changed under the log's compare-and-swap,
// or a segment index the log was about to use already holds other bytes.
// It means two processes use the same node_id and stream, which corrupts
// the log. Once seen, the log refuses further syncs and cursor saves.
var ErrConflict = errors.New("wal: another writer is using this object-store namespace")

const (
	manifestObject   = "manifest.json"
	segmentsDir      = "segments/"
	manifestAttempts = 8
	// unknownBodies bounds how many manifest bodies whose PUT outcome is
	// unknown are remembered (see objStorage.unknown).
	unknownBodies = 8
)

// ObjectStoreOptions configure a log in an S3-compatible object store.
type ObjectStoreOptions struct {
	Options
	// S3 is the bucket's endpoint, region, credentials and TLS (the
	// module's one S3 options type). Ignored when Client is set.
	S3 blob.Options
	// Bucket holds the log. Required; it must exist.
	Bucket string
	// Prefix is the key prefix of every namespace (default "arkflow/wal").
	// Leading and trailing slashes are ignored.
	Prefix string
	// NodeID names this writer's namespace, {Prefix}/{NodeID}/. Required.
	// It must be stable across restarts (a restarted process finds its
	// log by it) and unique among running processes: two writers with one
	// node_id corrupt each other's log, and an object store has no lock to
	// prevent it (see OpenObjectStore). It is unrelated to any Kafka
	// transactional_id.
	NodeID string
	// Stream names the log inside the node's namespace. Required.
	Stream string
	// Retain keeps segments the cursor has passed instead of deleting them
	// (for debugging; the manifest and the bucket then grow without bound).
	Retain bool
	// Client, if set, is used instead of a client built from S3. It is borrowed: the log
	// does not close it.
	Client *minio.Client
	// SegmentBytes bounds the in-memory buffer (default 8 MiB). When a
	// write fills it, the write PUTs it as a segment before returning,
	// whatever the sync mode; in the periodic and none modes this is what
	// bounds memory between syncs. A write is one entry, or in
	// group_commit mode one group of entries, so a segment may exceed
	// SegmentBytes by one group.
	SegmentBytes int64
	// RequestTimeout bounds each object-store request after the log is
	// open, including the client's retries (default 30s). Opening is
	// bounded by OpenObjectStore's ctx instead.
	RequestTimeout time.Duration
}

// validate checks the options, naming each field at fault.
func (o *ObjectStoreOptions) validate() error {
	var errs []error
	pathSegment := func(field, v string) {
		if strings.Contains(v, "/") || v == "." || v == ".." {
			errs = append(errs, fmt.Errorf("wal: ObjectStoreOptions.%s %q must not contain '/' or be '.' or '..' (it is one segment of the namespace's key prefix)", field, v))
		}
	}
	if o.NodeID == "" {
		errs = append(errs, errors.New("wal: ObjectStoreOptions.NodeID is required and must be non-empty (it names the WAL namespace in the bucket and must survive restarts)"))
	}
	pathSegment("NodeID", o.NodeID)
	if o.Stream == "" {
		errs = append(errs, errors.New("wal: ObjectStoreOptions.Stream is required and must be non-empty (it names the stream's log inside the node's namespace)"))
	}
	pathSegment("Stream", o.Stream)
	if o.Bucket == "" {
		errs = append(errs, errors.New("wal: ObjectStoreOptions.Bucket is required"))
	}
	if o.Client == nil {
		switch err := blob.Check(o.S3); {
		case errors.Is(err, blob.ErrSecretWithoutKey):
			errs = append(errs, errors.New("wal: ObjectStoreOptions.S3.SecretAccessKey is set but ObjectStoreOptions.S3.AccessKeyID is empty"))
		case err != nil:
			errs = append(errs, fmt.Errorf("wal: ObjectStoreOptions.S3.Endpoint: %w", err))
		}
	}
	if o.SegmentBytes < 0 {
		errs = append(errs, fmt.Errorf("wal: ObjectStoreOptions.SegmentBytes %d must not be negative", o.SegmentBytes))
	}
	if o.SegmentBytes > MaxPayload {
		errs = append(errs, fmt.Errorf("wal: ObjectStoreOptions.SegmentBytes %d exceeds the limit of %d", o.SegmentBytes, MaxPayload))
	}
	if err := o.Options.withDefaults(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// OpenObjectStore opens the log of opts.NodeID and opts.Stream in an
// S3-compatible object store, creating it on the first write.
// The bucket must exist. ctx bounds opening (recovery) only, not the log's
// lifetime. Like OpenDir, it starts a goroutine that persists the cursor;
// Close stops it.
//
// # Layout
//
// Everything lives under {Prefix}/{NodeID}/{Stream}/, ArkFlow's layout:
// segments/{index:08}.wal are immutable segment objects in the record
// format of this package, and manifest.json holds the cursor and the list
// of segments (see Manifest). Each sync PUTs what was written since the
// previous one as the next segment; the manifest is updated only when the
// cursor is saved, with an ETag compare-and-swap (If-Match, or
// If-None-Match: * when creating it), after which segments wholly at or
// below the cursor are deleted (the newest is always kept). Segments are
// created with If-None-Match: * as well, so a second writer on the same
// namespace is detected rather than overwriting them.
//
// # Sync modes
//
// Every mode is allowed, and every sync is one PUT (typically 10-200 ms):
// "always" PUTs one segment per entry, which makes each Append wait for a
// PUT and is only viable at low rates; "group_commit" (the default) lets
// concurrent appenders share one PUT; "periodic" PUTs every SyncInterval
// and loses what was buffered since the last PUT in a crash; "none" PUTs
// only when the buffer reaches SegmentBytes, on Sync or Flush, and on
// Close.
//
// # Single writer
//
// An object store has no lock, so nothing stops two processes from
// opening the same namespace: keeping node_id unique per running process
// is the operator's job (a StatefulSet ordinal, not a Deployment's pod
// name). The conditional PUTs above make a collision fail with ErrConflict
// instead of silently losing data, but only after it happened: by then the
// namespace may need repair.
//
// # Recovery
//
// Opening reads the manifest (absent: a new log), LISTs segments/ and
// reads every segment that may hold entries after the cursor. A segment
// whose last record is cut off is a torn tail only if it is the newest
// (PUTs are atomic, so this should not happen): the intact prefix is kept
// and the object rewritten to it. Any other damage, or a segment the
// manifest names but the bucket lacks while it may hold unacknowledged
// entries, is a *CorruptError naming the object, and nothing is changed.
func OpenObjectStore(ctx context.Context, opts ObjectStoreOptions) (*Log, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	client := opts.Client
	if client == nil {
		var err error
		if client, err = blob.NewClient(opts.S3); err != nil {
			return nil, fmt.Errorf("wal: ObjectStoreOptions.S3.Endpoint: %w", err)
		}
	}
	return openStorage(ctx, opts, blob.NewS3Storage(client, opts.Bucket))
}

// openStorage opens the log of opts (validated; the client fields are
// ignored) in st, which holds opts.Bucket's objects.
func openStorage(ctx context.Context, opts ObjectStoreOptions, st blob.Storage) (*Log, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultObjectPrefix
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = DefaultObjectSegmentBytes
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	var base string
	if p := strings.Trim(opts.Prefix, "/"); p != "" {
		base = p + "/"
	}
	base += opts.NodeID + "/" + opts.Stream + "/"
	s := &objStorage{
		st:       st,
		bucket:   opts.Bucket,
		base:     base,
		nodeID:   opts.NodeID,
		stream:   opts.Stream,
		retain:   opts.Retain,
		segBytes: opts.SegmentBytes,
		timeout:  opts.RequestTimeout,
		log:      opts.Logger,
		openCtx:  ctx,
	}
	return open(s, opts.Options)
}

// objStorage is the object-store storage. Lock order: syncMu, then mu or
// segMu; manMu, then segMu.
type objStorage struct {
	st             blob.Storage
	bucket         string // for messages
	base           string // {prefix}/{node}/{stream}/
	nodeID, stream string
	retain         bool
	segBytes       int64
	timeout        time.Duration
	log            *slog.Logger
	// openCtx bounds recover; nothing else uses it.
	openCtx context.Context

	// mu guards the buffer of records written since the last PUT.
	mu                sync.Mutex
	buf               []byte
	bufFirst, bufLast uint64

	// syncMu serializes segment PUTs and guards nextIndex.
	syncMu    sync.Mutex
	nextIndex uint64

	// segMu guards segs, maxSealed and conflict.
	segMu     sync.Mutex
	segs      []objSegment // ascending index
	maxSealed uint64
	conflict  error // sticky ErrConflict

	// manMu serializes manifest updates and guards the fields below.
	manMu  sync.Mutex
	exists bool   // the manifest exists, with ETag etag
	etag   string // as of our last read or write
	// unknown holds manifest bodies whose PUT failed without an answer
	// (it may have been applied). A 412 whose current manifest is one of
	// them is our own write, not another writer's.
	unknown [][]byte
}

// objSegment is a stored segment; first and last are 0 if it is empty.
type objSegment struct{ index, first, last uint64 }

func (s *objStorage) describe() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.base, "/")
}

func (s *objStorage) segKey(index uint64) string {
	return s.base + segmentsDir + objectSegmentName(index)
}

func (s *objStorage) url(key string) string { return "s3://" + s.bucket + "/" + key }

// reqCtx bounds one request made after opening.
func (s *objStorage) reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

// hint adds what to check to errors whose cause an operator can fix.
func (s *objStorage) hint(err error) error { return blob.Hint(err, s.bucket, blob.WALKeys) }

// get reads an object and its ETag; found is false if it does not exist.
func (s *objStorage) get(ctx context.Context, key string) (b []byte, etag string, found bool, err error) {
	b, etag, err = s.st.ReadObject(ctx, key)
	if s.st.IsNotExist(err) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("wal: GET %s: %w", s.url(key), s.hint(err))
	}
	return b, etag, true, nil
}

func (s *objStorage) recover() (recovered, error) {
	ctx := s.openCtx
	var r recovered
	sc, err := s.scan(ctx, nil)
	if err != nil {
		return r, err
	}
	if sc.man != nil {
		s.exists, s.etag = true, sc.etag
		r.cursor, r.meta = sc.man.Cursor, sc.man.CursorMeta
	}
	if t := sc.torn; t != nil {
		// Keep the intact prefix, so that the segment is whole when it
		// is no longer the newest.
		_, err := s.st.PutObject(ctx, t.key, t.body[:t.seg.Intact], blob.PutOptions{ContentType: "application/octet-stream", IfMatch: t.etag})
		if err != nil {
			return r, fmt.Errorf("wal: cutting the torn tail (%s) of %s: %w", t.seg.Torn, s.url(t.key), s.hint(err))
		}
		s.log.Warn("wal: cut a torn tail off the newest segment", "segment", s.url(t.key), "reason", t.seg.Torn, "kept_bytes", t.seg.Intact)
	}
	s.nextIndex = 1
	if n := len(sc.indexes); n > 0 {
		if sc.indexes[n-1] == math.MaxUint64 {
			return r, fmt.Errorf("wal: %s: segment index %d cannot be followed", s.describe(), sc.indexes[n-1])
		}
		s.nextIndex = sc.indexes[n-1] + 1
	}
	s.segs = sc.segs
	for _, g := range sc.segs {
		// Segments wholly at or below the cursor may be stored still
		// (kept under Options.Hold, or not deleted yet).
		if g.first != 0 {
			r.oldest = g.first
			break
		}
	}
	s.maxSealed = sc.maxSealed
	r.last = sc.last
	return r, nil
}

// objScan is what scan found.
type objScan struct {
	// man is the manifest (nil: none yet), with its ETag.
	man  *Manifest
	etag string
	// indexes are the segment indexes the manifest names or the LIST
	// found, ascending; segs the stored ones, with their sequences.
	indexes []uint64
	segs    []objSegment
	// maxSealed is the highest sequence in a segment (or the manifest's
	// max_sealed_seq, if higher); last the highest sequence stored, or the
	// cursor or max_sealed_seq if higher.
	maxSealed, last uint64
	// torn is the newest segment when its tail is torn, which recovery
	// rewrites to its intact prefix.
	torn *objTorn
}

type objTorn struct {
	key, etag string
	body      []byte
	seg       Segment
}

// objVisit sees one segment scan read: its index, size and decoding, and
// whether the cursor had wholly passed it (then recovery does not read
// it, and its decoding error is in err instead of failing the scan).
type objVisit func(index uint64, size int64, seg Segment, passed bool, err error)

// scan applies the recovery rules to the namespace, changing nothing: the
// manifest, the union of its segments and the listed ones, and every
// segment that may hold entries after the cursor. It is recovery without
// the repair, shared by recover and InspectObjects. With visit nil,
// segments the manifest records as wholly at or below the cursor are not
// read; otherwise they are, and every segment read is passed to visit.
func (s *objStorage) scan(ctx context.Context, visit objVisit) (objScan, error) {
	var sc objScan
	if err := s.scanManifest(ctx, &sc); err != nil {
		return sc, err
	}
	listed, err := s.segmentIndexes(ctx, &sc)
	if err != nil {
		return sc, err
	}
	ss := segScan{listed: listed, visit: visit}
	if sc.man != nil {
		ss.cursor, ss.ranges = sc.man.Cursor, sc.man.SegmentSeqs
	}
	sc.last = ss.cursor
	if sc.man != nil {
		sc.last = max(sc.last, sc.man.MaxSealedSeq)
	}
	for n, index := range sc.indexes {
		if err := s.scanSegment(ctx, &sc, &ss, index, n == len(sc.indexes)-1); err != nil {
			return sc, err
		}
	}
	if sc.man != nil {
		sc.maxSealed = max(sc.maxSealed, sc.man.MaxSealedSeq)
	}
	return sc, nil
}

// scanManifest reads manifest.json into sc, if there is one, and checks
// it is this node's and stream's.
func (s *objStorage) scanManifest(ctx context.Context, sc *objScan) error {
	manKey := s.base + manifestObject
	body, etag, found, err := s.get(ctx, manKey)
	if err != nil || !found {
		return err
	}
	man, err := DecodeManifest(body)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, s.url(manKey))
	}
	if man.NodeID != s.nodeID || man.StreamID != s.stream {
		return fmt.Errorf("wal: %s belongs to node_id %q, stream %q, not node_id %q, stream %q (was it copied?)",
			s.url(manKey), man.NodeID, man.StreamID, s.nodeID, s.stream)
	}
	sc.man, sc.etag = man, etag
	return nil
}

// segmentIndexes sets sc.indexes to the union of the segments the
// manifest names and those listed under segments/, ascending, and returns
// the listed ones.
func (s *objStorage) segmentIndexes(ctx context.Context, sc *objScan) (map[uint64]bool, error) {
	listed, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	all := map[uint64]bool{}
	for i := range listed {
		all[i] = true
	}
	if man := sc.man; man != nil {
		for _, name := range append(slices.Clone(man.SealedSegments), man.ActiveSegment) {
			if i, ok := parseObjectSegment(name); ok {
				all[i] = true
			}
		}
	}
	indexes := make([]uint64, 0, len(all))
	for i := range all {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	sc.indexes = indexes
	return listed, nil
}

// segScan is what scan checks each segment against, and the end of the
// previous one.
type segScan struct {
	cursor  uint64              // the manifest's cursor
	ranges  map[string]SeqRange // the manifest's sequences by segment
	listed  map[uint64]bool
	visit   objVisit
	prevEnd uint64 // last sequence of the previous non-empty segment
}

// scanSegment takes the segment of index into sc. A segment the manifest
// names but that is missing is corrupt unless the cursor covers it
// (acknowledged, then deleted); one wholly at or below the cursor is not
// read by recovery unless it is the newest. A read segment's sequences
// must follow the previous segment's and match the manifest's record;
// only the newest may be torn.
func (s *objStorage) scanSegment(ctx context.Context, sc *objScan, ss *segScan, index uint64, newest bool) error {
	name := objectSegmentName(index)
	key := s.segKey(index)
	rng, hasRange := ss.ranges[name]
	if !ss.listed[index] {
		if hasRange && rng.Last <= ss.cursor {
			return nil // acknowledged, then deleted
		}
		return &CorruptError{Segment: s.url(key), Offset: 0,
			Reason: fmt.Sprintf("manifest.json names it but the object is missing; entries after cursor %d may be lost", ss.cursor)}
	}
	if hasRange && rng.Last <= ss.cursor && !newest {
		// Wholly acknowledged (retained, or not deleted yet): not
		// read by recovery.
		if ss.visit != nil {
			// (A log in use may have deleted it since the LIST.)
			b, _, found, err := s.get(ctx, key)
			if err != nil {
				return err
			}
			if found {
				seg, err := DecodeSegment(s.url(key), b, 0)
				ss.visit(index, int64(len(b)), seg, true, err)
			}
		}
		sc.segs = append(sc.segs, objSegment{index, rng.First, rng.Last})
		ss.prevEnd, sc.maxSealed = rng.Last, max(sc.maxSealed, rng.Last)
		return nil
	}
	b, etag, found, err := s.get(ctx, key)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("wal: %s was listed but is gone: is another process deleting in this namespace?", s.url(key))
	}
	seg, err := DecodeSegment(s.url(key), b, 0)
	if err != nil {
		return err
	}
	if ss.visit != nil {
		ss.visit(index, int64(len(b)), seg, false, nil)
	}
	if seg.Torn != "" {
		if !newest {
			return &CorruptError{Segment: s.url(key), Offset: int64(seg.Intact), Reason: seg.Torn + " in a segment that is not the newest"}
		}
		sc.torn = &objTorn{key: key, etag: etag, body: b, seg: seg}
	}
	if len(seg.Entries) == 0 {
		sc.segs = append(sc.segs, objSegment{index: index})
		return nil
	}
	first, end := seg.Entries[0].Seq, seg.Entries[len(seg.Entries)-1].Seq
	switch {
	case first <= ss.prevEnd:
		return &CorruptError{Segment: s.url(key), Offset: 0,
			Reason: fmt.Sprintf("segment starts at sequence %d, but the previous one ends at %d", first, ss.prevEnd)}
	case first > ss.prevEnd+1 && first-1 > ss.cursor:
		// A gap is allowed only where the cursor covers it
		// (acknowledged entries that were never PUT, or deleted).
		return &CorruptError{Segment: s.url(key), Offset: 0,
			Reason: fmt.Sprintf("segment starts at sequence %d, but sequences %d to %d are neither stored nor acknowledged (cursor %d)", first, ss.prevEnd+1, first-1, ss.cursor)}
	case hasRange && seg.Torn == "" && (rng.First != first || rng.Last != end):
		return &CorruptError{Segment: s.url(key), Offset: 0,
			Reason: fmt.Sprintf("segment holds sequences %d to %d, but manifest.json records %d to %d", first, end, rng.First, rng.Last)}
	}
	sc.segs = append(sc.segs, objSegment{index, first, end})
	ss.prevEnd, sc.maxSealed, sc.last = end, max(sc.maxSealed, end), max(sc.last, end)
	return nil
}

// list returns the indexes of the objects under segments/.
func (s *objStorage) list(ctx context.Context) (map[uint64]bool, error) {
	prefix := s.base + segmentsDir
	names, err := s.st.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("wal: LIST %s: %w", s.url(prefix), s.hint(err))
	}
	found := map[uint64]bool{}
	for _, name := range names {
		i, ok := parseObjectSegment(strings.TrimPrefix(name, prefix))
		if !ok {
			return nil, fmt.Errorf("wal: %s: unexpected object %s (only segments named %%08d.wal belong there)", s.describe(), s.url(name))
		}
		found[i] = true
	}
	return found, nil
}

func (s *objStorage) write(recs []byte, first, last uint64) error {
	s.mu.Lock()
	if len(s.buf) == 0 {
		s.bufFirst = first
	}
	s.buf = append(s.buf, recs...)
	s.bufLast = last
	full := int64(len(s.buf)) >= s.segBytes
	s.mu.Unlock()
	if full {
		return s.sync()
	}
	return nil
}

// sync PUTs the buffer as the next segment. A failed PUT puts the bytes
// back in front of the buffer and keeps the index.
func (s *objStorage) sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.segMu.Lock()
	conflict := s.conflict
	s.segMu.Unlock()
	if conflict != nil {
		return conflict
	}
	s.mu.Lock()
	data, first, last := s.buf, s.bufFirst, s.bufLast
	s.buf = nil
	s.mu.Unlock()
	if len(data) == 0 {
		return nil
	}
	index := s.nextIndex
	if err := s.putSegment(index, data); err != nil {
		s.mu.Lock()
		if len(s.buf) == 0 {
			s.bufLast = last
		}
		s.buf = append(data, s.buf...)
		s.bufFirst = first
		s.mu.Unlock()
		return err
	}
	s.nextIndex++
	s.segMu.Lock()
	s.segs = append(s.segs, objSegment{index, first, last})
	s.maxSealed = max(s.maxSealed, last)
	s.segMu.Unlock()
	return nil
}

// putSegment creates segment index, refusing to overwrite one.
func (s *objStorage) putSegment(index uint64, data []byte) error {
	ctx, cancel := s.reqCtx()
	defer cancel()
	key := s.segKey(index)
	_, err := s.st.PutObject(ctx, key, data, blob.PutOptions{ContentType: "application/octet-stream", IfNoneMatch: true})
	if err == nil {
		return nil
	}
	if blob.Classify(err) != blob.PreconditionFailed {
		return fmt.Errorf("wal: PUT segment %s: %w", s.url(key), s.hint(err))
	}
	// The segment exists. If it holds our bytes, an earlier attempt of
	// this PUT (a retry inside the client) created it.
	cur, _, found, gerr := s.get(ctx, key)
	if gerr != nil {
		return fmt.Errorf("wal: PUT segment %s: it already exists, and reading it failed: %w", s.url(key), gerr)
	}
	if found && bytes.Equal(cur, data) {
		return nil
	}
	err = fmt.Errorf("%w: segment %s already exists with other contents; node_id %q must be unique per running process",
		ErrConflict, s.url(key), s.nodeID)
	s.setConflict(err)
	return err
}

func (s *objStorage) setConflict(err error) {
	s.segMu.Lock()
	if s.conflict == nil {
		s.conflict = err
	}
	s.segMu.Unlock()
}

// saveCursor writes the manifest with the cursor, then deletes the
// segments wholly at or below release.
func (s *objStorage) saveCursor(cursor uint64, meta []byte, release uint64) error {
	s.manMu.Lock()
	defer s.manMu.Unlock()
	s.segMu.Lock()
	segs, maxSealed, conflict := slices.Clone(s.segs), s.maxSealed, s.conflict
	s.segMu.Unlock()
	if conflict != nil {
		return conflict
	}
	// Segments wholly at or below release go, except the newest, which
	// keeps the highest index and sequence visible to a LIST.
	var drop, keep []objSegment
	for i, g := range segs {
		if !s.retain && i < len(segs)-1 && g.last <= release {
			drop = append(drop, g)
		} else {
			keep = append(keep, g)
		}
	}
	m := &Manifest{
		Version:      ManifestVersion,
		NodeID:       s.nodeID,
		StreamID:     s.stream,
		Cursor:       cursor,
		MaxSealedSeq: maxSealed,
		CursorMeta:   meta,
	}
	for i, g := range keep {
		name := objectSegmentName(g.index)
		if i == len(keep)-1 {
			m.ActiveSegment = name
		} else {
			m.SealedSegments = append(m.SealedSegments, name)
		}
		if g.first != 0 {
			if m.SegmentSeqs == nil {
				m.SegmentSeqs = map[string]SeqRange{}
			}
			m.SegmentSeqs[name] = SeqRange{g.first, g.last}
		}
	}
	if len(m.CursorMeta) == 0 {
		m.CursorMeta = nil
	}
	body, err := m.Encode()
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	if err := s.putManifest(ctx, body); err != nil {
		return err
	}
	// The manifest no longer names the dropped segments. A failed DELETE
	// leaves an object a later save (or the next run) deletes again.
	for _, g := range drop {
		key := s.segKey(g.index)
		if err := s.st.Delete(ctx, key); err != nil {
			s.log.Warn("wal: deleting an acknowledged segment failed; it is retried at the next cursor save", "segment", s.url(key), "error", s.hint(err))
			continue
		}
		s.segMu.Lock()
		s.segs = slices.DeleteFunc(s.segs, func(x objSegment) bool { return x.index == g.index })
		s.segMu.Unlock()
	}
	return nil
}

// putManifest replaces the manifest with body by ETag compare-and-swap.
// On a 412 it re-reads the manifest: if it is body, or a body whose PUT
// failed without an answer, the change was ours and the swap is retried
// (at most manifestAttempts PUTs); otherwise another writer made it, and
// the result is ErrConflict.
func (s *objStorage) putManifest(ctx context.Context, body []byte) error {
	key := s.base + manifestObject
	for range manifestAttempts {
		cond := blob.PutOptions{ContentType: "application/json", IfNoneMatch: !s.exists}
		if s.exists {
			cond.IfMatch = s.etag
		}
		etag, err := s.st.PutObject(ctx, key, body, cond)
		if err == nil {
			s.exists, s.etag, s.unknown = true, etag, nil
			return nil
		}
		if blob.Classify(err) != blob.PreconditionFailed {
			if len(s.unknown) == unknownBodies {
				s.unknown = s.unknown[1:]
			}
			s.unknown = append(s.unknown, body)
			return fmt.Errorf("wal: PUT %s: %w", s.url(key), s.hint(err))
		}
		cur, curTag, found, err := s.get(ctx, key)
		if err != nil {
			return fmt.Errorf("wal: PUT %s was refused (412) and re-reading it failed: %w", s.url(key), err)
		}
		ours := found && bytes.Equal(cur, body)
		for _, u := range s.unknown {
			ours = ours || (found && bytes.Equal(cur, u))
		}
		if !ours {
			what := "it was deleted"
			if found {
				what = "it now holds: " + describeManifest(cur)
			}
			err := fmt.Errorf("%w: %s changed under its compare-and-swap (%s); node_id %q must be unique per running process",
				ErrConflict, s.url(key), what, s.nodeID)
			s.setConflict(err)
			return err
		}
		s.exists, s.etag, s.unknown = true, curTag, nil
		if bytes.Equal(cur, body) {
			return nil
		}
	}
	return fmt.Errorf("wal: manifest write %s failed after %d attempts (concurrent writers contending?): %w", s.url(key), manifestAttempts, ErrConflict)
}

func describeManifest(b []byte) string {
	m, err := DecodeManifest(b)
	if err != nil {
		return "an invalid manifest"
	}
	return fmt.Sprintf("cursor %d, max_sealed_seq %d, active_segment %q", m.Cursor, m.MaxSealedSeq, m.ActiveSegment)
}

// close releases nothing: the namespace has no lock (see OpenObjectStore).
func (s *objStorage) close() error { return nil }

// replay returns the entries after after: the segments' (read one at a
// time), then those still buffered.
func (s *objStorage) replay(after uint64) (iterator, error) {
	s.syncMu.Lock()
	s.segMu.Lock()
	var segs []objSegment
	for _, g := range s.segs {
		if g.last > after {
			segs = append(segs, g)
		}
	}
	s.segMu.Unlock()
	s.mu.Lock()
	tail := slices.Clone(s.buf)
	s.mu.Unlock()
	s.syncMu.Unlock()
	return &objIter{s: s, segs: segs, after: after, tail: tail}, nil
}

type objIter struct {
	s     *objStorage
	segs  []objSegment
	after uint64
	tail  []byte // buffered records, not yet PUT
	cur   []Entry
}

func (it *objIter) next() (Entry, error) {
	for len(it.cur) == 0 {
		var seg Segment
		var err error
		switch {
		case len(it.segs) > 0:
			g := it.segs[0]
			it.segs = it.segs[1:]
			seg, err = it.s.readSegment(g)
		case it.tail != nil:
			seg, err = DecodeSegment(it.s.describe()+" (buffer)", it.tail, 0)
			it.tail = nil
		default:
			return Entry{}, io.EOF
		}
		if err != nil {
			return Entry{}, err
		}
		for len(seg.Entries) > 0 && seg.Entries[0].Seq <= it.after {
			seg.Entries = seg.Entries[1:]
		}
		it.cur = seg.Entries
	}
	e := it.cur[0]
	it.cur = it.cur[1:]
	return e, nil
}

func (it *objIter) close() error { it.cur, it.segs, it.tail = nil, nil, nil; return nil }

// readSegment GETs and decodes a segment, which must hold g's sequences.
func (s *objStorage) readSegment(g objSegment) (Segment, error) {
	ctx, cancel := s.reqCtx()
	defer cancel()
	key := s.segKey(g.index)
	b, _, found, err := s.get(ctx, key)
	if err != nil {
		return Segment{}, fmt.Errorf("wal: replay: %w", err)
	}
	if !found {
		return Segment{}, &CorruptError{Segment: s.url(key), Reason: "the object disappeared after recovery"}
	}
	seg, err := DecodeSegment(s.url(key), b, g.first)
	if err != nil {
		return Segment{}, err
	}
	n := len(seg.Entries)
	if seg.Torn != "" || n == 0 || seg.Entries[n-1].Seq != g.last {
		return Segment{}, &CorruptError{Segment: s.url(key), Offset: int64(seg.Intact),
			Reason: fmt.Sprintf("the object changed after recovery: it no longer holds sequences %d to %d", g.first, g.last)}
	}
	return seg, nil
}
