package wal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
)

// Info describes one write-ahead log — one source subtask's — as a
// restart of its job would find it. Its JSON (arkflow wal inspect
// --json) has the snake_case names of its tags.
type Info struct {
	// Location is the log's directory, or its namespace in a bucket as
	// s3://bucket/{prefix}/{node_id}/{stream}.
	Location string `json:"location"`
	// Source and Subtask name the source subtask whose log it is, for a
	// local log laid out as a job's ({path}/{source}/{subtask}); "" and
	// -1 otherwise (an object-store stream names them as
	// {stream_id}.{source}.{subtask}, which Location shows).
	Source  string `json:"source,omitempty"`
	Subtask int    `json:"subtask"`
	// Cursor is the persisted cursor: every entry at or below it was
	// acknowledged, and a restart does not replay it. An acknowledgement
	// not yet persisted (at most the cursor interval, 100ms for a local
	// log and 1s for an object-store one, old) only means more replay.
	Cursor uint64 `json:"cursor"`
	// Positions are the source positions stored with the cursor: per
	// partition, the offset after the last row of the entries it covers,
	// where the source resumes reading once the entries after the
	// cursor are replayed.
	Positions []connectors.Position `json:"positions,omitempty"`
	// First and Last are the oldest and newest stored sequences (0 when
	// no entry is stored). Last may be below Cursor when acknowledged
	// entries were lost in a power loss (sync mode periodic or none).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Pending is the number of stored entries after the cursor: what a
	// restart replays before the source reads new input. (A source whose
	// input cannot be read again, in a job with checkpoints, keeps
	// entries below the cursor too, and replays those a restored
	// checkpoint does not hold.)
	Pending int `json:"pending"`
	// Segments are the stored segments, oldest first.
	Segments []Segment `json:"segments"`
	// Torn describes a torn tail of the newest segment — a write a crash
	// cut short — that a restart cuts off; "" when it ends cleanly. In a
	// log a running job is writing it may be a write in progress.
	Torn string `json:"torn,omitempty"`
	// Entries lists every stored entry, oldest first, with
	// InspectOptions.Entries; nil otherwise.
	Entries []Entry `json:"entries,omitempty"`
}

// Segment describes one stored segment of a log.
type Segment struct {
	// Name is the segment's file name in the log's directory, or its
	// object's key in the bucket.
	Name string `json:"name"`
	// First and Last are its first and last sequences, and Entries their
	// number; all 0 for an empty segment.
	First   uint64 `json:"first"`
	Last    uint64 `json:"last"`
	Entries int    `json:"entries"`
	// Bytes is its size on disk or in the bucket.
	Bytes int64 `json:"bytes"`
	// Passed is set when the cursor has passed every entry of it: a
	// restart does not read it, and the job deletes (or reuses) it
	// unless its durability block says retain or its source holds
	// entries for checkpoints.
	Passed bool `json:"passed"`
	// Damage says why a passed segment does not decode (Entries then
	// counts those before the damage). A restart never reads it, so it
	// does not fail; damage in a segment a restart reads fails Inspect
	// instead, with the error the restart would fail with.
	Damage string `json:"damage,omitempty"`
}

// Entry is one stored entry: one batch a source read.
type Entry struct {
	// Seq is its sequence number (from 1, in the order the source read).
	Seq uint64 `json:"seq"`
	// Source is the source name recorded with the rows.
	Source string `json:"source"`
	// Bytes is the size of its payload: the source name and the rows as
	// an Arrow IPC stream.
	Bytes int `json:"bytes"`
}

// InspectOptions configure Inspect. The zero value inspects a local
// directory, or an s3:// location with the endpoint and credentials of
// the environment.
type InspectOptions struct {
	// Entries lists every stored entry in Info.Entries (default false:
	// only the counts).
	Entries bool
	// Endpoint is the S3 API's address for an s3:// location:
	// "host[:port]" or "http(s)://host[:port]". An explicit "http://"
	// means plain HTTP; a bare host uses TLS unless AllowHTTP is set.
	// Default: AWS_ENDPOINT_URL, else "s3.amazonaws.com".
	Endpoint string
	// Region is the bucket's region (default: AWS_REGION, else
	// discovered).
	Region string
	// AccessKeyID and SecretAccessKey are static credentials. When
	// AccessKeyID is empty, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the
	// MinIO variables, the AWS credentials file and the instance's IAM
	// role are tried in turn. A SecretAccessKey without an AccessKeyID is
	// an error.
	AccessKeyID, SecretAccessKey string
	// AllowHTTP makes a bare "host:port" Endpoint use plain HTTP (default
	// false: TLS).
	AllowHTTP bool
}

