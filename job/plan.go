package job

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Edge modes in a plan: how rows cross an edge at run time.
const (
	// EdgeChained: the downstream operator runs in the same task chain and
	// is called directly, without a channel.
	EdgeChained = "chained"
	// EdgeForward: subtask s sends to subtask s of the downstream operator
	// over a channel (same parallelism, but the downstream operator has
	// several inputs, so it heads its own chain).
	EdgeForward = "forward"
	// EdgeRebalance: batches go round-robin to the downstream subtasks
	// (forward edge between different parallelisms).
	EdgeRebalance = "rebalance"
	// EdgeKeyGroups: every row goes to the downstream subtask that owns the
	// key group of its key (partitioned edge).
	EdgeKeyGroups = "key_groups"
)

// Plan is the physical plan of a job version: its tasks with their
// key-group ranges, the operator chains that run them, how each edge is
// executed, and the placement units a Hub may put on different nodes. It is
// what a Hub sends to an Agent, and it is JSON-serializable; the "spec" and
// "tasks" fields have ArkFlow v1's JobPlan shape.
type Plan struct {
	JobID          string     `json:"job_id"`
	Version        uint64     `json:"version"`
	Digest         string     `json:"digest"`
	MaxParallelism int        `json:"max_parallelism"`
	Spec           *Spec      `json:"spec"`
	Tasks          []Task     `json:"tasks"`
	Chains         []Chain    `json:"chains"`
	Edges          []PlanEdge `json:"edges"`
	// PlacementUnits are the groups of tasks that must run in one process:
	// the connected components of the task graph. An edge never crosses
	// units, so no data crosses nodes.
	PlacementUnits []PlacementUnit `json:"placement_units"`
}

// Task is one subtask of one operator: "{operator}-{subtask}".
type Task struct {
	ID          string `json:"id"`
	OperatorID  string `json:"operator_id"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	// Partitions holds the key groups this task owns, in ArkFlow v1's
	// shape: one partition whose id is the subtask.
	Partitions []TaskPartition `json:"partitions"`
	// Chain is the ID of the chain that runs this task.
	Chain string `json:"chain"`
}

// TaskPartition is ArkFlow v1's PartitionSpec.
type TaskPartition struct {
	ID       int           `json:"id"`
	KeyGroup KeyGroupRange `json:"key_group"`
}

// Chain is a tree of operators fused into one task: forward edges between
// equal parallelisms where the downstream operator has no other input. It
// runs as one goroutine per subtask, and operators in it call each other
// directly.
type Chain struct {
	ID string `json:"id"`
	// Head is the first operator; data enters the chain there.
	Head string `json:"head"`
	// Operators lists the chain's operators, head first, in topological
	// order.
	Operators   []string `json:"operators"`
	Parallelism int      `json:"parallelism"`
}

// PlanEdge is a spec edge with its run-time mode.
type PlanEdge struct {
	ID          string `json:"id"`
	From        string `json:"from"`
	To          string `json:"to"`
	Partitioned bool   `json:"partitioned"`
	Mode        string `json:"mode"`
	// Port is "late" for the implicit edge that carries a window's late
	// rows to its source's late_event_route sink (the implicit edges the planner adds), and
	// empty for the edges of the spec.
	Port string `json:"port,omitempty"`
}

// PortLate names the output of a window operator that carries late rows.
const PortLate = "late"

// PlacementUnit is a set of tasks that exchange data and so must share a
// process.
type PlacementUnit struct {
	ID    string   `json:"id"`
	Tasks []string `json:"tasks"`
}

// JSON encodes the plan as indented JSON.
func (p *Plan) JSON() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// chainText draws the tree of a chain from op: "a -> b" for one
// downstream operator, "a -> {b, c -> d}" for a fan-out, whose branches
// run side by side on the same rows.
func chainText(op string, next map[string][]string) string {
	switch to := next[op]; len(to) {
	case 0:
		return op
	case 1:
		return op + " -> " + chainText(to[0], next)
	default:
		branches := make([]string, len(to))
		for i, t := range to {
			branches[i] = chainText(t, next)
		}
		return op + " -> {" + strings.Join(branches, ", ") + "}"
	}
}

// String renders the plan for people: chains (each drawn as the tree its
// operators form), edges, tasks with their key-group ranges, and
// placement units.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s version %d (%s), max_parallelism %d\n", p.JobID, p.Version, p.Digest, p.MaxParallelism)
	b.WriteString("chains:\n")
	next := map[string][]string{} // an operator's downstream operators in its chain
	for _, e := range p.Edges {
		if e.Mode == EdgeChained {
			next[e.From] = append(next[e.From], e.To)
		}
	}
	for _, c := range p.Chains {
		fmt.Fprintf(&b, "  %s  x%d  %s\n", c.ID, c.Parallelism, chainText(c.Head, next))
	}
	b.WriteString("edges:\n")
	for _, e := range p.Edges {
		fmt.Fprintf(&b, "  %s  %s -> %s  %s\n", e.ID, e.From, e.To, e.Mode)
	}
	b.WriteString("tasks:\n")
	for _, t := range p.Tasks {
		fmt.Fprintf(&b, "  %-24s key groups %-12s %s\n", t.ID, t.Partitions[0].KeyGroup, t.Chain)
	}
	b.WriteString("placement units:\n")
	for _, u := range p.PlacementUnits {
		fmt.Fprintf(&b, "  %s: %s\n", u.ID, strings.Join(u.Tasks, ", "))
	}
	return b.String()
}
