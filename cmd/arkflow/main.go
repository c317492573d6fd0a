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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/job"
)

const overview = `arkflow validates, plans and runs ArkFlow jobs (JSON or YAML spec files) in this process.

usage: arkflow COMMAND [flags] [SPEC]

commands:
%s
validate and run also take ArkFlow's Stream configs (a top-level streams
list): validate checks one deeply; run runs it. ArkFlow's own command line
works too: arkflow -c FILE [--validate].

Flags go before or after SPEC. run, validate and plan take the same flags,
so validate checks what run would start with.

State and write-ahead logs whose spec gives no path live under --data-dir
(default ./arkflow-data): DIR/<job id>/state and DIR/<job id>/wal; a job
with a checkpoint block serves checkpoint and savepoint on DIR/<job id>.sock.

arkflow wal inspect and arkflow checkpoint list, inspect and check read what
jobs leave behind (write-ahead logs, a checkpoint store) without a job running.

Exit status: 0 ok; 1 the spec is invalid or the job failed; 2 a usage mistake
(checkpoint check: 1 a start would refuse the savepoint; 3 it could not tell).
"arkflow help COMMAND [SUBCOMMAND]" lists a command's flags.
`

// commands are the CLI's verbs, in the order help lists them.
var commands = []*command{
	{name: "validate", args: "[flags] SPEC", short: "check a spec as a start would; every problem on stderr, one per line",
		long: "Validate runs the same deep build as a start with the same flags (without\n" +
			"connecting or writing anything) and prints every problem, one per line,\n" +
			"each naming the operator and the field. Exit 1 if there is any.\n\n" +
			"It takes run's flags, so a run's command line validates as it is; those\n" +
			"marked [run only] change nothing here.",
		setup: validateCmd},
	{name: "plan", args: "[flags] SPEC", short: "print the job's physical plan as JSON (--text for people)",
		long: "Plan validates the spec as validate does (with run's flags; those marked\n" +
			"[run only] change nothing here) and prints its physical plan: tasks,\n" +
			"chains, edges and key-group ranges.",
		setup: planCmd},
	{name: "run", args: "[flags] SPEC", short: "run the job until its bounded sources end, or SIGINT/SIGTERM",
		long: "Run runs the job in this process until its bounded sources end. The first\n" +
			"SIGINT/SIGTERM stops it gracefully (rows in flight are written and\n" +
			"acknowledged, within --stop-timeout), the second at once. With\n" +
			"--drain-on-stop the first drains it instead: the input ends where it is\n" +
			"and every open window fires, as at the end of a bounded input.\n\n" +
			"State and write-ahead logs whose spec gives no path live under --data-dir:\n" +
			"DIR/<job id>/state and DIR/<job id>/wal. A job with a checkpoint block\n" +
			"serves \"arkflow checkpoint\" and \"arkflow savepoint\" on DIR/<job id>.sock.\n\n" +
			"With --metrics-addr HOST:PORT it serves over HTTP, from before the start\n" +
			"until the job ends: /metrics (Prometheus), /healthz (200 while the process\n" +
			"serves), /readyz (200 once the job runs; 503 with a JSON reason while it\n" +
			"starts or restores, stops or failed, or after 3 failed checkpoints in a\n" +
			"row) and /status (the control socket's JSON).",
		setup: runCmd},
	{name: "checkpoint", args: "[flags] (SPEC | --control SOCKET) | (list | inspect | check) ...", short: `take a checkpoint of a job "arkflow run" is running; list, inspect or check a store's`,
		long: "Checkpoint asks the job an \"arkflow run\" is running to take a checkpoint\n" +
			"now and prints its id. It finds the job's control socket as run does:\n" +
			"DIR/<job id>.sock with the same --data-dir, or --control SOCKET.\n\n" +
			"Its subcommands read a checkpoint store instead, with no job running (a\n" +
			"SPEC file named list, inspect or check is given as ./list):\n" +
			"  checkpoint list URI            " + checkpointSubs[0].short + "\n" +
			"  checkpoint inspect URI ID      " + checkpointSubs[1].short + "\n" +
			"  checkpoint check URI ID SPEC   " + checkpointSubs[2].short + "\n" +
			"\"arkflow help checkpoint list\" (inspect, check) lists a subcommand's flags.",
		subs: checkpointSubs,
		setup: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
			return controlCmd("checkpoint", fs)
		}},
	{name: "savepoint", args: "--name NAME [flags] (SPEC | --control SOCKET)", short: `take a named savepoint of a job "arkflow run" is running`,
		long: "Savepoint asks the job an \"arkflow run\" is running to take the savepoint\n" +
			"NAME (a checkpoint retention never deletes) and prints its name. Start a\n" +
			"new version from it with \"arkflow run --from-savepoint NAME\".",
		setup: func(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
			return controlCmd("savepoint", fs)
		}},
	{name: "agent", args: "--hub URL [flags]", short: "join a Hub's fleet and run the jobs it assigns to this node, until SIGINT/SIGTERM",
		long: "Agent registers this process with the Hub at URL as node --node-id and runs\n" +
			"the jobs the Hub assigns to it, with the connectors compiled into this\n" +
			"program, until SIGINT/SIGTERM; then it stops them gracefully. It heartbeats\n" +
			"at a third of the Hub's lease and registers again, with a backoff, when the\n" +
			"Hub cannot be reached; the jobs keep running meanwhile.\n\n" +
			"With --metrics-addr HOST:PORT it serves run's four routes: /metrics (the\n" +
			"Agent's and every job's), /healthz, /readyz (200 once registered and every\n" +
			"job it holds runs; 503 naming the job and why, e.g. a restore) and /status.",
		setup: agentCmd},
	walCmd,
	{name: "version", args: "", short: "print the version of this program",
		long: "Version prints the version of this program.",
		setup: func(*flag.FlagSet) func([]string, io.Writer, io.Writer) error {
			return func(args []string, stdout, _ io.Writer) error {
				if len(args) > 0 {
					return usagef("takes no arguments (got %s)", strings.Join(args, " "))
				}
				fmt.Fprintln(stdout, "arkflow (arkflow-go) job runtime v1")
				return nil
			}
		}},
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// mainUsage is the one line printed for a missing or unknown command.
const mainUsage = "usage: arkflow COMMAND [flags] [SPEC], COMMAND one of validate, plan, run, checkpoint, savepoint, agent, wal, version, help"

