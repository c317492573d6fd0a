package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/logformat"
	"github.com/arkflow-rs/arkflow-go/job"
)

// defaultDataDir is where state, write-ahead logs and control sockets live
// when --data-dir is not given (see the package doc).
const defaultDataDir = "./arkflow-data"

// usageError is a mistake on the command line. The command prints it as
// one line with its usage and exits 2.
type usageError string

func (e usageError) Error() string { return string(e) }

func usagef(format string, args ...any) error { return usageError(fmt.Sprintf(format, args...)) }

// loggedError is an error the job has already logged (Run's, as "job
// failed" with error=): the command exits 1 without printing it again, so
// the failure is said once, and with --log-format json every line of
// stderr stays a JSON record.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// A command is one verb of the CLI.
type command struct {
	name string
	// args is the usage after "arkflow <name>", e.g. "[flags] SPEC".
	args string
	// short is its line in `arkflow help`; long is what `arkflow help
	// <name>` says before the flags.
	short, long string
	// setup defines the command's flags on fs and returns what runs it
	// with the positional arguments. A usageError from it exits 2, any
	// other error is printed (one problem per line) and exits 1.
	setup func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) error
	// subs are its subcommands ("arkflow checkpoint list"), chosen by the
	// first argument after the command's name; name is then "<command>
	// <sub>". Without one of them the command itself runs.
	subs []*command
}

// sub returns c's subcommand named by the first argument, if any.
func (c *command) sub(args []string) *command {
	if len(args) == 0 {
		return nil
	}
	for _, s := range c.subs {
		if s.name == c.name+" "+args[0] {
			return s
		}
	}
	return nil
}

// usage is the command's usage line.
func (c *command) usage() string { return strings.TrimSpace("arkflow " + c.name + " " + c.args) }

// parseArgs parses the flags before and after the positional arguments.
// The flag package stops at the first positional argument, so: parse,
// take the positional that stopped it, parse the rest. "--" ends the
// flags; everything after it is positional. Errors are usageErrors, except
// flag.ErrHelp for -h and --help.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, err
		} else if err != nil {
			return nil, usageError(err.Error())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if endedByDashes(fs, args[:len(args)-len(rest)]) {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// endedByDashes reports whether the flags fs.Parse consumed ended with the
// "--" that stops flag parsing, rather than with a "--" that was the value
// of the flag before it (--name --).
func endedByDashes(fs *flag.FlagSet, consumed []string) bool {
	for i := 0; i < len(consumed); i++ {
		a := consumed[i]
		if a == "--" {
			return i == len(consumed)-1
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value
			}
		}
	}
	return false
}

// printHelp writes the command's usage, what it does and every flag with a
// one-line description.
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage(), c.long)
	type row struct{ left, text string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		value, text := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if len(f.Name) == 1 {
			left = "-" + f.Name
		}
		if value != "" {
			left += " " + value
		}
		switch f.DefValue {
		case "", "false", "0", "0s":
		default:
			text += " (default " + f.DefValue + ")"
		}
		rows = append(rows, row{left, text})
		width = max(width, len(left))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags (before or after the arguments; --flag=value or --flag value; -- ends them):")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.text)
	}
}

// jobFlags are the flags of every command that builds a job. run, validate
// and plan take all of them, and options turns them into the same library
// options for each, so validate checks what run would start with and one
// command line works with all three.
type jobFlags struct {
	dataDir, fromSavepoint string
	verbose                bool
	logFormat              logformat.Format
	// Used only by run.
	control, savepointOnStop string
	metricsAddr, stateAddr   string
	stopTimeout              time.Duration
	dryRun, drainOnStop      bool
	quiet                    bool
}

