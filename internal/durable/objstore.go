package durable

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/blob"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
)

// objectCursorInterval is how often an object-store WAL writes its
// manifest while acknowledgements flow: each write is a PUT, so it is less
// eager than a local cursor file (ArkFlow uses 1 s too).
const objectCursorInterval = time.Second

// openObjectStore opens the object-store WAL of one source subtask: stream
// {stream_id or job}.{source}.{subtask} in namespace {prefix}/{node_id}/.
func openObjectStore(ctx context.Context, cfg *job.Durability, opts walog.Options, info connectors.TaskInfo) (*walog.Log, error) {
	b := cfg.Backend
	s3 := b.S3
	if s3 == nil {
		s3 = &job.WALObjectStore{}
	}
	if err := checkEndpoint(s3.Endpoint, s3.AllowHTTP); err != nil {
		return nil, err
	}
	stream := b.StreamID
	if stream == "" {
		stream = info.JobID
	}
	opts.CursorInterval = objectCursorInterval
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return walog.OpenObjectStore(ctx, walog.ObjectStoreOptions{
		Options: opts,
		S3: blob.Options{
			Endpoint:        s3.Endpoint,
			AllowHTTP:       s3.AllowHTTP,
			Region:          s3.Region,
			AccessKeyID:     envOr(s3.AccessKeyID, "AWS_ACCESS_KEY_ID"),
			SecretAccessKey: envOr(s3.SecretAccessKey, "AWS_SECRET_ACCESS_KEY"),
		},
		Bucket: s3.Bucket,
		Prefix: b.Prefix,
		NodeID: b.NodeID,
		Stream: fmt.Sprintf("%s.%s.%d", stream, info.OperatorID, info.Subtask),
		Retain: cfg.Retain,
	})
}

// checkEndpoint refuses a spec endpoint that blob.NewClient would not
// take, and a plain-HTTP one without allow_http: in a spec, an http://
// endpoint needs allow_http as well, so that plain HTTP is always asked
// for twice. An empty endpoint is AWS_ENDPOINT_URL's, else AWS's, as for
// the checkpoint store.
func checkEndpoint(ep string, allowHTTP bool) error {
	if strings.HasPrefix(ep, "http://") && !allowHTTP {
		return fmt.Errorf("durability.backend.s3.endpoint %q is plain HTTP: set allow_http: true to permit it", ep)
	}
	if err := blob.Check(blob.Options{Endpoint: ep}); err != nil {
		// blob's endpoint errors begin `endpoint "…":`.
		return fmt.Errorf("durability.backend.s3.%w", err)
	}
	return nil
}
