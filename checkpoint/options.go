package checkpoint

// StoreOptions configure an s3:// checkpoint store, for a job
// (arkflow.WithCheckpointStore) or for Open; a file:// store ignores
// them. The zero value takes everything from the environment.
type StoreOptions struct {
	// Endpoint is the S3 API's address: "host[:port]" or
	// "http(s)://host[:port]". An explicit "http://" means plain HTTP; a
	// bare host uses TLS unless AllowHTTP is set. Default: the
	// AWS_ENDPOINT_URL environment variable, else "s3.amazonaws.com".
	Endpoint string
	// AccessKeyID and SecretAccessKey are static credentials. When
	// AccessKeyID is empty, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the
	// MinIO variables, the AWS credentials file and the instance's IAM role
	// are tried in turn. A SecretAccessKey without an AccessKeyID is an
	// error.
	AccessKeyID, SecretAccessKey string
	// Region is the bucket's region (default: AWS_REGION, else discovered).
	Region string
	// AllowHTTP makes a bare "host:port" Endpoint use plain HTTP (default
	// false: TLS).
	AllowHTTP bool
	// PartSize is the multipart part size of uploads (default 16 MiB; S3
	// requires at least 5 MiB). An upload can be at most 10,000 parts
	// long.
	PartSize uint64
	// UploadConcurrency is how many parts of one upload are in flight at
	// once (default 4). Each holds a PartSize buffer, so an upload takes
	// up to PartSize×(UploadConcurrency+1) bytes of memory (80 MiB at
	// the defaults), and a checkpoint uploads up to 4 state objects at
	// once.
	UploadConcurrency int
	// DownloadConcurrency is how many byte ranges of a state object a
	// restore reads at once (default 1: one GET per object). Above 1 an
	// object of at least 16 MiB is read in ranges of 8 MiB, and a range
	// whose connection drops is read again. Against a remote store 4 to 8
	// can make a restore of few large objects faster;
	// docs/benchmarks/checkpoints.md has measurements. When 0, the
	// environment variable ARKFLOW_S3_DOWNLOAD_CONCURRENCY sets it.
	DownloadConcurrency int
}
