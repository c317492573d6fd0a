package blob

import (
	"errors"
	"strings"
	"testing"
)

// TLS is the default everywhere; plain HTTP takes AllowHTTP or an explicit
// http://.
func TestEndpoint(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	for _, c := range []struct {
		o      Options
		env    string
		host   string
		secure bool
		err    string
	}{
		{o: Options{}, host: DefaultEndpoint, secure: true},
		{o: Options{}, env: "http://minio:9000", host: "minio:9000", secure: false},
		{o: Options{Endpoint: "minio:9000"}, env: "http://other:1", host: "minio:9000", secure: true},
		{o: Options{Endpoint: "minio:9000", AllowHTTP: true}, host: "minio:9000", secure: false},
		{o: Options{Endpoint: "https://minio:9000/", AllowHTTP: true}, host: "minio:9000", secure: true},
		{o: Options{Endpoint: "http://minio:9000"}, host: "minio:9000", secure: false},
		{o: Options{Endpoint: "ftp://minio:9000"}, err: "the scheme must be http or https"},
		{o: Options{Endpoint: "http://minio:9000/path"}, err: "give only scheme://host[:port]"},
	} {
		t.Setenv("AWS_ENDPOINT_URL", c.env)
		host, secure, err := c.o.endpoint()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: got %v, want %q", c.o, err, c.err)
			}
			if cerr := Check(c.o); cerr == nil {
				t.Errorf("%+v: Check accepts it", c.o)
			}
			continue
		}
		if err != nil || host != c.host || secure != c.secure {
			t.Errorf("%+v (AWS_ENDPOINT_URL=%q): got %q, %v, %v; want %q, %v", c.o, c.env, host, secure, err, c.host, c.secure)
		}
	}
}

func TestNewClient(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	if _, err := NewClient(Options{Endpoint: "h:1", SecretAccessKey: "s"}); !errors.Is(err, ErrSecretWithoutKey) {
		t.Fatalf("a secret without a key: %v", err)
	}
	if err := Check(Options{Endpoint: "h:1", SecretAccessKey: "s"}); !errors.Is(err, ErrSecretWithoutKey) {
		t.Fatalf("Check of a secret without a key: %v", err)
	}
	c, err := NewClient(Options{Endpoint: "h:1", AccessKeyID: "a", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if u := c.EndpointURL(); u.Scheme != "https" || u.Host != "h:1" {
		t.Fatalf("endpoint URL %v: want https://h:1", u)
	}
}
