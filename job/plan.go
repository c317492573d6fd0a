package job

import (
	"encoding/json"
	"fmt"
	"sort"
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

// KeyGroups returns the key-group range the task owns.
func (t Task) KeyGroups() KeyGroupRange { return t.Partitions[0].KeyGroup }

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
	// rows to its source's late_event_route sink (see LateEdges), and
	// empty for the edges of the spec.
	Port string `json:"port,omitempty"`
}

// PortLate names the output of a window operator that carries late rows.
const PortLate = "late"

// LateEdges returns the implicit edges of a spec: one from every window
// operator to the late_event_route sink of each event-time source upstream
// of it whose late_event_policy is route. They carry late rows (and rows
// with a null event time) with their original columns; a spec does not
// declare them, because an explicit edge from a window carries its results.
func LateEdges(s *Spec) []Edge {
	in := map[string][]string{}
	for _, e := range s.Edges {
		in[e.To] = append(in[e.To], e.From)
	}
	var out []Edge
	for _, op := range s.Operators {
		if op.Kind != KindWindow {
			continue
		}
		seen := map[string]bool{}
		for _, src := range UpstreamSources(s, op.ID, in) {
			t := src.Time
			if t == nil || t.LateEventPolicy != LateRoute || t.LateEventRoute == "" || seen[t.LateEventRoute] {
				continue
			}
			seen[t.LateEventRoute] = true
			out = append(out, Edge{ID: op.ID + "-late-" + t.LateEventRoute, From: op.ID, To: t.LateEventRoute})
		}
	}
	return out
}

// UpstreamSources returns the sources from which rows reach an operator,
// in spec order. in maps operators to their upstream operators (nil: built
// from the spec's edges).
func UpstreamSources(s *Spec, op string, in map[string][]string) []Source {
	if in == nil {
		in = map[string][]string{}
		for _, e := range s.Edges {
			in[e.To] = append(in[e.To], e.From)
		}
	}
	seen := map[string]bool{op: true}
	todo := []string{op}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, m := range in[n] {
			if !seen[m] {
				seen[m] = true
				todo = append(todo, m)
			}
		}
	}
	var out []Source
	for _, src := range s.Sources {
		if seen[src.OperatorID] {
			out = append(out, src)
		}
	}
	return out
}

// PlacementUnit is a set of tasks that exchange data and so must share a
// process.
type PlacementUnit struct {
	ID    string   `json:"id"`
	Tasks []string `json:"tasks"`
}

// NewPlan computes the plan of a valid spec. The spec must have passed
// validation (CheckStructure at least): NewPlan assumes known endpoints and
// an acyclic graph, and returns an error otherwise.
func NewPlan(s *Spec) (*Plan, error) {
	v, err := NewVersion(s)
	if err != nil {
		return nil, err
	}
	spec := v.Spec()
	p := &Plan{JobID: spec.ID, Version: spec.Version, Digest: v.Digest, MaxParallelism: spec.MaxParallelism, Spec: spec}
	par := map[string]int{}
	for i := range spec.Operators {
		op := &spec.Operators[i]
		par[op.ID] = spec.OperatorParallelism(op)
	}
	type edge struct {
		Edge
		port string
	}
	var edges []edge
	for _, e := range spec.Edges {
		edges = append(edges, edge{Edge: e})
	}
	for _, e := range LateEdges(spec) {
		edges = append(edges, edge{Edge: e, port: PortLate})
	}
	all := make([]Edge, len(edges))
	for i, e := range edges {
		all[i] = e.Edge
	}
	order, err := topoOrder(spec, all)
	if err != nil {
		return nil, err
	}
	inDeg := map[string]int{}
	for _, e := range edges {
		inDeg[e.To]++
	}
	// Edge modes and chain membership.
	chainOf := map[string]string{}
	for _, id := range order {
		chainOf[id] = id
	}
	for _, e := range edges {
		pe := PlanEdge{ID: e.ID, From: e.From, To: e.To, Partitioned: e.Partitioned, Port: e.port}
		switch {
		case e.Partitioned:
			pe.Mode = EdgeKeyGroups
		case par[e.From] != par[e.To]:
			pe.Mode = EdgeRebalance
		case inDeg[e.To] == 1:
			pe.Mode = EdgeChained
		default:
			pe.Mode = EdgeForward
		}
		p.Edges = append(p.Edges, pe)
	}
	sort.Slice(p.Edges, func(i, j int) bool { return p.Edges[i].ID < p.Edges[j].ID })
	// Chained edges have a single-input target, so following them from the
	// target back to its only upstream finds the head. Topological order
	// guarantees the upstream was resolved first.
	for _, id := range order {
		for _, e := range p.Edges {
			if e.To == id && e.Mode == EdgeChained {
				chainOf[id] = chainOf[e.From]
			}
		}
	}
	members := map[string][]string{}
	for _, id := range order {
		members[chainOf[id]] = append(members[chainOf[id]], id)
	}
	for _, id := range order {
		if chainOf[id] != id {
			continue
		}
		p.Chains = append(p.Chains, Chain{ID: chainID(id), Head: id, Operators: members[id], Parallelism: par[id]})
	}
	// Tasks, in spec operator order (as ArkFlow v1 lists them).
	for _, op := range spec.Operators {
		n := par[op.ID]
		for s := 0; s < n; s++ {
			p.Tasks = append(p.Tasks, Task{
				ID:          TaskID(op.ID, s),
				OperatorID:  op.ID,
				Subtask:     s,
				Parallelism: n,
				Partitions:  []TaskPartition{{ID: s, KeyGroup: RangeFor(spec.MaxParallelism, n, s)}},
				Chain:       chainID(chainOf[op.ID]),
			})
		}
	}
	p.PlacementUnits = placementUnits(spec, p, chainOf, par)
	return p, nil
}

