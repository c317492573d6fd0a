package main

// The commands that read what jobs left behind, without a running job:
// arkflow wal inspect (write-ahead logs) and arkflow checkpoint list,
// inspect and check (a checkpoint store). They go through the public
// packages wal and checkpoint, as a program would.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// exitError ends a command with its own exit status after printing err
// (one problem per line), for commands whose status says more than
// ok/failed (checkpoint check).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e exitError) Unwrap() error { return e.err }

// The S3 settings of the reading commands come from the environment, as
// for arkflow run; help says so once.
const s3Env = "For s3:// the endpoint and credentials come from the environment, as for\n" +
	"run: AWS_ENDPOINT_URL (http://host:port for plain HTTP, e.g. a local MinIO),\n" +
	"AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."

var walInspect = &command{name: "wal inspect", args: "[flags] (DIR | file:///abs/dir | s3://bucket/prefix)",
	short: "describe write-ahead logs as a restart would find them",
	long: "Wal inspect reads the write-ahead logs at the location and prints, for each,\n" +
		"its cursor (the entries a restart skips), the source positions stored with\n" +
		"it, its segments, and the entries a restart replays (pending). It changes\n" +
		"nothing and takes no lock, so it can look at the logs of a running job\n" +
		"(whose newest segment may then show a write in progress as a torn tail).\n\n" +
		"DIR is one log, a source's logs (DIR/<subtask>) or a job's\n" +
		"(./arkflow-data/<job id>/wal for arkflow run); s3://bucket/prefix finds every\n" +
		"object-store log under prefix ({prefix}/{node_id}/{stream}/). A log a restart\n" +
		"would refuse is printed with the restart's error, naming the segment and the\n" +
		"offset, and the command exits 1.\n\n" + s3Env,
	setup: walInspectCmd}

var walCmd = &command{name: "wal", args: "inspect [flags] LOCATION", short: "read write-ahead logs: arkflow wal inspect LOCATION",
	long: "Wal reads the write-ahead logs jobs keep in front of their sources.\n\n" +
		"subcommands:\n  inspect     " + walInspect.short,
	subs: []*command{walInspect},
	setup: func(*flag.FlagSet) func([]string, io.Writer, io.Writer) error {
		return func(args []string, _, _ io.Writer) error {
			if len(args) == 0 {
				return usagef("expected a subcommand: inspect")
			}
			return usagef("unknown subcommand %q (known: inspect)", args[0])
		}
	}}

func walInspectCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	asJSON := fs.Bool("json", false, "print the logs as a JSON array (wal.Info's fields) instead of text")
	entries := fs.Bool("entries", false, "list every stored entry (sequence, source, size; pending or acknowledged)")
	return func(args []string, stdout, _ io.Writer) error {
		if len(args) != 1 {
			return usagef("expected one LOCATION (got %d%s)", len(args), listed(args))
		}
		logs, err := wal.Inspect(context.Background(), args[0], wal.InspectOptions{Entries: *entries})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, logs)
		}
		for i, l := range logs {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			printLog(stdout, l)
		}
		return nil
	}
}

