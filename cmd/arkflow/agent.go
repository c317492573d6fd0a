package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/logformat"
)

// agentCmd runs a stand-alone Agent: the jobs the Hub assigns to this
// node run in this process, with the connectors compiled into it.
func agentCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	var hub, node, token, dataDir string
	var verbose bool
	var logFormat logformat.Format
	fs.StringVar(&hub, "hub", "", "the Hub's base `URL`, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(&node, "node-id", os.Getenv("ARKFLOW_NODE_ID"), "this Agent's node `ID`: stable across restarts, unique in the fleet (default $ARKFLOW_NODE_ID)")
	fs.StringVar(&token, "node-token", "", "the Hub's node token (default $ARKFLOW_NODE_TOKEN; a flag shows in the process list)")
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "keep the jobs' state and write-ahead logs in `DIR`")
	fs.BoolVar(&verbose, "v", false, "debug logging")
	fs.Var(&logFormat, "log-format", logformat.Usage)
	return func(args []string, _, stderr io.Writer) error {
		if len(args) > 0 {
			return usagef("takes no arguments (got %s)", strings.Join(args, " "))
		}
		if hub == "" {
			return usagef("--hub URL is required")
		}
		if token == "" {
			token = os.Getenv("ARKFLOW_NODE_TOKEN")
		}
		logger := logformat.New(stderr, logFormat, verbose)
		a, err := hubclient.New(hubclient.Config{HubURL: hub, NodeID: node, NodeToken: token, DataDir: dataDir, Logger: logger})
		if err != nil {
			return usagef("%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return a.Run(ctx)
	}
}