// TaskID names subtask s of an operator.
func TaskID(operator string, subtask int) string { return fmt.Sprintf("%s-%d", operator, subtask) }

func chainID(head string) string { return "chain-" + head }

// topoOrder orders operators so that every edge goes forward; ties keep
// spec order, so the order is deterministic.
func topoOrder(s *Spec, edges []Edge) ([]string, error) {
	idx := map[string]int{}
	for i, op := range s.Operators {
		idx[op.ID] = i
	}
	inDeg := make([]int, len(s.Operators))
	out := make([][]int, len(s.Operators))
	for _, e := range edges {
		f, ok1 := idx[e.From]
		t, ok2 := idx[e.To]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("job %q: edge %q references an unknown operator", s.ID, e.ID)
		}
		out[f] = append(out[f], t)
		inDeg[t]++
	}
	var order []string
	done := make([]bool, len(s.Operators))
	for len(order) < len(s.Operators) {
		progressed := false
		for i := range s.Operators {
			if done[i] || inDeg[i] > 0 {
				continue
			}
			done[i] = true
			progressed = true
			order = append(order, s.Operators[i].ID)
			for _, t := range out[i] {
				inDeg[t]--
			}
		}
		if !progressed {
			return nil, fmt.Errorf("job %q: the operator graph has a cycle", s.ID)
		}
	}
	return order, nil
}

// placementUnits groups chain instances connected by non-chained edges.
func placementUnits(s *Spec, p *Plan, chainOf map[string]string, par map[string]int) []PlacementUnit {
	type inst struct {
		chain string
		sub   int
	}
	parent := map[inst]inst{}
	var find func(inst) inst
	find = func(x inst) inst {
		if parent[x] == x {
			return x
		}
		r := find(parent[x])
		parent[x] = r
		return r
	}
	union := func(a, b inst) {
		ra, rb := find(a), find(b)
		if ra != rb {
			parent[ra] = rb
		}
	}
	for _, c := range p.Chains {
		for sub := 0; sub < c.Parallelism; sub++ {
			x := inst{c.Head, sub}
			parent[x] = x
		}
	}
	for _, e := range p.Edges {
		from, to := chainOf[e.From], chainOf[e.To]
		switch e.Mode {
		case EdgeChained:
			// Same chain instance.
		case EdgeForward:
			for sub := 0; sub < par[e.From]; sub++ {
				union(inst{from, sub}, inst{to, sub})
			}
		default:
			// Every upstream subtask may send to every downstream one:
			// linking each to subtask 0 of the other side joins them all
			// in O(a+b) instead of O(a·b).
			for a := 0; a < par[e.From]; a++ {
				union(inst{from, a}, inst{to, 0})
			}
			for b := 0; b < par[e.To]; b++ {
				union(inst{from, 0}, inst{to, b})
			}
		}
	}
	groups := map[inst][]string{}
	for _, t := range p.Tasks {
		r := find(inst{chainOf[t.OperatorID], t.Subtask})
		groups[r] = append(groups[r], t.ID)
	}
	var units []PlacementUnit
	for _, tasks := range groups {
		units = append(units, PlacementUnit{Tasks: tasks})
	}
	// Order units by their first task in plan order, then name them.
	pos := map[string]int{}
	for i, t := range p.Tasks {
		pos[t.ID] = i
	}
	for _, u := range units {
		sort.Slice(u.Tasks, func(i, j int) bool { return pos[u.Tasks[i]] < pos[u.Tasks[j]] })
	}
	sort.Slice(units, func(i, j int) bool { return pos[units[i].Tasks[0]] < pos[units[j].Tasks[0]] })
	for i := range units {
		units[i].ID = fmt.Sprintf("unit-%d", i)
	}
	return units
}

// Task returns the task with the given ID.
func (p *Plan) Task(id string) (Task, bool) {
	for _, t := range p.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}

// OperatorTasks returns the tasks of one operator in subtask order.
func (p *Plan) OperatorTasks(operator string) []Task {
	var ts []Task
	for _, t := range p.Tasks {
		if t.OperatorID == operator {
			ts = append(ts, t)
		}
	}
	return ts
}

// ChainOf returns the chain that runs an operator.
func (p *Plan) ChainOf(operator string) (Chain, bool) {
	for _, c := range p.Chains {
		for _, op := range c.Operators {
			if op == operator {
				return c, true
			}
		}
	}
	return Chain{}, false
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
		fmt.Fprintf(&b, "  %-24s key groups %-12s %s\n", t.ID, t.KeyGroups(), t.Chain)
	}
	b.WriteString("placement units:\n")
	for _, u := range p.PlacementUnits {
		fmt.Fprintf(&b, "  %s: %s\n", u.ID, strings.Join(u.Tasks, ", "))
	}
	return b.String()
}
