package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flagsOf returns the flags a command defines, as a fresh flag set.
func flagsOf(c *command) *flag.FlagSet {
	fs := newFlagSet(c.name)
	c.setup(fs)
	return fs
}

// Every way of asking for a command's help exits 0 and prints its usage
// line and every one of its flags with a description, on stdout.
func TestHelpListsEveryFlag(t *testing.T) {
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {c.name, "-help"}, {"help", c.name}, {c.name, "x.yaml", "--help"}} {
			code, out, errOut := runCLI(args...)
			if code != 0 || errOut != "" {
				t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
				continue
			}
			if !strings.HasPrefix(out, "usage: "+c.usage()+"\n") {
				t.Errorf("%v: no usage line in:\n%s", args, out)
			}
			flagsOf(c).VisitAll(func(f *flag.Flag) {
				name := "--" + f.Name
				if len(f.Name) == 1 {
					name = "-" + f.Name
				}
				found := false
				for _, l := range strings.Split(out, "\n") {
					fields := strings.Fields(l)
					// "  --name VALUE  description", and the description is there.
					found = found || len(fields) >= 2 && fields[0] == name && len(l) > len("  "+name)+10
				}
				if !found {
					t.Errorf("%v: flag %s is not listed with a description in:\n%s", args, name, out)
				}
			})
		}
	}
}

func TestHelpOverview(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "--help"}, {"help", "help"}, {"-h", "-h"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("%v: command %s is not listed:\n%s", args, c.name, out)
			}
		}
		if !strings.Contains(out, "./arkflow-data") {
			t.Errorf("%v: the default data directory is not documented:\n%s", args, out)
		}
	}
}

// validate and plan take every flag run takes, with the same defaults,
// so one command line works with each (they share jobFlags).
func TestValidateAndPlanTakeRunsFlags(t *testing.T) {
	runFlags := flagsOf(lookup("run"))
	for _, name := range []string{"validate", "plan"} {
		fs := flagsOf(lookup(name))
		runFlags.VisitAll(func(f *flag.Flag) {
			g := fs.Lookup(f.Name)
			if g == nil {
				t.Errorf("%s has no --%s", name, f.Name)
			} else if g.DefValue != f.DefValue {
				t.Errorf("%s --%s defaults to %q, run's to %q", name, f.Name, g.DefValue, f.DefValue)
			}
		})
	}
	line := []string{"--data-dir", t.TempDir(), "--stop-timeout=5s", "--control", "x.sock", "--savepoint-on-stop", "sp", "--dry-run", "-v", checkpointExample}
	for _, name := range []string{"validate", "plan"} {
		if code, _, errOut := runCLI(append([]string{name}, line...)...); code != 0 {
			t.Errorf("%s with run's command line: exit %d: %s", name, code, errOut)
		}
		drainLine := []string{name, "--drain-on-stop", "--stop-timeout=5s", "--data-dir", t.TempDir(), checkpointExample}
		if code, _, errOut := runCLI(drainLine...); code != 0 {
			t.Errorf("%v: exit %d: %s", drainLine, code, errOut)
		}
	}
}

