package durable

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// objectCursorInterval is how often an object-store WAL writes its
// manifest while acknowledgements flow: each write is a PUT, so it is less
// eager than a local cursor file (ArkFlow uses 1 s too).
const objectCursorInterval = time.Second

// openObjectStore opens the object-store WAL of one source subtask: stream
// {stream_id or job}.{source}.{subtask} in namespace {prefix}/{node_id}/.
func openObjectStore(ctx context.Context, cfg *Config, opts wal.Options, info connectors.TaskInfo) (*wal.Log, error) {
	b := cfg.Backend
	s3 := b.S3
	if s3 == nil {
		s3 = &S3{}
	}
	endpoint, secure, err := parseEndpoint(s3.Endpoint, s3.AllowHTTP)
	if err != nil {
		return nil, err
	}
	stream := b.StreamID
	if stream == "" {
		stream = info.JobID
	}
	opts.CursorInterval = objectCursorInterval
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return wal.OpenObjectStore(ctx, wal.ObjectStoreOptions{
		Options:   opts,
		Endpoint:  endpoint,
		Secure:    secure,
		Bucket:    s3.Bucket,
		Region:    s3.Region,
		Prefix:    b.Prefix,
		NodeID:    b.NodeID,
		Stream:    fmt.Sprintf("%s.%s.%d", stream, info.OperatorID, info.Subtask),
		AccessKey: envOr(s3.AccessKeyID, "AWS_ACCESS_KEY_ID"),
		SecretKey: envOr(s3.SecretAccessKey, "AWS_SECRET_ACCESS_KEY"),
		Retain:    cfg.Retain,
	})
}

// parseEndpoint accepts host[:port] or an http(s) URL. Plain HTTP needs
// allow_http.
func parseEndpoint(ep string, allowHTTP bool) (host string, secure bool, err error) {
	switch {
	case ep == "":
		return "s3.amazonaws.com", true, nil
	case strings.HasPrefix(ep, "https://"):
		return strings.TrimSuffix(strings.TrimPrefix(ep, "https://"), "/"), true, nil
	case strings.HasPrefix(ep, "http://"):
		if !allowHTTP {
			return "", false, fmt.Errorf("durability.backend.s3.endpoint %q is plain HTTP: set allow_http: true to permit it", ep)
		}
		return strings.TrimSuffix(strings.TrimPrefix(ep, "http://"), "/"), false, nil
	case strings.Contains(ep, "://"):
		return "", false, fmt.Errorf("durability.backend.s3.endpoint %q: the scheme must be http or https", ep)
	}
	return ep, !allowHTTP, nil
}
