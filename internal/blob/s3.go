package blob

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultEndpoint is the endpoint when neither Options.Endpoint nor
// AWS_ENDPOINT_URL gives one.
const DefaultEndpoint = "s3.amazonaws.com"

// Options are how to reach an S3-compatible store. The zero value takes
// everything from the environment, the way the AWS tools do.
type Options struct {
	// Endpoint is the S3 API's address: "host[:port]" or
	// "http(s)://host[:port]". An explicit scheme decides TLS; a bare
	// host uses TLS unless AllowHTTP is set. Default: AWS_ENDPOINT_URL,
	// else DefaultEndpoint.
	Endpoint string
	// Region is the bucket's region (default: AWS_REGION, else discovered
	// by the client).
	Region string
	// AccessKeyID and SecretAccessKey are static credentials. When
	// AccessKeyID is empty, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the
	// MinIO variables, the AWS credentials file and the instance's IAM
	// role are tried in turn. A SecretAccessKey without an AccessKeyID is
	// ErrSecretWithoutKey.
	AccessKeyID, SecretAccessKey string
	// AllowHTTP makes a bare "host[:port]" Endpoint use plain HTTP
	// (default false: TLS). It does not affect an explicit scheme.
	AllowHTTP bool
}

// ErrSecretWithoutKey is returned by Check and NewClient for a secret key
// given without its access key id: static credentials need both, and
// silently falling back to the environment would hide the mistake.
var ErrSecretWithoutKey = errors.New("a secret access key is set without an access key id")

// endpoint returns the endpoint of o and the environment as host[:port],
// and whether the client should use TLS.
func (o Options) endpoint() (string, bool, error) {
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	secure := !o.AllowHTTP
	if strings.Contains(endpoint, "://") {
		e, err := url.Parse(endpoint)
		if err != nil {
			return "", false, fmt.Errorf("endpoint %q: %w", endpoint, err)
		}
		switch e.Scheme {
		case "http":
			secure = false
		case "https":
			secure = true
		default:
			return "", false, fmt.Errorf("endpoint %q: the scheme must be http or https", endpoint)
		}
		if (e.Path != "" && e.Path != "/") || e.RawQuery != "" || e.User != nil {
			return "", false, fmt.Errorf("endpoint %q: give only scheme://host[:port]", endpoint)
		}
		endpoint = e.Host
	}
	return endpoint, secure, nil
}

// Check reports why NewClient would refuse o (with the environment as it
// is now), without any I/O: a malformed endpoint, or a secret key without
// an access key id.
func Check(o Options) error {
	if _, _, err := o.endpoint(); err != nil {
		return err
	}
	if o.AccessKeyID == "" && o.SecretAccessKey != "" {
		return ErrSecretWithoutKey
	}
	return nil
}

// NewClient builds a minio-go client from o and the environment (see
// Options for the defaults). It does no I/O: an unreachable endpoint or
// wrong credentials show in the first request.
func NewClient(o Options) (*minio.Client, error) {
	endpoint, secure, err := o.endpoint()
	if err != nil {
		return nil, err
	}
	region := o.Region
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	var creds *credentials.Credentials
	switch {
	case o.AccessKeyID != "":
		creds = credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, "")
	case o.SecretAccessKey != "":
		return nil, ErrSecretWithoutKey
	default:
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{}, &credentials.IAM{},
		})
	}
	c, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: region})
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	return c, nil
}