// Flags work before and after SPEC, as --flag=value or --flag value, and
// "--" ends them.
func TestFlagOrder(t *testing.T) {
	const spec = "../../job/testdata/v1-orders.json"
	dir := t.TempDir()
	same := func(what string, a, b []string) {
		t.Helper()
		codeA, outA, errA := runCLI(a...)
		codeB, outB, errB := runCLI(b...)
		if codeA != 0 || codeB != 0 || outA != outB || outA == "" {
			t.Errorf("%s: %v and %v differ:\nexit %d %q %q\nexit %d %q %q", what, a, b, codeA, outA, errA, codeB, outB, errB)
		}
	}
	same("plan --text", []string{"plan", "--text", spec}, []string{"plan", spec, "--text"})
	same("plan --text=true", []string{"plan", "--text=true", spec}, []string{"plan", spec, "-text"})
	same("validate --data-dir", []string{"validate", "--data-dir", dir, spec}, []string{"validate", spec, "--data-dir=" + dir})
	same("flags on both sides", []string{"plan", "--text", "--data-dir", dir, spec}, []string{"plan", "--data-dir", dir, spec, "--text"})
	same("--", []string{"plan", "--text", "--", spec}, []string{"plan", spec, "--text"})
	if _, text, _ := runCLI("plan", spec, "--text"); !strings.HasPrefix(text, "job orders version 1") {
		t.Errorf("plan SPEC --text did not print the text plan:\n%s", text)
	}

	// After "--" everything is SPEC, even what looks like a flag.
	code, _, errOut := runCLI("plan", spec, "--", "--text")
	if code != 2 || !strings.Contains(errOut, "expected one SPEC file (got 2: "+spec+" --text)") {
		t.Errorf("plan SPEC -- --text: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI("plan", "--", "--text")
	if code != 1 || !strings.Contains(errOut, "--text: no such file") {
		t.Errorf("plan -- --text: exit %d: %s", code, errOut)
	}
	// "--" as a flag's value is the value, not the end of the flags.
	code, _, errOut = runCLI("validate", "--from-savepoint", "--", spec, "--text")
	if code != 2 || !strings.Contains(errOut, "flag provided but not defined: -text") {
		t.Errorf("validate --from-savepoint -- SPEC --text: exit %d: %s", code, errOut)
	}
}

// A usage mistake exits 2 with one line on stderr that names the fix
// (and the usage), never a dump of the flags; stdout stays empty.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "arkflow: no command; usage: arkflow COMMAND"},
		{[]string{"frobnicate"}, `arkflow: unknown command "frobnicate"; usage: arkflow COMMAND`},
		{[]string{"-v", "run", "x.yaml"}, "arkflow: flags go after the command"},
		{[]string{"run"}, "arkflow run: expected one SPEC file (got none); usage: arkflow run [flags] SPEC"},
		{[]string{"validate"}, "arkflow validate: expected one SPEC file (got none); usage: arkflow validate [flags] SPEC"},
		{[]string{"plan", "a.yaml", "b.yaml"}, "arkflow plan: expected one SPEC file (got 2: a.yaml b.yaml); usage: arkflow plan [flags] SPEC"},
		{[]string{"run", "--bogus", "x.yaml"}, "arkflow run: flag provided but not defined: -bogus; usage: arkflow run [flags] SPEC"},
		{[]string{"validate", "x.yaml", "--data-dir"}, "arkflow validate: flag needs an argument: -data-dir; usage:"},
		{[]string{"run", "--stop-timeout", "soon", "x.yaml"}, `arkflow run: invalid value "soon" for flag -stop-timeout`},
		{[]string{"run", "--stop-timeout=-1s", "x.yaml"}, "arkflow run: --stop-timeout must not be negative (got -1s)"},
		{[]string{"validate", "--stop-timeout=-1s", "x.yaml"}, "arkflow validate: --stop-timeout must not be negative (got -1s)"},
		{[]string{"run", "--drain-on-stop", "--savepoint-on-stop", "sp", "x.yaml"}, "arkflow run: --drain-on-stop and --savepoint-on-stop sp do not go together"},
		{[]string{"validate", "x.yaml", "--savepoint-on-stop=sp", "--drain-on-stop"}, "arkflow validate: --drain-on-stop and --savepoint-on-stop sp do not go together"},
		{[]string{"checkpoint", "--timeout=0s", "x.yaml"}, "arkflow checkpoint: --timeout must be positive (got 0s)"},
		{[]string{"checkpoint"}, "arkflow checkpoint: expected the job's SPEC file, or --control SOCKET (got neither); usage: arkflow checkpoint"},
		{[]string{"checkpoint", "a.yaml", "b.yaml"}, "arkflow checkpoint: expected one SPEC file (got 2: a.yaml b.yaml)"},
		{[]string{"checkpoint", "--data-dir=", "a.yaml"}, "arkflow checkpoint: --data-dir is empty"},
		{[]string{"savepoint", "x.yaml"}, "arkflow savepoint: --name is required; usage: arkflow savepoint --name NAME"},
		{[]string{"version", "now"}, "arkflow version: takes no arguments (got now); usage: arkflow version"},
		{[]string{"help", "nope"}, `arkflow help: unknown command "nope"`},
		{[]string{"help", "run", "plan"}, `arkflow help: run has no subcommand "plan"`},
		{[]string{"wal"}, "arkflow wal: expected a subcommand: inspect; usage: arkflow wal inspect"},
		{[]string{"wal", "inspekt", "dir"}, `arkflow wal: unknown subcommand "inspekt" (known: inspect)`},
		{[]string{"wal", "inspect"}, "arkflow wal inspect: expected one LOCATION (got 0); usage: arkflow wal inspect [flags]"},
		{[]string{"wal", "inspect", "--bogus", "d"}, "arkflow wal inspect: flag provided but not defined: -bogus"},
		{[]string{"checkpoint", "list"}, "arkflow checkpoint list: expected one store URI (got 0); usage: arkflow checkpoint list [flags] URI"},
		{[]string{"checkpoint", "inspect", "file:///x"}, "arkflow checkpoint inspect: expected a store URI and an ID (got 1: file:///x)"},
		{[]string{"checkpoint", "check", "file:///x", "v1"}, "arkflow checkpoint check: expected a store URI, an ID and a SPEC file (got 2: file:///x v1)"},
		{[]string{"help", "checkpoint", "list", "x"}, "arkflow help: expected at most a COMMAND and a SUBCOMMAND (got 3: checkpoint list x)"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, code, errOut)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", tc.args, out)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
			t.Errorf("%v: want one line on stderr, got:\n%s", tc.args, errOut)
		}
		if !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("%v: stderr %q, want it to start with %q", tc.args, errOut, tc.want)
		}
	}
	// A missing file is not a usage mistake: exit 1, and the reason.
	if code, _, errOut := runCLI("validate", "missing.json"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: %d %s", code, errOut)
	}
}

