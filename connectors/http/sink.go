package httpconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/rowjson"
)

// Backoff between retries: doubling from backoffBase up to backoffMax,
// each wait drawn uniformly from its upper half (jitter).
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = 5 * time.Second
	// excerptBytes bounds the response body quoted in an error.
	excerptBytes = 512
)

// output is a validated HTTP output.
type output struct {
	cfg SinkConfig
}

func newOutput(cfg SinkConfig, zero map[string]bool, schema *arrow.Schema) (*output, error) {
	// Spaces around the URL are dropped, as URL parsers of the WHATWG
	// standard (ArkFlow's reqwest among them) drop them.
	cfg.URL = strings.TrimSpace(cfg.URL)
	if err := checkSink(&cfg, zero); err != nil {
		return nil, err
	}
	if schema != nil {
		if err := checkSchema(&cfg, schema); err != nil {
			return nil, err
		}
	}
	return &output{cfg: cfg}, nil
}

// checkSchema checks that the rows can be written as configured.
func checkSchema(cfg *SinkConfig, schema *arrow.Schema) error {
	if cfg.BodyField != "" {
		idx := schema.FieldIndices(cfg.BodyField)
		if len(idx) != 1 {
			return connectors.FieldError("body_field", "no column %q in the rows (%s)", cfg.BodyField, schema)
		}
		switch schema.Field(idx[0]).Type.ID() {
		case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		default:
			return connectors.FieldError("body_field", "column %q is %s: it must be a string or binary column", cfg.BodyField, schema.Field(idx[0]).Type)
		}
		return nil
	}
	var keep []arrow.Field
	for _, f := range schema.Fields() {
		if !connectors.IsMeta(f.Name) {
			keep = append(keep, f)
		}
	}
	if err := rowjson.CheckSchema(arrow.NewSchema(keep, nil)); err != nil {
		return connectors.FieldError("format", "the rows cannot be written as JSON: %v", err)
	}
	return nil
}

// NewSink returns the sink of one subtask. It does no I/O.
func (o *output) NewSink(connectors.TaskInfo) (connectors.Sink, error) {
	return &sink{cfg: o.cfg}, nil
}

// sink writes batches as requests.
type sink struct {
	cfg    SinkConfig
	client *http.Client
	m      clientMetrics
	buf    []byte
}

// Connect loads the TLS files; the first request opens the connection.
func (s *sink) Connect(context.Context) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t := s.cfg.TLS; t != nil {
		tc, err := clientTLS(t)
		if err != nil {
			return err
		}
		tr.TLSClientConfig = tc
	}
	s.client = &http.Client{Transport: tr}
	return nil
}

func clientTLS(t *ClientTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("http output: tls.ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("http output: tls.ca: no PEM certificate in %s", t.CA)
		}
	}
	if t.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("http output: tls.client_cert: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Write sends the rows and returns once the server answered 2xx for every
// request (one per batch, or one per row with format per-row).
func (s *sink) Write(ctx context.Context, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if s.client == nil {
		return errors.New("http output: Write before Connect")
	}
	if s.cfg.Format == FormatPerRow {
		for i := 0; i < int(rec.NumRows()); i++ {
			body, err := s.rowBody(rec, i)
			if err != nil {
				return err
			}
			if err := s.send(ctx, body, "application/json"); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		return nil
	}
	data := connectors.StripMeta(rec)
	defer data.Release()
	var err error
	if s.buf, err = rowjson.AppendRecord(s.buf[:0], data); err != nil {
		return fmt.Errorf("http output: %w", err)
	}
	if s.cfg.Format == FormatNDJSON {
		return s.send(ctx, s.buf, "application/x-ndjson")
	}
	// One object a line, and JSON strings hold no raw newline: the array
	// is the lines joined by commas.
	body := make([]byte, 0, len(s.buf)+1)
	body = append(body, '[')
	body = append(body, bytes.ReplaceAll(bytes.TrimSuffix(s.buf, []byte{'\n'}), []byte{'\n'}, []byte{','})...)
	return s.send(ctx, append(body, ']'), "application/json")
}

// rowBody is the body of row i: body_field's bytes, or the row as JSON.
func (s *sink) rowBody(rec arrow.RecordBatch, i int) ([]byte, error) {
	if s.cfg.BodyField != "" {
		switch c := rec.Column(rec.Schema().FieldIndices(s.cfg.BodyField)[0]).(type) {
		case *array.String:
			return []byte(c.Value(i)), nil
		case *array.Binary:
			return c.Value(i), nil
		case *array.LargeString:
			return []byte(c.Value(i)), nil
		case *array.LargeBinary:
			return c.Value(i), nil
		}
		return nil, fmt.Errorf("http output: body_field %q is not a string or binary column", s.cfg.BodyField)
	}
	row := rec.NewSlice(int64(i), int64(i+1))
	defer row.Release()
	data := connectors.StripMeta(row)
	defer data.Release()
	b, err := rowjson.AppendRecord(nil, data)
	if err != nil {
		return nil, fmt.Errorf("http output: %w", err)
	}
	return bytes.TrimSuffix(b, []byte{'\n'}), nil
}

// send sends one body until the server answers 2xx, retrying after a
// 5xx, a 429 or a connection error up to retry_count times.
func (s *sink) send(ctx context.Context, body []byte, ctype string) error {
	var last error
	for attempt := 0; ; attempt++ {
		retry, err := s.attempt(ctx, body, ctype)
		if err == nil {
			return nil
		}
		last = err
		if !retry || attempt >= *s.cfg.RetryCount || ctx.Err() != nil {
			break
		}
		s.m.retries.Add(1)
		d := min(backoffBase<<attempt, backoffMax)
		d = d/2 + rand.N(d/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return last
}

// attempt sends the body once; retry says whether a failure may pass.
func (s *sink) attempt(ctx context.Context, body []byte, ctype string) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.TimeoutMS)*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, s.cfg.Method, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("http output: %w", err)
	}
	req.Header.Set("Content-Type", ctype)
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	if a := s.cfg.Auth; a != nil {
		if a.Type == "basic" {
			req.SetBasicAuth(a.Username, a.Password)
		} else {
			req.Header.Set("Authorization", "Bearer "+a.Token)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.m.request("error")
		return true, fmt.Errorf("http output: %s %s: %w", s.cfg.Method, s.cfg.URL, err)
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	s.m.request(strconv.Itoa(resp.StatusCode))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	err = fmt.Errorf("http output: %s %s: %s: %s", s.cfg.Method, s.cfg.URL, resp.Status, printable(excerpt))
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, err
}

// printable quotes a response excerpt for an error message.
func printable(b []byte) string {
	if len(b) == 0 {
		return "(empty body)"
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return "base64 " + base64.StdEncoding.EncodeToString(b)
		}
	}
	return strconv.Quote(string(b))
}

// Close releases idle connections.
func (s *sink) Close(context.Context) error {
	if s.client != nil {
		s.client.CloseIdleConnections()
		s.client = nil
	}
	return nil
}
