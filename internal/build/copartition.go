package build

import (
	"github.com/arkflow-rs/arkflow-go/internal/ops/windowop"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// CoPartitioned returns, for every operator whose input rows arrive
// already partitioned by a key, that key column: a source with KeyedBy,
// and every operator whose inputs are all non-partitioned edges from
// operators co-partitioned by the same key with the same parallelism
// (forward or chained edges, so each subtask sees only its source
// subtask's partitions). A keyed operator whose key_field is that column
// is keyed without a partitioned edge: all rows of a key reach one
// subtask. Operators not in the map are not co-partitioned. The spec
// must have resolvable, acyclic edges (planner.CheckStructure).
func CoPartitioned(s *job.Spec) map[string]string {
	out := map[string]string{}
	for _, src := range s.Sources {
		if src.KeyedBy != "" {
			out[src.OperatorID] = src.KeyedBy
		}
	}
	if len(out) == 0 {
		return out
	}
	in := map[string][]job.Edge{}
	for _, e := range s.Edges {
		in[e.To] = append(in[e.To], e)
	}
	par := map[string]int{}
	for i := range s.Operators {
		par[s.Operators[i].ID] = planner.OperatorParallelism(s, &s.Operators[i])
	}
	// Propagate until nothing changes: the graph is small and acyclic.
	for changed := true; changed; {
		changed = false
		for _, op := range s.Operators {
			if _, done := out[op.ID]; done || op.Kind == job.KindSource || len(in[op.ID]) == 0 {
				continue
			}
			key, ok := "", true
			for _, e := range in[op.ID] {
				k, up := out[e.From]
				if !up || e.Partitioned || par[e.From] != par[op.ID] || (key != "" && k != key) {
					ok = false
					break
				}
				key = k
			}
			if ok {
				out[op.ID] = key
				changed = true
			}
		}
	}
	return out
}

// CoPartitionedKeyed reports whether op is a keyed operator made keyed by
// co-partitioning (its key_field is the key its rows arrive partitioned
// by) rather than by partitioned edges: its state is kept per subtask. A
// join is when each input edge is a forward one from an operator
// co-partitioned by that side's key, at the join's parallelism (the
// inputs' partitions then hold the same keys, as Kafka Streams requires
// of the topics it joins: the sources' KeyedBy is that promise).
func CoPartitionedKeyed(s *job.Spec, op *job.Operator, cp map[string]string) bool {
	if op.Kind == job.KindJoin {
		return coPartitionedJoin(s, op, cp)
	}
	if op.KeyField == "" || op.Kind == job.KindSource || op.Kind == job.KindSink {
		return false
	}
	k, ok := cp[op.ID]
	return ok && k == op.KeyField && planner.OperatorParallelism(s, op) > 1
}

// coPartitionedJoin is CoPartitionedKeyed for a join.
func coPartitionedJoin(s *job.Spec, op *job.Operator, cp map[string]string) bool {
	sides := windowop.JoinInputKeys(op)
	par := planner.OperatorParallelism(s, op)
	if len(sides) != 2 || par == 1 {
		return false
	}
	n := 0
	for _, e := range s.Edges {
		if e.To != op.ID {
			continue
		}
		up, _ := s.Operator(e.From)
		key, ok := sides[e.From]
		if !ok || e.Partitioned || up == nil || cp[e.From] != key || planner.OperatorParallelism(s, up) != par {
			return false
		}
		n++
	}
	return n == 2
}
