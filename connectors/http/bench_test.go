package httpconn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
)

// HTTP ingest of NDJSON bodies of benchPerReq rows, posted by
// benchClients clients at once, through the engine (the http input, no
// durability → a sink function that counts rows) and through a bare
// net/http handler that reads each body and decodes its lines with
// encoding/json into a struct, answering 200; the same clients and bodies
// in each iteration. The engine's clock runs until the sink counted every
// row. ratio = engine rows/s over bare rows/s.
//
//	go test -run '^$' -bench HTTPIngest -benchtime 3x ./connectors/http/
const (
	benchRequests = 2000
	benchPerReq   = 100
	benchClients  = 8
)

type benchRow struct {
	ID     int64  `json:"id"`
	User   string `json:"user"`
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

// benchBodies returns the request bodies, each benchPerReq NDJSON rows.
func benchBodies() [][]byte {
	out := make([][]byte, benchRequests)
	for r := range out {
		var b bytes.Buffer
		for i := r * benchPerReq; i < (r+1)*benchPerReq; i++ {
			fmt.Fprintf(&b, `{"id":%d,"user":"user-%d","amount":%d,"note":"some text of a click"}`+"\n", i, i%1000, i%100)
		}
		out[r] = b.Bytes()
	}
	return out
}

var benchSchema = connectors.Schema{{Name: "id", Type: "int64"}, {Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}, {Name: "note", Type: "string"}}

func BenchmarkHTTPIngest(b *testing.B) {
	bodies := benchBodies()
	b.StopTimer() // the iterations time themselves
	var engine, bare time.Duration
	for i := 0; i < b.N; i++ {
		bare += benchBare(b, bodies)
		engine += benchEngine(b, bodies)
	}
	per := func(d time.Duration) float64 { return float64(b.N*benchRequests*benchPerReq) / d.Seconds() }
	b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(per(engine), "rows/s")
	b.ReportMetric(per(bare), "bare-rows/s")
	b.ReportMetric(per(engine)/per(bare), "ratio")
}

// postBodies posts every body from benchClients clients and fails on any
// answer but 200.
func postBodies(b *testing.B, url string, bodies [][]byte) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := next.Add(1) - 1; k < int64(len(bodies)); k = next.Add(1) - 1 {
				resp, err := client.Post(url, "application/x-ndjson", bytes.NewReader(bodies[k]))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("answer %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// benchBare serves the bodies with a plain handler and returns the time.
func benchBare(b *testing.B, bodies [][]byte) time.Duration {
	var rows atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(bufio.NewReader(r.Body))
		n := int64(0)
		for {
			var row benchRow
			if err := dec.Decode(&row); err == io.EOF {
				break
			} else if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n++
		}
		rows.Add(n)
		w.WriteHeader(http.StatusOK)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	start := time.Now()
	postBodies(b, "http://"+ln.Addr().String()+"/", bodies)
	d := time.Since(start)
	if n := rows.Load(); n != benchRequests*benchPerReq {
		b.Fatalf("bare handler decoded %d rows", n)
	}
	return d
}

// benchEngine runs the http input into a counting sink and returns the
// time from the first post until the sink counted every row.
func benchEngine(b *testing.B, bodies [][]byte) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var rows atomic.Int64
	all := make(chan struct{})
	want := int64(benchRequests * benchPerReq)
	j, err := arkflow.NewJob("bench-http").
		Source("in", SourceConfig{Address: addr, Format: FormatNDJSON, Schema: benchSchema}).
		Sink("out", funcsink.RecordFunc(func(_ context.Context, rec arrow.RecordBatch) error {
			if rows.Add(rec.NumRows()) == want {
				close(all)
			}
			return nil
		})).
		Build()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	url := "http://" + addr + DefaultPath
	for { // until the server listens (an empty body is no rows)
		if resp, err := http.Post(url, "application/x-ndjson", nil); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	postBodies(b, url, bodies)
	<-all
	d := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := j.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return d
}
