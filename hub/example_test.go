package hub_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arkflow-rs/arkflow-go/hub"
)

// A Hub on 127.0.0.1:8080 with one operator token, serving until it is
// interrupted. Agents join it with hubclient (or `arkflow agent --hub`).
func Example() {
	h, err := hub.New(hub.Config{
		DataDir:   "/var/lib/arkflow-hub",
		Tokens:    []string{"alice|operator|" + os.Getenv("ALICE_SECRET")},
		NodeToken: os.Getenv("ARKFLOW_NODE_TOKEN"),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := h.Run(ctx, ln); err != nil {
		log.Fatal(err)
	}
}

// The Hub's metrics in a registry of the service's own, here gathered
// once: the families with a value before any request, job or Agent.
// `arkflow-hub --metrics-addr` serves them on /metrics.
func ExampleHub_Collector() {
	dir, err := os.MkdirTemp("", "hub")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h, err := hub.New(hub.Config{DataDir: dir, InsecureNoAuth: true})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Collector())
	fams, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fams {
		fmt.Println(f.GetName())
	}
	// Output:
	// arkflow_hub_failovers_total
	// arkflow_hub_nodes
	// arkflow_hub_store_up
	// arkflow_hub_store_write_duration_seconds
}
