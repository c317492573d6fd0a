package hubclient_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/connectors/stdout"
	"github.com/arkflow-rs/arkflow-go/hubclient"
)

// A service joins a Hub's fleet and runs the jobs the Hub assigns to it
// until it is interrupted. The Builder binds the Go values of the jobs the
// Hub may ship to this service (none here: this job names only
// connectors).
func Example() {
	clicks := arkflow.NewJob("clicks").
		Source("gen", generate.Config{Fields: []generate.Field{{Name: "n", Type: "int64"}}}).
		Sink("out", stdout.Config{})
	agent, err := hubclient.New(hubclient.Config{
		HubURL:    "http://127.0.0.1:8080",
		NodeID:    "service-1",
		NodeToken: os.Getenv("ARKFLOW_NODE_TOKEN"),
		DataDir:   "/var/lib/service/arkflow",
		Jobs:      []*arkflow.Builder{clicks},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A service that runs a part of the Hub's jobs serves their state, so
// that the Hub answers GET /api/v1/jobs/{id}/state/{operator}?key= for
// the whole fleet: the address it reports is where the Hub reaches the
// routes, and the token is the Hub's StateToken.
func ExampleAgent_QueryHandler() {
	agent, err := hubclient.New(hubclient.Config{
		HubURL:    "http://127.0.0.1:8080",
		NodeID:    "service-1",
		NodeToken: os.Getenv("ARKFLOW_NODE_TOKEN"),
		DataDir:   "/var/lib/service/arkflow",
		QueryAddr: "http://10.0.0.7:9091",
	})
	if err != nil {
		log.Fatal(err)
	}
	go http.ListenAndServe(":9091", agent.QueryHandler(os.Getenv("ARKFLOW_STATE_TOKEN")))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
