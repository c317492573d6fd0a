// Package hubclient makes a Go service an Agent of an ArkFlow Hub: the
// service registers with the Hub, and runs the jobs the Hub assigns to it
// with the same runtime as arkflow.Job, next to its own code.
//
//	agent, err := hubclient.New(hubclient.Config{
//		HubURL:    "http://hub.internal:8080",
//		NodeID:    "orders-7", // stable across restarts, unique in the fleet
//		NodeToken: os.Getenv("ARKFLOW_NODE_TOKEN"),
//		DataDir:   "/var/lib/orders/arkflow",
//		Jobs:      []*arkflow.Builder{clicksJob}, // Go functions and push sources the Hub's specs name
//	})
//	...
//	err = agent.Run(ctx) // until ctx ends; stops its jobs cleanly
//
// The Agent speaks ArkFlow v1's agent protocol: it registers with its
// capabilities and a random boot id per process, heartbeats on its own
// goroutine at a third of the Hub's lease (a long start, checkpoint or
// restore never lets the lease lapse), polls for commands and runs each on
// its own goroutine, and reports its jobs. Job commands are fenced by
// generation: a command older than the job it would touch is refused, and
// every result carries the command's generation back. A failed call to the
// Hub ends the session after a few attempts; the Agent registers again
// with a jittered backoff (250 ms doubling to 10 s) while its jobs keep
// running.
//
// A Hub-shipped spec names Go code by operator ID, as a Builder's spec
// does: give the Agent the Builder of each such job (Config.Jobs), and the
// spec's operators bind to the Builder's Go values (MapFunc, FilterFunc,
// ProcessFunc, push sources, func sinks) by ID. Connectors come from
// Config.Environment.
//
// A Hub may give an Agent a part of a job: the tasks of some of its
// placement units (the Agent declares the placement_units capability).
// The Agent then runs only those tasks, takes no checkpoint of its own,
// cuts its part of each checkpoint the Hub starts and, when the Hub asks
// it, merges every Agent's part into the sealed checkpoint; a newer
// generation of the same tasks (another Agent failed over) is adopted
// without a restart. A Go service that runs part of a job must still
// give the whole job's Builder in Config.Jobs.
//
// # Metrics and probes
//
// Agent.Collector is a prometheus.Collector of the Agent (its Hub
// session, heartbeats, commands, jobs by state) and of every job it
// holds, for the service's own registry; Agent.Status is a snapshot for a
// status page or a readiness probe (registered, and each job's state and
// checkpoint health, a restore's progress included). `arkflow agent
// --metrics-addr` serves both.
package hubclient
