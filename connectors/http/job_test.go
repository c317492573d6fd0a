package httpconn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A job from a spec, http in → http out with ArkFlow's auth form: the
// rows posted to the input reach the server behind the output, each once,
// with the output's credentials.
func TestJobHTTPToHTTP(t *testing.T) {
	srv := newStore(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	spec := fmt.Sprintf(`
id: http-relay
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - operator_id: in
    input_type: http
    config:
      address: %q
      path: /in
      format: ndjson
      schema: [{name: user, type: string}, {name: n, type: int64}]
sinks:
  - operator_id: out
    output_type: http
    config:
      url: %q
      retry_count: 2
      auth: {Basic: {username: ark, password: flow}}
`, addr, srv.URL+"/out")
	s, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	j, err := arkflow.FromSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	url := "http://" + addr + "/in"
	var want []string
	for k := 0; k < 20; k++ {
		var body strings.Builder
		for i := 0; i < 5; i++ {
			fmt.Fprintf(&body, "{\"user\":\"u%d\",\"n\":%d}\n", i, k*5+i)
			want = append(want, fmt.Sprint(k*5+i))
		}
		for { // until the job listens
			resp, err := http.Post(url, "application/x-ndjson", strings.NewReader(body.String()))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d", k, resp.StatusCode)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := j.Stop(ctx); err != nil { // a graceful stop writes every row taken
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rows, _, hdrs, _ := srv.kept()
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprint(r["n"]))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the output's server got n = %v, want %v", got, want)
	}
	for _, h := range hdrs {
		if u, p, ok := (&http.Request{Header: h}).BasicAuth(); !ok || u != "ark" || p != "flow" {
			t.Errorf("a request without the output's credentials: %v", h.Get("Authorization"))
		}
	}
}
