// Command arkflow validates, plans and runs ArkFlow jobs from JSON or YAML
// spec files.
//
//	arkflow validate SPEC   check a spec; every problem on stderr, one per line; exit 1 if any
//	arkflow plan SPEC       print the physical plan as JSON (--text for people)
//	arkflow run SPEC        run the job until its bounded sources end, or SIGINT/SIGTERM
//
// run stops gracefully on the first signal (rows in flight are written and
// acknowledged, within --stop-timeout) and immediately on the second.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/job"
)

const usage = `usage: arkflow <command> [flags] SPEC

commands:
  validate SPEC   check a job spec (JSON or YAML); exit 1 and list every problem if invalid
  plan SPEC       print the job's physical plan as JSON (--text: human-readable)
  run SPEC        run the job in this process until it ends or is signalled
  checkpoint      take a checkpoint of a job that "arkflow run" is running
                  (--data-dir DIR SPEC, or --control SOCKET)
  savepoint       take a named savepoint of a running job (--name NAME and as checkpoint)
  version         print the version of this program
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "validate":
		return validate(rest, stdout, stderr)
	case "plan":
		return plan(rest, stdout, stderr)
	case "run":
		return runJob(rest, stdout, stderr)
	case "checkpoint", "savepoint":
		return controlCommand(cmd, rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "arkflow (arkflow-go) job runtime v1")
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "arkflow: unknown command %q\n%s", cmd, usage)
		return 2
	}
}

func specArg(fs *flag.FlagSet, args []string, stderr io.Writer) (string, bool) {
	if err := fs.Parse(args); err != nil {
		return "", false
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "arkflow %s: expected one SPEC file, got %d arguments\n", fs.Name(), fs.NArg())
		return "", false
	}
	return fs.Arg(0), true
}

// printErrors writes every problem of err, one per line.
func printErrors(stderr io.Writer, err error) {
	if ves := job.AsValidationErrors(err); len(ves) > 0 {
		for _, e := range ves {
			fmt.Fprintln(stderr, e.Error())
		}
		return
	}
	fmt.Fprintln(stderr, err.Error())
}

func load(path string, stderr io.Writer) (*job.Spec, bool) {
	spec, err := job.ParseFile(path)
	if err != nil {
		printErrors(stderr, err)
		return nil, false
	}
	return spec, true
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path, ok := specArg(fs, args, stderr)
	if !ok {
		return 2
	}
	spec, ok := load(path, stderr)
	if !ok {
		return 1
	}
	p, err := arkflow.Compile(spec)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: job %s version %d (%s): %d tasks in %d chains, %d placement units\n",
		p.JobID, p.Version, p.Digest, len(p.Tasks), len(p.Chains), len(p.PlacementUnits))
	return 0
}

func plan(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	text := fs.Bool("text", false, "print the plan for people instead of JSON")
	path, ok := specArg(fs, args, stderr)
	if !ok {
		return 2
	}
	spec, ok := load(path, stderr)
	if !ok {
		return 1
	}
	p, err := arkflow.Compile(spec)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	if *text {
		fmt.Fprint(stdout, p.String())
		return 0
	}
	out, err := p.JSON()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, string(out))
	return 0
}

func runJob(args []string, _ io.Writer, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stopTimeout := fs.Duration("stop-timeout", 30*time.Second, "how long a graceful stop may take after SIGINT/SIGTERM")
	verbose := fs.Bool("v", false, "debug logging")
	dataDir := fs.String("data-dir", "", "where state and write-ahead logs live when the spec gives no path: <dir>/<job>/state, <dir>/<job>/wal")
	dryRun := fs.Bool("dry-run", false, "open and close every write-ahead log, then exit (checks locks and corruption)")
	control := fs.String("control", "", "serve checkpoint/savepoint requests on this Unix socket (default <data-dir>/<job>.sock when --data-dir is set)")
	fromSavepoint := fs.String("from-savepoint", "", "start from this savepoint instead of following the spec's recovery")
	savepointOnStop := fs.String("savepoint-on-stop", "", "on SIGINT/SIGTERM, take a savepoint with this name before stopping (for upgrades)")
	path, ok := specArg(fs, args, stderr)
	if !ok {
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	spec, ok := load(path, stderr)
	if !ok {
		return 1
	}
	j, err := arkflow.FromSpec(spec, arkflow.WithLogger(logger), arkflow.WithDataDir(*dataDir), arkflow.WithSavepoint(*fromSavepoint))
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	if *dryRun {
		if err := j.DryRun(context.Background()); err != nil {
			printErrors(stderr, err)
			return 1
		}
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if path := controlPath(*control, *dataDir, spec.ID); path != "" && spec.Checkpoint != nil {
		// The socket appears once the job runs, so a request never meets a
		// job still restoring.
		var stopControl func()
		var mu sync.Mutex
		go func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for j.State() < arkflow.Running {
				select {
				case <-ctx.Done():
					return
				case <-j.Done():
					return
				case <-t.C:
				}
			}
			stop, err := serveControl(ctx, path, j, logger)
			if err != nil {
				logger.Error("control socket", "error", err)
				return
			}
			mu.Lock()
			stopControl = stop
			mu.Unlock()
		}()
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			if stopControl != nil {
				stopControl()
			}
		}()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			logger.Info("signal received: stopping gracefully (send it again to stop at once)", "signal", s.String())
		case <-j.Done():
			return
		}
		stopCtx, stopCancel := context.WithTimeout(context.Background(), *stopTimeout)
		defer stopCancel()
		if *savepointOnStop != "" {
			if err := j.Savepoint(stopCtx, *savepointOnStop); err != nil {
				logger.Error("savepoint before stopping failed; stopping anyway", "savepoint", *savepointOnStop, "error", err)
			} else {
				logger.Info("savepoint taken", "savepoint", *savepointOnStop)
			}
		}
		go func() {
			select {
			case <-sigs:
				logger.Warn("second signal: cancelling without draining")
				stopCancel()
			case <-stopCtx.Done():
			}
		}()
		if err := j.Stop(stopCtx); err != nil {
			logger.Warn("stop", "error", err)
		}
	}()
	if err := j.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		printErrors(stderr, err)
		return 1
	}
	return 0
}