// run runs the CLI and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "arkflow: no command; %s\n", mainUsage)
		return 2
	}
	if isArkFlowInvocation(args) {
		return arkflowCompat(args, stdout, stderr)
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(rest, stdout, stderr)
	}
	c := lookup(name)
	if c == nil {
		if strings.HasPrefix(name, "-") {
			fmt.Fprintf(stderr, "arkflow: flags go after the command, not before it (got %s); %s\n", name, mainUsage)
		} else {
			fmt.Fprintf(stderr, "arkflow: unknown command %q; %s\n", name, mainUsage)
		}
		return 2
	}
	if sub := c.sub(rest); sub != nil {
		c, rest = sub, rest[1:]
	}
	fs := newFlagSet(c.name)
	exec := c.setup(fs)
	pos, err := parseArgs(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c, fs)
		return 0
	}
	if err == nil {
		err = exec(pos, stdout, stderr)
	}
	var usage usageError
	var logged loggedError
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &logged):
		return 1
	case errors.As(err, &exit):
		if exit.err != nil {
			printErrors(stderr, exit.err)
		}
		return exit.code
	case errors.As(err, &usage):
		more := ""
		fs.VisitAll(func(*flag.Flag) { more = fmt.Sprintf(" (arkflow help %s lists the flags)", c.name) })
		fmt.Fprintf(stderr, "arkflow %s: %v; usage: %s%s\n", c.name, err, c.usage(), more)
		return 2
	default:
		printErrors(stderr, err)
		return 1
	}
}

// newFlagSet returns a flag set that reports its errors instead of
// printing them: a usage mistake is one line, not a dump of the flags.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// help prints the overview, or one command's usage and flags.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 {
		switch args[0] {
		case "help", "-h", "-help", "--help": // help about help: the overview
			args = nil
		}
	}
	switch len(args) {
	case 0:
		var b strings.Builder
		for _, c := range commands {
			fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.short)
		}
		fmt.Fprintf(&b, "  %-11s %s\n", "help", "print this, or every flag of a command (arkflow help COMMAND [SUBCOMMAND])")
		fmt.Fprintf(stdout, overview, b.String())
		return 0
	case 1, 2:
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintf(stderr, "arkflow help: unknown command %q; %s\n", args[0], mainUsage)
			return 2
		}
		if len(args) == 2 {
			sub := c.sub(args[1:])
			if sub == nil {
				fmt.Fprintf(stderr, "arkflow help: %s has no subcommand %q; usage: arkflow help [COMMAND [SUBCOMMAND]]\n", c.name, args[1])
				return 2
			}
			c = sub
		}
		fs := newFlagSet(c.name)
		c.setup(fs)
		printHelp(stdout, c, fs)
		return 0
	default:
		fmt.Fprintf(stderr, "arkflow help: expected at most a COMMAND and a SUBCOMMAND (got %d: %s); usage: arkflow help [COMMAND [SUBCOMMAND]]\n", len(args), strings.Join(args, " "))
		return 2
	}
}

// optionFlags names, for the library options the flags set, the flag.
var optionFlags = map[string]string{"WithSavepoint(name)": "--from-savepoint"}

// printErrors writes every problem of err, one per line.
func printErrors(stderr io.Writer, err error) {
	if ves := job.AsValidationErrors(err); len(ves) > 0 {
		for _, e := range ves {
			// The options the flags set are named as flags.
			if f, ok := optionFlags[e.Field]; ok {
				c := *e
				c.Field = f
				e = &c
			}
			fmt.Fprintln(stderr, e.Error())
		}
		return
	}
	fmt.Fprintln(stderr, err.Error())
}

