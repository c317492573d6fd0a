// Command arkflow validates, plans and runs ArkFlow jobs from JSON or YAML
// spec files, in this process.
//
//	arkflow validate [flags] SPEC              check a spec as a start would; every problem on stderr, one per line
//	arkflow plan [flags] SPEC                  print the physical plan as JSON (--text for people)
//	arkflow run [flags] SPEC                   run the job until its bounded sources end, or SIGINT/SIGTERM
//	arkflow checkpoint [flags] SPEC            take a checkpoint of the job an "arkflow run" is running
//	arkflow savepoint --name NAME [flags] SPEC take a named savepoint of it
//	arkflow version                            print the version of this program
//	arkflow help [COMMAND]                     list the commands, or every flag of one
//
// Flags go before or after SPEC, as --flag=value or --flag value; "--"
// ends them. `arkflow COMMAND --help` (or -h) lists a command's flags.
//
// run, validate and plan take the same flags and turn them into the same
// library options, so validate checks what run would start with, and one
// command line works with each: flags only run uses (--dry-run, --control,
// --stop-timeout, --savepoint-on-stop, --drain-on-stop, --metrics-addr) are accepted and
// change nothing in the other two, except that all three refuse flags
// about checkpoints for a spec without a checkpoint block, and
// --drain-on-stop together with --savepoint-on-stop.
//
// # Data directory
//
// State and write-ahead logs whose spec gives no path live under
// --data-dir, by default ./arkflow-data (relative to the working
// directory), so a spec with Badger state or a WAL runs as it is:
//
//	./arkflow-data/<job id>/state   Badger state (a state block without path)
//	./arkflow-data/<job id>/wal     write-ahead logs (a durability block without path)
//	./arkflow-data/<job id>.sock    the control socket of a job with a checkpoint block
//
// A job with neither keeps nothing there. checkpoint and savepoint find the
// control socket with the same default: run them from the same directory,
// or give them the same --data-dir (or --control SOCKET).
//
// # Stopping
//
// run stops gracefully on the first SIGINT or SIGTERM (rows in flight are
// written and acknowledged, within --stop-timeout; with
// --savepoint-on-stop NAME a savepoint is taken first) and at once on the
// second. Open windows keep their contents for the next run. With
// --drain-on-stop the first signal drains the job instead
// (arkflow.Job.Drain): the input ends where it is, every open window fires
// and is written, and a job with a checkpoint block takes a final
// checkpoint; a restart resumes after the last row read and does not fire
// those windows again (a row for one of them is late).
//
// # Metrics and probes
//
// run --metrics-addr HOST:PORT serves the job over HTTP from before it
// starts until it ends: /metrics (arkflow.Job.Collector, with the Go
// runtime's and the process's metrics, in a registry of its own),
// /healthz (200 while the process serves), /readyz (200 while the job
// runs; 503 with a JSON reason while it starts or restores, stops or
// failed, or after 3 checkpoint rounds in a row failed) and /status (the
// control socket's JSON). Port 0 takes any free port; the log line
// "metrics listening" names the address.
//
// agent --metrics-addr serves the same routes for an Agent: /metrics has
// the Agent's families (arkflow_agent_*: registered, heartbeats, commands,
// generation per job, jobs by state; see hubclient.Agent.Collector) and
// every job it holds, told apart by the label job; /readyz is 200 once the
// Agent is registered with the Hub and every job it holds runs, and 503
// naming the job and why (e.g. "job clicks: restoring the checkpoint's
// state: 10 of 100 bytes, 3 keys") otherwise; /status is
// hubclient.Agent.Status as JSON. arkflow-hub has the flag too. The
// routes have no authentication: bind them to loopback or an internal
// network.
//
// # Exit status
//
// 0 on success; 1 when the spec is invalid or the job failed (every
// problem on stderr); 2 for a mistake on the command line, printed as one
// line that names the fix.
package main
