// Command arkflow validates, plans and runs ArkFlow jobs from JSON or YAML
// spec files, in this process.
//
//	arkflow validate [flags] SPEC              check a spec as a start would; every problem on stderr, one per line
//	arkflow plan [flags] SPEC                  print the physical plan as JSON (--text for people)
//	arkflow run [flags] SPEC                   run the job until its bounded sources end, or SIGINT/SIGTERM
//	arkflow checkpoint [flags] SPEC            take a checkpoint of the job an "arkflow run" is running
//	arkflow savepoint --name NAME [flags] SPEC take a named savepoint of it
//	arkflow checkpoint list URI                list the checkpoints and savepoints in a store
//	arkflow checkpoint inspect URI ID          describe one: tasks, state, watermarks, positions
//	arkflow checkpoint check URI ID SPEC       may SPEC start from that savepoint? (exit 0 yes, 1 no)
//	arkflow wal inspect LOCATION               describe write-ahead logs as a restart would find them
//	arkflow agent --hub URL [flags]            join a Hub's fleet and run the jobs it assigns
//	arkflow version                            print the version of this program
//	arkflow help [COMMAND [SUBCOMMAND]]        list the commands, or every flag of one
//
// # Stream configs
//
// validate and run also recognise ArkFlow's Stream configs (a file whose
// top level has streams; see package stream): validate checks one deeply,
// every problem with its path, and prints notes where a stream would be
// better as a job; run runs it until its inputs end or a SIGINT or SIGTERM
// stops it (what was read goes out first; a second signal stops at once),
// with --data-dir holding durability blocks' logs and --stop-timeout
// bounding the drain; plan refuses it. ArkFlow's own command line works
// too: arkflow -c|--config FILE runs and with -v|--validate validates, for
// Stream configs and job specs alike.
//
// Flags go before or after SPEC, as --flag=value or --flag value; "--"
// ends them. `arkflow COMMAND --help` (or -h) lists a command's flags.
//
// run, validate and plan take the same flags and turn them into the same
// library options, so validate checks what run would start with, and one
// command line works with each: flags only run uses (--dry-run, --control,
// --stop-timeout, --savepoint-on-stop, --drain-on-stop, --metrics-addr, --state-addr,
// --quiet) are accepted and
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
// # Reading logs and checkpoint stores
//
// wal inspect and checkpoint list, inspect and check need no running job
// and write nothing; they go through the packages wal (wal.Inspect) and
// checkpoint (checkpoint.Open, checkpoint.Check), and --json prints those
// packages' results. wal inspect takes a log's directory, a source's, a
// job's (./arkflow-data/<job id>/wal) or s3://bucket/prefix, and takes no
// lock, so it also reads the logs of a running job. The checkpoint
// subcommands take a store's URI (a spec's checkpoint.object_store_uri)
// and an ID: a savepoint's name or a checkpoint's id, or savepoints/NAME
// and checkpoints/ID where a name is all digits. Without a subcommand,
// arkflow checkpoint still asks a running job for a checkpoint, so a SPEC
// file named list, inspect or check is given as ./list. For s3:// the
// endpoint and credentials come from AWS_ENDPOINT_URL, AWS_REGION,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, as for run.
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
// # State queries
//
// run --state-addr HOST:PORT serves the job's state by key, on a listener
// of its own: GET /api/v1/jobs/{id}/state/{operator}?key=K answers one
// key (arkflow.Job.QueryHandler: JSON rows; 404, 400, 503), without key a
// page of a scan (prefix, from, to, limit, after). State is data: with
// $ARKFLOW_STATE_TOKEN set, every request needs it as a bearer token, and
// without it the command warns. agent --state-addr serves the same routes
// for the jobs the Agent runs and reports their address to the Hub
// (--state-url when the Hub reaches it by another), which then answers
// the same path for the whole fleet.
//
// # Progress
//
// run with stderr on a terminal draws live lines there, one
// per source task (per source operator, "in ×16", when there are more
// than 8 source tasks):
//
//	in-0 [=========>------------] 5,500 of 12,000 rows  6,012 rows/s  wm 2023-11-14T22:13:23.870Z  late 31
//
// the rows it read, its rate over the last 5 s, its position of its end
// when the connector knows them (connectors.ProgressReporter: a bounded
// generate input in rows, a file in bytes), the lowest watermark of its
// tasks ("end" once its bounded input ended) and the late rows of the
// window operators downstream. While a restart restores a checkpoint a
// bar above them counts bytes and keys restored of the total; when the
// restore ends a line saying what it restored replaces it. The source
// lines stay when the job ends, with the run's average rate. Log lines
// print above the lines, never through them; stdout, where stdout sinks
// write, is never touched. --quiet turns the lines off; they are off
// anyway when stderr is not a terminal (a pipe, a file, a service
// manager's log), and when the job has a stdout sink and stdout is a
// terminal too, whose rows would land among the lines.
//
// # Logs
//
// run, validate, plan and agent log to stderr, as slog text (key=value)
// by default or, with --log-format json, one JSON object a line (time,
// level, msg, then the record's keys); -v adds debug records. Every
// record of run names its job (job=); a job's records also use operator,
// subtask, checkpoint (the checkpoint ID) and error, each once (package
// arkflow, "Logging"). arkflow-hub takes the same --log-format and -v.
// Any other --log-format value is a command-line mistake (exit 2).
//
// # Exit status
//
// 0 on success; 1 when the spec is invalid (every problem on stderr, one
// per line) or the job failed (its "job failed" log record carries the
// error, which is not printed again); 2 for a mistake on the command line,
// printed as one line that names the fix.
// checkpoint check exits 0 when a start would accept the savepoint, 1
// when it would refuse it (the reason on stdout), 2 for a usage mistake
// and 3 when it could not tell (the spec is invalid, the store cannot be
// read); wal inspect exits 1 for a log a restart would refuse.
package main
