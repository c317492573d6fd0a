package httpconn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	httpconn "github.com/arkflow-rs/arkflow-go/connectors/http"
	"github.com/arkflow-rs/arkflow-go/job"
)

// An HTTP input with a write-ahead log and idempotency keys: a 200 means
// the rows survive a crash, and a request sent again with its
// Idempotency-Key (a client that lost the answer retries) enters once.
func Example() {
	dir, _ := os.MkdirTemp("", "http-example-")
	defer os.RemoveAll(dir)
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // a free port, for the example
	addr := ln.Addr().String()
	ln.Close()
	got := make(chan string)
	j, err := arkflow.NewJob("clicks").
		Source("in", httpconn.SourceConfig{
			Address: addr, Path: "/clicks", Format: httpconn.FormatNDJSON,
			Schema:      connectors.Schema{{Name: "user", Type: "string"}, {Name: "n", Type: "int64"}},
			Idempotency: &httpconn.Idempotency{},
		}, arkflow.Durable(job.Durability{})).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			users, ns := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64)
			for i := 0; i < int(rec.NumRows()); i++ {
				got <- fmt.Sprintf("row %s %d", users.Value(i), ns.Value(i))
			}
			return nil
		})).
		Build(arkflow.WithDataDir(dir))
	if err != nil {
		log.Fatal(err)
	}
	go j.Run(context.Background())
	defer j.Stop(context.Background())

	send := func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/clicks", strings.NewReader("{\"user\":\"ann\",\"n\":1}\n{\"user\":\"bob\",\"n\":2}\n"))
		req.Header.Set("Idempotency-Key", "order-17")
		var resp *http.Response
		for resp == nil { // until the job listens
			resp, _ = http.DefaultClient.Do(req.Clone(context.Background()))
			if resp == nil {
				req.Body, _ = req.GetBody()
			}
		}
		defer resp.Body.Close()
		var r httpconn.Response
		_ = json.NewDecoder(resp.Body).Decode(&r)
		fmt.Println(resp.StatusCode, "accepted", r.Accepted, "duplicates", r.Duplicates)
	}
	send()
	fmt.Println(<-got)
	fmt.Println(<-got)
	send() // the retry: acknowledged again, not taken again
	// Output:
	// 200 accepted 2 duplicates 0
	// row ann 1
	// row bob 2
	// 200 accepted 0 duplicates 2
}

// The output sends each batch as a JSON array, retrying 5xx answers; the
// auth block takes ArkFlow's form.
func ExampleSinkConfig() {
	retries := 5
	cfg := httpconn.SinkConfig{
		URL: "https://collector.example.com/v1/events", RetryCount: &retries, TimeoutMS: 2000,
		Headers: map[string]string{"X-Source": "arkflow"},
		TLS:     &httpconn.ClientTLS{CA: "/etc/ssl/collector-ca.pem"},
	}
	b, _ := json.Marshal(cfg)
	fmt.Println(string(b))
	var auth httpconn.SinkAuth
	_ = json.Unmarshal([]byte(`{"Bearer":{"token":"s3cret"}}`), &auth)
	fmt.Println(auth.Type, auth.Token)
	// Output:
	// {"url":"https://collector.example.com/v1/events","timeout_ms":2000,"retry_count":5,"headers":{"X-Source":"arkflow"},"tls":{"ca":"/etc/ssl/collector-ca.pem"}}
	// bearer s3cret
}
