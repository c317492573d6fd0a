// Command metricsdoc writes METRICS.md, the list of every Prometheus metric
// family arkflow-go exports: a job's (Job.Collector, with the families its
// connectors declare), an Agent's (hubclient.Agent.Collector) and a Hub's
// (hub.Hub.Collector), each with its type, labels and help text, and what
// to do about it where README's "Operating a job" says.
//
// Nothing in METRICS.md is written by hand but its prose: the families come
// from the real collectors. The command builds and runs small jobs (a
// write-ahead log, event time, a keyed window, checkpoints, bounded
// generate and file sources, Kafka and NATS sources and sinks that are
// built but not run) and an in-process Hub with one Agent that runs a job
// and takes a checkpoint, registers each collector in a registry, and
// reads what Describe announces and Gather returns.
//
// # Usage
//
// Run from the module root:
//
//	go run ./internal/tools/metricsdoc          # rewrite METRICS.md
//	go run ./internal/tools/metricsdoc -check   # exit 1 if METRICS.md is stale
//
// The test in this directory runs the same check, so a renamed family or
// label, or a new family, fails `go test ./internal/tools/...` until
// METRICS.md is regenerated and committed with it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// regenerate is the command that rewrites METRICS.md.
const regenerate = "go run ./internal/tools/metricsdoc"

func main() {
	check := flag.Bool("check", false, "compare METRICS.md with the collectors and exit 1 if it differs, instead of writing it")
	root := flag.String("C", ".", "the module root")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want, err := markdown(ctx, root)
	if err != nil {
		return err
	}
	path := filepath.Join(root, "METRICS.md")
	if !check {
		return os.WriteFile(path, want, 0o644)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if d := firstDifference(string(got), string(want)); d != "" {
		return fmt.Errorf("METRICS.md is out of step with the collectors (%s); run %q and commit it", d, regenerate)
	}
	return nil
}

// markdown returns METRICS.md as the collectors describe it today.
func markdown(ctx context.Context, root string) ([]byte, error) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	notes, err := operatingNotes(string(readme))
	if err != nil {
		return nil, err
	}
	secs, err := sections(ctx)
	if err != nil {
		return nil, err
	}
	return render(secs, notes)
}