// register defines the flags on fs; forRun is false for validate and plan,
// whose help marks the flags only run uses.
func (f *jobFlags) register(fs *flag.FlagSet, forRun bool) {
	runOnly := ""
	if !forRun {
		runOnly = "[run only] "
	}
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir, "keep the state and write-ahead logs the spec gives no path in `DIR`/<job id>/state and DIR/<job id>/wal")
	fs.StringVar(&f.fromSavepoint, "from-savepoint", "", "start from the savepoint `NAME` instead of following the spec's recovery")
	fs.BoolVar(&f.verbose, "v", false, "debug logging")
	fs.Var(&f.logFormat, "log-format", logformat.Usage)
	fs.StringVar(&f.control, "control", "", runOnly+"serve checkpoint and savepoint requests on the Unix socket `SOCKET` (default DIR/<job id>.sock; only for a spec with a checkpoint block)")
	fs.StringVar(&f.savepointOnStop, "savepoint-on-stop", "", runOnly+"on SIGINT/SIGTERM, take the savepoint `NAME` before stopping (for upgrades)")
	fs.DurationVar(&f.stopTimeout, "stop-timeout", 30*time.Second, runOnly+"how long a graceful stop (or drain) may take after SIGINT/SIGTERM")
	fs.BoolVar(&f.drainOnStop, "drain-on-stop", false, runOnly+"on SIGINT/SIGTERM, drain instead of stopping: end the input where it is, fire every open window, write it, then (with a checkpoint block) take a final checkpoint; a restart does not fire those windows again")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", runOnly+"serve /metrics (Prometheus), /healthz, /readyz and /status over HTTP on `HOST:PORT`, e.g. 127.0.0.1:9090 (port 0: any free one, logged as \"metrics listening\")")
	fs.StringVar(&f.stateAddr, "state-addr", "", runOnly+stateAddrUsage)
	fs.BoolVar(&f.dryRun, "dry-run", false, runOnly+"open and close every write-ahead log (locks, corruption), then exit without running")
	fs.BoolVar(&f.quiet, "quiet", false, runOnly+"no live progress lines (rows/s, position, watermark, late rows; restore progress) on stderr; they show only when stderr is a terminal")
}

// load reads the spec named by args, after checking the flags alone, and
// checks the flags against it: what run, validate and plan do first.
func (f *jobFlags) load(args []string) (*job.Spec, error) {
	if f.stopTimeout < 0 {
		return nil, usagef("--stop-timeout must not be negative (got %s)", f.stopTimeout)
	}
	if f.drainOnStop && f.savepointOnStop != "" {
		return nil, usagef("--drain-on-stop and --savepoint-on-stop %s do not go together: a savepoint keeps the open windows for the next run, a drain fires them (and takes a final checkpoint); choose one", f.savepointOnStop)
	}
	if f.metricsAddr != "" {
		if err := checkMetricsAddr(f.metricsAddr); err != nil {
			return nil, err
		}
	}
	path, err := oneSpec(args)
	if err != nil {
		return nil, err
	}
	spec, err := job.ParseFile(path)
	if spec == nil {
		return nil, err
	}
	if err != nil {
		// Unknown fields or values of the wrong type: the spec remembers
		// them, and the build (arkflow.FromSpec) reports them together
		// with the spec's other mistakes, and refuses it.
		return spec, nil
	}
	// Without a checkpoint block run would start from scratch, fail only
	// at the stop, or serve nothing; say so before anything runs.
	if spec.Checkpoint == nil {
		for _, fl := range []struct{ name, value string }{{"from-savepoint", f.fromSavepoint}, {"savepoint-on-stop", f.savepointOnStop}, {"control", f.control}} {
			if fl.value != "" {
				return nil, fmt.Errorf("--%s %s: job %q has no checkpoint block, so it has no savepoints and serves no control socket; add one (checkpoint: {object_store_uri: ...}) or drop the flag", fl.name, fl.value, spec.ID)
			}
		}
	}
	return spec, nil
}

// logger is the job's logger on stderr: --log-format, debug with -v.
func (f *jobFlags) logger(stderr io.Writer) *slog.Logger {
	return logformat.New(stderr, f.logFormat, f.verbose)
}

// options are the library options the flags ask for. run, validate and
// plan all build their job with them.
func (f *jobFlags) options(logger *slog.Logger) []arkflow.Option {
	return []arkflow.Option{
		arkflow.WithLogger(logger),
		arkflow.WithDataDir(f.dataDir),
		arkflow.WithSavepoint(f.fromSavepoint),
	}
}

// oneSpec returns the single SPEC argument.
func oneSpec(args []string) (string, error) {
	switch len(args) {
	case 1:
		return args[0], nil
	case 0:
		return "", usagef("expected one SPEC file (got none)")
	default:
		return "", usagef("expected one SPEC file (got %d: %s)", len(args), strings.Join(args, " "))
	}
}