// Without --data-dir, run keeps Badger state and write-ahead logs whose
// spec gives no path under ./arkflow-data/<job id>, so such a spec runs as
// it is; validate and plan use the same default.
func TestRunDefaultDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("in.jsonl", []byte("{\"user\":\"ann\"}\n{\"user\":\"bob\"}\n{\"user\":\"ann\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `id: defaults
state: {backend: badger}
durability: {sync: always}
operators:
  - {id: in, kind: source}
  - {id: count, kind: aggregate, key_field: user, config: {emit: final, aggregates: [{function: count, as: n}]}}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: count, partitioned: true}
  - {id: b, from: count, to: out}
sources:
  - {operator_id: in, input_type: file, config: {path: in.jsonl, schema: [{name: user, type: string}]}}
sinks:
  - {operator_id: out, output_type: file, config: {path: out.jsonl}}
`
	if err := os.WriteFile("job.yaml", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"validate", "plan"} {
		if code, _, errOut := runCLI(cmd, "job.yaml"); code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, code, errOut)
		}
	}
	if code, _, errOut := runCLI("run", "job.yaml"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	got, _ := os.ReadFile("out.jsonl")
	if string(got) != "{\"user\":\"ann\",\"n\":2}\n{\"user\":\"bob\",\"n\":1}\n" {
		t.Errorf("output %q", got)
	}
	for _, p := range []string{"arkflow-data/defaults/state/FORMAT", "arkflow-data/defaults/wal/in/0/LOCK"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("run without --data-dir: %v", err)
		}
	}
	// With --data-dir the same spec keeps nothing in the default.
	other := filepath.Join(dir, "other")
	os.Remove("out.jsonl")
	if code, _, errOut := runCLI("run", "job.yaml", "--data-dir", other); code != 0 {
		t.Fatalf("run --data-dir: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "defaults", "state", "FORMAT")); err != nil {
		t.Errorf("run --data-dir %s: %v", other, err)
	}
}

// Flags about checkpoints on a spec without a checkpoint block would be
// ignored (--from-savepoint, --control) or fail only at the stop
// (--savepoint-on-stop): run refuses them before anything runs, and
// validate and plan say the same.
func TestCheckpointFlagsNeedACheckpointBlock(t *testing.T) {
	const spec = "../../testdata/clicks.yaml" // no checkpoint block
	for _, flag := range []string{"--from-savepoint", "--savepoint-on-stop", "--control"} {
		for _, cmd := range []string{"run", "validate", "plan"} {
			code, out, errOut := runCLI(cmd, spec, flag, "v1")
			if code != 1 || out != "" || !strings.HasPrefix(errOut, flag+` v1: job "clicks" has no checkpoint block`) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", cmd, flag, code, out, errOut)
			}
		}
	}
}
