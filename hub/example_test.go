package hub_test

import (
	"context"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"

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