// Inspect reads the write-ahead logs at location and describes each, as a
// restart would recover it, without changing anything: no lock is taken
// (the logs of a running job can be inspected), no torn tail is cut, no
// segment deleted, nothing written to a bucket. location is a directory
// (or file:///abs/dir) holding one log or logs below it, or
// s3://bucket/prefix for every object-store log under prefix; the
// package doc ("Inspecting a log") gives examples of each.
//
// Logs are returned sorted by Location. Damage a restart would refuse is
// an error matching ErrCorrupt that names the segment (or cursor) and
// the offset, the restart's own; a location holding no log is an error
// too. ctx bounds the inspection (for s3://, every request).
func Inspect(ctx context.Context, location string, opts InspectOptions) ([]Info, error) {
	if location == "" {
		return nil, errors.New("wal: Inspect: location is empty (a directory, file:///abs/dir or s3://bucket/prefix)")
	}
	if strings.Contains(location, "://") {
		u, err := url.Parse(location)
		if err != nil {
			return nil, fmt.Errorf("wal: Inspect: location %q: %w", location, err)
		}
		switch u.Scheme {
		case "file":
			if u.Host != "" || !filepath.IsAbs(u.Path) {
				return nil, fmt.Errorf("wal: Inspect: location %q: a file URI names an absolute directory, file:///abs/dir", location)
			}
			return inspectDirs(ctx, u.Path, opts)
		case "s3":
			if u.Host == "" {
				return nil, fmt.Errorf("wal: Inspect: location %q has no bucket (s3://bucket/prefix)", location)
			}
			return inspectBucket(ctx, u.Host, strings.Trim(u.Path, "/"), opts)
		default:
			return nil, fmt.Errorf("wal: Inspect: location %q: unsupported scheme %q (use a directory, file:///abs/dir or s3://bucket/prefix)", location, u.Scheme)
		}
	}
	return inspectDirs(ctx, location, opts)
}

func inspectDirs(ctx context.Context, dir string, opts InspectOptions) ([]Info, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("wal: Inspect: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("wal: Inspect: %s is not a directory", dir)
	}
	dirs, err := walog.FindLogDirs(dir)
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("wal: no write-ahead log in %s (a log's directory holds CURSOR.0, CURSOR.1 or segments named <first sequence>.wal; arkflow run keeps a job's under DIR/<job id>/wal)", dir)
	}
	out := make([]Info, 0, len(dirs))
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info := Info{Location: d, Subtask: -1}
		if n, err := strconv.Atoi(filepath.Base(d)); err == nil && n >= 0 {
			info.Source, info.Subtask = filepath.Base(filepath.Dir(d)), n
		}
		in, err := walog.InspectDir(d, entryCollector(&info, opts))
		if err != nil {
			return nil, err
		}
		if err := fill(&info, in); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func inspectBucket(ctx context.Context, bucket, prefix string, opts InspectOptions) ([]Info, error) {
	so := blob.Options{Endpoint: opts.Endpoint, Region: opts.Region, AccessKeyID: opts.AccessKeyID, SecretAccessKey: opts.SecretAccessKey, AllowHTTP: opts.AllowHTTP}
	if err := blob.Check(so); err != nil {
		return nil, fmt.Errorf("wal: Inspect: InspectOptions: %w", err)
	}
	c, err := blob.NewClient(so)
	if err != nil {
		return nil, fmt.Errorf("wal: Inspect: InspectOptions: %w", err)
	}
	st := blob.NewS3Storage(c, bucket)
	nss, err := walog.FindNamespaces(ctx, st, bucket, prefix)
	if err != nil {
		return nil, err
	}
	if len(nss) == 0 {
		return nil, fmt.Errorf("wal: no write-ahead log under s3://%s/%s (a log's namespace {prefix}/{node_id}/{stream}/ holds manifest.json and segments/)", bucket, prefix)
	}
	out := make([]Info, 0, len(nss))
	for _, ns := range nss {
		loc := "s3://" + bucket + "/"
		if ns.Prefix != "" {
			loc += ns.Prefix + "/"
		}
		info := Info{Location: loc + ns.NodeID + "/" + ns.Stream, Subtask: -1}
		in, err := walog.InspectObjects(ctx, st, bucket, ns.Prefix, ns.NodeID, ns.Stream, entryCollector(&info, opts))
		if err != nil {
			return nil, err
		}
		if err := fill(&info, in); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// entryCollector returns what collects info.Entries, or nil.
func entryCollector(info *Info, opts InspectOptions) func(walog.Entry) error {
	if !opts.Entries {
		return nil
	}
	return func(e walog.Entry) error {
		src, err := walog.BatchSource(e.Payload)
		if err != nil {
			return fmt.Errorf("wal: %s: entry %d: %w", info.Location, e.Seq, err)
		}
		info.Entries = append(info.Entries, Entry{Seq: e.Seq, Source: src, Bytes: len(e.Payload)})
		return nil
	}
}

// fill copies an inspection into info.
func fill(info *Info, in walog.Inspection) error {
	ps, err := durable.CursorPositions(in.Meta)
	if err != nil {
		return fmt.Errorf("%s: %w", info.Location, err)
	}
	info.Cursor, info.Positions = in.Cursor, ps
	info.First, info.Last, info.Pending, info.Torn = in.First, in.Last, in.Pending, in.Torn
	for _, g := range in.Segments {
		info.Segments = append(info.Segments, Segment(g))
	}
	return nil
}
