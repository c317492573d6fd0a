package planner

import (
	"fmt"
	"sort"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/job"
)

// LateEdges returns the implicit edges of a spec: one from every window
// or join operator to the late_event_route sink of each event-time source
// upstream of it whose late_event_policy is route. They carry late rows (and rows
// with a null event time) with their original columns; a spec does not
// declare them, because an explicit edge from a window carries its results.
func LateEdges(s *job.Spec) []job.Edge {
	in := map[string][]string{}
	for _, e := range s.Edges {
		in[e.To] = append(in[e.To], e.From)
	}
	var out []job.Edge
	for _, op := range s.Operators {
		if op.Kind != job.KindWindow && op.Kind != job.KindJoin {
			continue
		}
		seen := map[string]bool{}
		for _, src := range UpstreamSources(s, op.ID, in) {
			t := src.Time
			if t == nil || t.LateEventPolicy != job.LateRoute || t.LateEventRoute == "" || seen[t.LateEventRoute] {
				continue
			}
			seen[t.LateEventRoute] = true
			out = append(out, job.Edge{ID: op.ID + "-late-" + t.LateEventRoute, From: op.ID, To: t.LateEventRoute})
		}
	}
	return out
}

// UpstreamSources returns the sources from which rows reach an operator,
// in spec order. in maps operators to their upstream operators (nil: built
// from the spec's edges).
func UpstreamSources(s *job.Spec, op string, in map[string][]string) []job.Source {
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
	var out []job.Source
	for _, src := range s.Sources {
		if seen[src.OperatorID] {
			out = append(out, src)
		}
	}
	return out
}

// NewPlan computes the plan of a valid spec. The spec must have passed
// validation (CheckStructure at least): NewPlan assumes known endpoints and
// an acyclic graph, and returns an error otherwise.
func NewPlan(s *job.Spec) (*job.Plan, error) {
	v, err := NewVersion(s)
	if err != nil {
		return nil, err
	}
	spec := v.Spec()
	p := &job.Plan{JobID: spec.ID, Version: spec.Version, Digest: v.Digest, MaxParallelism: spec.MaxParallelism, Spec: spec}
	par := map[string]int{}
	for i := range spec.Operators {
		op := &spec.Operators[i]
		par[op.ID] = OperatorParallelism(spec, op)
	}
	type edge struct {
		job.Edge
		port string
	}
	var edges []edge
	for _, e := range spec.Edges {
		edges = append(edges, edge{Edge: e})
	}
	for _, e := range LateEdges(spec) {
		edges = append(edges, edge{Edge: e, port: job.PortLate})
	}
	all := make([]job.Edge, len(edges))
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
		pe := job.PlanEdge{ID: e.ID, From: e.From, To: e.To, Partitioned: e.Partitioned, Port: e.port}
		switch {
		case e.Partitioned:
			pe.Mode = job.EdgeKeyGroups
		case par[e.From] != par[e.To]:
			pe.Mode = job.EdgeRebalance
		case inDeg[e.To] == 1:
			pe.Mode = job.EdgeChained
		default:
			pe.Mode = job.EdgeForward
		}
		p.Edges = append(p.Edges, pe)
	}
	sort.Slice(p.Edges, func(i, j int) bool { return p.Edges[i].ID < p.Edges[j].ID })
	// Chained edges have a single-input target, so following them from the
	// target back to its only upstream finds the head. Topological order
	// guarantees the upstream was resolved first.
	for _, id := range order {
		for _, e := range p.Edges {
			if e.To == id && e.Mode == job.EdgeChained {
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
		p.Chains = append(p.Chains, job.Chain{ID: chainID(id), Head: id, Operators: members[id], Parallelism: par[id]})
	}
	// Tasks, in spec operator order (as ArkFlow v1 lists them).
	for _, op := range spec.Operators {
		n := par[op.ID]
		for s := 0; s < n; s++ {
			p.Tasks = append(p.Tasks, job.Task{
				ID:          TaskID(op.ID, s),
				OperatorID:  op.ID,
				Subtask:     s,
				Parallelism: n,
				Partitions:  []job.TaskPartition{{ID: s, KeyGroup: keys.RangeFor(spec.MaxParallelism, n, s)}},
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
func topoOrder(s *job.Spec, edges []job.Edge) ([]string, error) {
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
func placementUnits(s *job.Spec, p *job.Plan, chainOf map[string]string, par map[string]int) []job.PlacementUnit {
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
		case job.EdgeChained:
			// Same chain instance.
		case job.EdgeForward:
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
	var units []job.PlacementUnit
	for _, tasks := range groups {
		units = append(units, job.PlacementUnit{Tasks: tasks})
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

// Task returns the task of p with the given ID.
func Task(p *job.Plan, id string) (job.Task, bool) {
	for _, t := range p.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return job.Task{}, false
}

// OperatorTasks returns the tasks of one operator of p in subtask order.
func OperatorTasks(p *job.Plan, operator string) []job.Task {
	var ts []job.Task
	for _, t := range p.Tasks {
		if t.OperatorID == operator {
			ts = append(ts, t)
		}
	}
	return ts
}

// ChainOf returns the chain of p that runs an operator.
func ChainOf(p *job.Plan, operator string) (job.Chain, bool) {
	for _, c := range p.Chains {
		for _, op := range c.Operators {
			if op == operator {
				return c, true
			}
		}
	}
	return job.Chain{}, false
}

// OperatorParallelism is the number of subtasks op of s runs with: its
// own parallelism, or the job's.
func OperatorParallelism(s *job.Spec, op *job.Operator) int {
	if op.Parallelism > 0 {
		return op.Parallelism
	}
	return s.Parallelism
}

// Kinds lists every operator kind ArkFlow v1 knows, in its order.
var Kinds = []string{job.KindSource, job.KindMap, job.KindFilter, job.KindAggregate, job.KindWindow, job.KindJoin, job.KindSink, job.KindUDF}