func printLog(w io.Writer, l wal.Info) {
	fmt.Fprintf(w, "log %s", l.Location)
	if l.Source != "" {
		fmt.Fprintf(w, " (source %s, subtask %d)", l.Source, l.Subtask)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  cursor    %d", l.Cursor)
	if len(l.Positions) > 0 {
		fmt.Fprintf(w, ", positions %s", positions(l.Positions))
	}
	fmt.Fprintln(w)
	switch {
	case l.Last == 0:
		fmt.Fprintln(w, "  entries   none stored")
	default:
		fmt.Fprintf(w, "  entries   %d..%d stored, %d pending", l.First, l.Last, l.Pending)
		if l.Pending > 0 {
			fmt.Fprintf(w, " (a restart replays %d..%d)", max(l.First, l.Cursor+1), l.Last)
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, g := range l.Segments {
		row := []string{"  segment   " + g.Name, "empty", "", sizeOf(g.Bytes)}
		if g.Entries > 0 {
			row[1], row[2] = fmt.Sprintf("%d..%d", g.First, g.Last), fmt.Sprintf("%d entries", g.Entries)
		}
		var notes []string
		if g.Passed {
			notes = append(notes, "passed by the cursor")
		}
		if g.Damage != "" {
			notes = append(notes, "damaged (a restart does not read it): "+g.Damage)
		}
		if len(notes) > 0 {
			row = append(row, strings.Join(notes, "; "))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	if l.Torn != "" {
		fmt.Fprintf(w, "  torn      %s (a restart cuts it off)\n", l.Torn)
	}
	if len(l.Entries) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range l.Entries {
			state := "acknowledged"
			if e.Seq > l.Cursor {
				state = "pending"
			}
			fmt.Fprintf(tw, "  entry     %d\t%s\t%s\t%s\n", e.Seq, e.Source, sizeOf(int64(e.Bytes)), state)
		}
		tw.Flush()
	}
}

// checkpointSubs are the subcommands of arkflow checkpoint that read a
// store; without one, arkflow checkpoint asks a running job for one.
var checkpointSubs = []*command{
	{name: "checkpoint list", args: "[flags] URI",
		short: "list the checkpoints and savepoints in a store",
		long: "Checkpoint list prints the checkpoints and savepoints of every job in the\n" +
			"checkpoint store URI (a spec's checkpoint.object_store_uri: file:///abs/dir or\n" +
			"s3://bucket/prefix), or of --job's: id, job version, state format, when, size,\n" +
			"tasks, and whether each is complete (a restore uses only those) and the\n" +
			"latest checkpoint (the one a restart restores). It reads every manifest, no\n" +
			"state, and writes nothing.\n\n" + s3Env,
		setup: checkpointListCmd},
	{name: "checkpoint inspect", args: "[flags] URI ID",
		short: "describe one checkpoint or savepoint: its tasks, state, watermarks, positions",
		long: "Checkpoint inspect prints what the manifest of one checkpoint or savepoint of\n" +
			"the store URI records, task by task: state object and size, watermark, source\n" +
			"positions, attempt and node. ID is a savepoint's name or a checkpoint's id\n" +
			"(leading zeros optional); savepoints/NAME and checkpoints/ID say which when a\n" +
			"savepoint's name is all digits. With --verify it also reads every state\n" +
			"object and checks it against the manifest, as a restore does, and exits 1 if\n" +
			"one is missing or damaged.\n\n" + s3Env,
		setup: checkpointInspectCmd},
	{name: "checkpoint check", args: "[flags] URI ID SPEC",
		short: "say whether SPEC may start from a savepoint (exit 0) or would be refused (exit 1)",
		long: "Checkpoint check says whether \"arkflow run --from-savepoint NAME SPEC\" would\n" +
			"restore the savepoint NAME (ID; or a checkpoint, by its id) from the store URI,\n" +
			"and if not, why, with the words the start would fail with: a downgrade, a\n" +
			"state format change, another max_parallelism, other operators at the same job\n" +
			"version, a missing or incomplete savepoint. It builds SPEC as validate does\n" +
			"and runs the start's own choice, touching no state and reading no state\n" +
			"object (checkpoint inspect --verify does). URI stands for the spec's\n" +
			"checkpoint.object_store_uri; a start reads the store its spec names.\n\n" +
			"Exit status: 0 a start would accept it; 1 it would refuse it; 2 a usage\n" +
			"mistake; 3 the check could not be made (SPEC is invalid, the store cannot be\n" +
			"read).\n\n" + s3Env,
		setup: checkpointCheckCmd},
}

func checkpointListCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	jobID := fs.String("job", "", "only the job `ID` (default: every job in the store)")
	asJSON := fs.Bool("json", false, "print a JSON array of checkpoint.Info instead of text")
	return func(args []string, stdout, _ io.Writer) error {
		if len(args) != 1 {
			return usagef("expected one store URI (got %d%s)", len(args), listed(args))
		}
		ctx := context.Background()
		st, err := checkpoint.Open(ctx, args[0], checkpoint.StoreOptions{})
		if err != nil {
			return err
		}
		jobs := []string{*jobID}
		if *jobID == "" {
			if jobs, err = st.Jobs(ctx); err != nil {
				return err
			}
		}
		all := []checkpoint.Info{}
		for _, j := range jobs {
			infos, err := st.List(ctx, j)
			if err != nil {
				return err
			}
			all = append(all, infos...)
		}
		if *asJSON {
			return printJSON(stdout, all)
		}
		if len(all) == 0 {
			fmt.Fprintf(stdout, "no checkpoints or savepoints in %s\n", st.URI())
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tKIND\tID\tVERSION\tFORMAT\tCREATED\tSIZE\tTASKS\tSTATUS")
		for _, in := range all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", in.Job, in.Kind, in.ID, in.JobVersion, in.FormatVersion,
				timeOf(in.Created), sizeOf(in.Bytes), len(in.Tasks), status(in))
		}
		return tw.Flush()
	}
}

func checkpointInspectCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	jobID := fs.String("job", "", "the job `ID` whose artifact it is (default: the store's only job)")
	verify := fs.Bool("verify", false, "also read every state object and check it against the manifest (reads all of the artifact's state)")
	asJSON := fs.Bool("json", false, "print checkpoint.Info as JSON instead of text")
	return func(args []string, stdout, _ io.Writer) error {
		if len(args) != 2 {
			return usagef("expected a store URI and an ID (got %d%s)", len(args), listed(args))
		}
		ctx := context.Background()
		st, err := checkpoint.Open(ctx, args[0], checkpoint.StoreOptions{})
		if err != nil {
			return err
		}
		j := *jobID
		if j == "" {
			jobs, err := st.Jobs(ctx)
			if err != nil {
				return err
			}
			switch len(jobs) {
			case 0:
				return fmt.Errorf("no checkpoints or savepoints in %s", st.URI())
			case 1:
				j = jobs[0]
			default:
				return usagef("the store holds the artifacts of %d jobs (%s): say which with --job", len(jobs), strings.Join(jobs, ", "))
			}
		}
		kind, id, err := resolve(ctx, st, j, args[1])
		if err != nil {
			return err
		}
		in, err := st.Inspect(ctx, j, kind, id)
		if err != nil {
			return err
		}
		var verr error
		if *verify {
			verr = st.Verify(ctx, j, kind, id)
		}
		if *asJSON {
			if err := printJSON(stdout, in); err != nil {
				return err
			}
		} else {
			printArtifact(stdout, in)
			if *verify && verr == nil {
				fmt.Fprintln(stdout, "  verified: every state object matches its manifest entry")
			}
		}
		return verr
	}
}

func printArtifact(w io.Writer, in checkpoint.Info) {
	fmt.Fprintf(w, "%s %s of job %s: %s\n", in.Kind, in.ID, in.Job, status(in))
	if in.Problem != "" && len(in.Tasks) == 0 {
		return
	}
	fmt.Fprintf(w, "  job version %d, state format %d, max_parallelism %d, generation %d\n", in.JobVersion, in.FormatVersion, in.MaxParallelism, in.Generation)
	fmt.Fprintf(w, "  created %s, plan %s\n", timeOf(in.Created), in.PlanDigest)
	n := 0
	for _, t := range in.Tasks {
		if t.StateChecksum != "" {
			n++
		}
	}
	fmt.Fprintf(w, "  state %s in %s, %s\n", sizeOf(in.Bytes), plural(n, "object"), plural(len(in.Tasks), "task"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TASK\tSTATE\tWATERMARK\tPOSITIONS\tNODE\tATTEMPT")
	for _, t := range in.Tasks {
		state := "-"
		if t.StateChecksum != "" {
			state = sizeOf(t.StateBytes)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.ID, state, timeOf(t.Watermark), dash(positions(t.Positions)), dash(t.Node), dash(t.Attempt))
	}
	tw.Flush()
}

func checkpointCheckCmd(fs *flag.FlagSet) func([]string, io.Writer, io.Writer) error {
	asJSON := fs.Bool("json", false, `print {"job","kind","id","accepted","reason"} as JSON instead of text`)
	return func(args []string, stdout, stderr io.Writer) error {
		if len(args) != 3 {
			return usagef("expected a store URI, an ID and a SPEC file (got %d%s)", len(args), listed(args))
		}
		cant := func(err error) error { return exitError{3, err} }
		spec, err := job.ParseFile(args[2])
		if spec == nil {
			return cant(err)
		}
		ctx := context.Background()
		st, err := checkpoint.Open(ctx, args[0], checkpoint.StoreOptions{})
		if err != nil {
			return cant(err)
		}
		kind, id, err := resolve(ctx, st, spec.ID, args[1])
		var u usageError
		if errors.As(err, &u) {
			return err
		}
		if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return cant(err)
		}
		if err != nil {
			kind, id = checkpoint.KindSavepoint, args[1] // let Check say it is missing
		}
		if cp := spec.Checkpoint; cp != nil && cp.ObjectStoreURI != "" && cp.ObjectStoreURI != st.URI() && !*asJSON {
			fmt.Fprintf(stderr, "note: the spec's checkpoint store is %s; a start reads from there, not from %s\n", cp.ObjectStoreURI, st.URI())
		}
		err = checkpoint.Check(ctx, st, kind, id, spec, checkpoint.CheckOptions{})
		var refused *checkpoint.RefusedError
		if err != nil && !errors.As(err, &refused) {
			return cant(err)
		}
		if *asJSON {
			v := struct {
				Job      string          `json:"job"`
				Kind     checkpoint.Kind `json:"kind"`
				ID       string          `json:"id"`
				Accepted bool            `json:"accepted"`
				Reason   string          `json:"reason,omitempty"`
			}{Job: spec.ID, Kind: kind, ID: id, Accepted: refused == nil}
			if refused != nil {
				v.Reason = refused.Reason
			}
			if err := printJSON(stdout, v); err != nil {
				return err
			}
			if refused != nil {
				return exitError{1, nil}
			}
			return nil
		}
		if refused != nil {
			fmt.Fprintf(stdout, "refused: job %s version %d would not start from %s %s: %s\n", spec.ID, spec.Version, kind, id, refused.Reason)
			return exitError{1, nil}
		}
		fmt.Fprintf(stdout, "ok: job %s version %d can start from %s %s\n", spec.ID, spec.Version, kind, id)
		return nil
	}
}

// resolve finds what ID names among job's artifacts: savepoints/NAME,
// checkpoints/ID, or a bare savepoint name or checkpoint id (ambiguous
// when both exist).
func resolve(ctx context.Context, st *checkpoint.Store, jobID, ref string) (checkpoint.Kind, string, error) {
	if name, ok := strings.CutPrefix(ref, "savepoints/"); ok {
		return checkpoint.KindSavepoint, name, nil
	}
	if id, ok := strings.CutPrefix(ref, "checkpoints/"); ok {
		return checkpoint.KindCheckpoint, id, nil
	}
	infos, err := st.List(ctx, jobID)
	if err != nil {
		return "", "", err
	}
	digits := ref != "" && strings.Trim(ref, "0123456789") == ""
	var found []checkpoint.Info
	for _, in := range infos {
		switch {
		case in.Kind == checkpoint.KindSavepoint && in.ID == ref,
			in.Kind == checkpoint.KindCheckpoint && digits && strings.TrimLeft(in.ID, "0") == strings.TrimLeft(ref, "0"):
			found = append(found, in)
		}
	}
	switch len(found) {
	case 0:
		return "", "", fmt.Errorf("job %q has no savepoint or checkpoint %q in %s: %w", jobID, ref, st.URI(), checkpoint.ErrNotFound)
	case 1:
		return found[0].Kind, found[0].ID, nil
	}
	return "", "", usagef("%q names both savepoint %s and checkpoint %s of job %q: write savepoints/%s or checkpoints/%s", ref, ref, found[0].ID, jobID, ref, ref)
}

func status(in checkpoint.Info) string {
	if !in.Completed {
		return "incomplete: " + in.Problem
	}
	if in.Latest {
		return "completed, latest"
	}
	return "completed"
}

func positions(ps []connectors.Position) string {
	var out []string
	for _, p := range ps {
		s := fmt.Sprintf("%d@%d", p.Partition, p.Offset)
		if p.Topic != "" {
			s = p.Topic + "/" + s
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func timeOf(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func sizeOf(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func listed(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return ": " + strings.Join(args, " ")
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