// compile loads the spec named by args and validates it with the flags'
// options, as validate and plan do.
func compile(args []string, f *jobFlags, stderr io.Writer) (*job.Plan, error) {
	spec, err := f.load(args)
	if err != nil {
		return nil, err
	}
	j, err := arkflow.FromSpec(spec, f.options(f.logger(stderr))...)
	if err != nil {
		return nil, err
	}
	return j.Plan(), nil
}

func validateCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	var f jobFlags
	f.register(fs, false)
	return func(args []string, stdout, stderr io.Writer) error {
		if path, ok := streamArg(args); ok {
			return validateStream(path, stdout)
		}
		p, err := compile(args, &f, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ok: job %s version %d (%s): %d tasks in %d chains, %d placement units\n",
			p.JobID, p.Version, p.Digest, len(p.Tasks), len(p.Chains), len(p.PlacementUnits))
		return nil
	}
}

func planCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	var f jobFlags
	text := fs.Bool("text", false, "print the plan for people instead of JSON")
	f.register(fs, false)
	return func(args []string, stdout, stderr io.Writer) error {
		if _, ok := streamArg(args); ok {
			return errors.New("a Stream config has no physical plan (plan is for job specs); check it with arkflow validate")
		}
		p, err := compile(args, &f, stderr)
		if err != nil {
			return err
		}
		if *text {
			fmt.Fprint(stdout, p.String())
			return nil
		}
		out, err := p.JSON()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(out))
		return nil
	}
}

func runCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	var f jobFlags
	f.register(fs, true)
	return func(args []string, stdout, stderr io.Writer) error {
		if path, ok := streamArg(args); ok {
			return runStream(path, &f, stdout, stderr)
		}
		spec, err := f.load(args)
		if err != nil {
			return err
		}
		prog := newProgress(stderr, f.quiet || f.dryRun || stdoutSinkOnTerminal(spec, stdout))
		logger := f.logger(prog.logWriter())
		j, err := arkflow.FromSpec(spec, f.options(logger)...)
		if err != nil {
			return err
		}
		// The job adds its job key to what it logs; the command's own
		// records (signals, sockets) carry it too, so every line names it.
		logger = logger.With("job", spec.ID)
		if f.dryRun {
			return harness.RuntimeOf(j).DryRun(context.Background())
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if f.metricsAddr != "" {
			stopMetrics, err := serveMetrics(f.metricsAddr, j, logger)
			if err != nil {
				return err
			}
			defer stopMetrics()
		}
		if f.stateAddr != "" {
			_, stopState, err := serveState(f.stateAddr, jobStateHandler(j, spec.ID), logger)
			if err != nil {
				return err
			}
			defer stopState()
		}
		if path := controlPath(f.control, f.dataDir, spec.ID); path != "" && spec.Checkpoint != nil {
			defer serveControlWhenRunning(ctx, path, j, logger)()
		}
		defer stopOnSignals(&f, j, logger)()
		prog.start(j) // stopped first: its final lines before the others' logs
		defer prog.stop()
		if err := j.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return loggedError{err}
		}
		return nil
	}
}

// serveControlWhenRunning opens the control socket at path once the job
// runs, so a request never meets a job still restoring (not at all when
// ctx ends or the job does first), and returns what closes it.
func serveControlWhenRunning(ctx context.Context, path string, j *arkflow.Job, logger *slog.Logger) (stop func()) {
	var stopControl func()
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for j.Status() < arkflow.Running {
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
	return func() {
		// The goroutine may still be starting the socket (the job ran
		// briefly; it has ended by now, so the wait is short): wait for
		// it, so that neither the socket nor its log line outlives the
		// command.
		<-done
		mu.Lock()
		defer mu.Unlock()
		if stopControl != nil {
			stopControl()
		}
	}
}

// stopOnSignals ends the job on the first SIGINT or SIGTERM: a savepoint
// first with --savepoint-on-stop, then a drain (--drain-on-stop) or a
// graceful stop, within --stop-timeout; a second signal cancels it at
// once. It returns what stops listening.
func stopOnSignals(f *jobFlags, j *arkflow.Job, logger *slog.Logger) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			if f.drainOnStop {
				logger.Info("signal received: draining (the input ends, every open window fires; send it again to stop at once)", "signal", s.String())
			} else {
				logger.Info("signal received: stopping gracefully (send it again to stop at once)", "signal", s.String())
			}
		case <-j.Done():
			return
		}
		stopCtx, stopCancel := context.WithTimeout(context.Background(), f.stopTimeout)
		defer stopCancel()
		if f.savepointOnStop != "" {
			// The job logs the savepoint ("checkpoint completed",
			// kind=savepoint); only what the command does next is
			// logged here.
			if err := j.Savepoint(stopCtx, f.savepointOnStop); err != nil {
				logger.Error("savepoint before stopping failed; stopping anyway", "savepoint", f.savepointOnStop, "error", err)
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
		if f.drainOnStop {
			// Run returns the drain's error (a failed final
			// checkpoint) too; here it is only logged.
			if err := j.Drain(stopCtx); err != nil {
				logger.Warn("drain", "error", err)
			}
		} else if err := j.Stop(stopCtx); err != nil {
			logger.Warn("stop", "error", err)
		}
	}()
	return func() { signal.Stop(sigs) }
}
