package runtime

// This file holds the instances a run builds from the build.Graph: chain
// instances, operator nodes, source heads and sink instances, and
// instantiate, which creates every subtask, sizes the inboxes (one slot
// per upstream sender) and wires chained children and edge writers.

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/build"
	"github.com/arkflow-rs/arkflow-go/internal/durable"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
)

// chainInstance is one subtask of one chain.
type chainInstance struct {
	id     string
	head   *node
	source *sourceHead // set when the chain starts at a source
	inbox  *inbox
	nodes  []*node
	log    *slog.Logger
	// sinks are the sink tasks in the chain; barriers learns when they end.
	sinks    []string
	barriers *barriers
	// restoredWM holds the restored checkpoint's watermarks by task.
	restoredWM map[string]int64
}

// node is one operator subtask inside a chain instance.
type node struct {
	task string
	opID string
	inst ops.Instance
	// children and writers per output port (ops.PortMain, ops.PortLate).
	children [2][]*node
	writers  [2][]*edgeWriter
	m        *taskMetrics
	// onBarrier is set on sink nodes: it reports a barrier's arrival.
	onBarrier func(task string, id uint64)
}

type sourceHead struct {
	task string
	src  connectors.Source
	time *sourceTime     // nil: no watermarks but the final one
	wal  *durable.Source // the source wrapped with its WAL, or nil
	// barriers delivers checkpoint barrier requests to the head's loop;
	// done is closed when the loop has returned.
	barriers chan barrierReq
	done     chan struct{}
	// drain is closed by Drain; draining records that the read stopped
	// for it (the input then ends with a watermark of +∞).
	drain    <-chan struct{}
	draining atomic.Bool
}

type sinkInstance struct {
	task string
	snk  connectors.Sink
}

// instantiate creates every local subtask of the graph and wires it: the
// inboxes first (their slot counts fix each sender's slot), then one chain
// instance per chain and local subtask with its nodes, then the edges
// between nodes. A node that cannot be created is left out and the
// others are still created, so the first error is returned after all were
// tried; on any error every WAL opened so far is closed again. ctx bounds
// the opening of the WALs (durable.Open): cancelled, none opens.
func (r *Runtime) instantiate(ctx context.Context, st statestore.Backend) (chains []*chainInstance, sources []*sourceHead, sinks []*sinkInstance, err error) {
	b := &instantiation{r: r, st: st, topo: r.topology(), nodes: map[string]*node{}, coPart: build.CoPartitioned(r.g.Spec)}
	// WALs hold a lock on their directory: one that opened must be closed
	// if instantiation fails.
	defer func() {
		if err != nil {
			for _, w := range b.wals {
				w.CloseWAL()
			}
		}
	}()
	for _, c := range r.g.Plan.Chains {
		for sub := 0; sub < c.Parallelism; sub++ {
			// A run of part of the job creates only its chain instances
			// (a chain instance lies in one placement unit).
			if !r.isLocal(planner.TaskID(c.Head, sub)) {
				continue
			}
			chains = append(chains, b.chainInstance(ctx, c, sub))
		}
	}
	if b.err != nil {
		return nil, nil, nil, b.err
	}
	if err := b.wireEdges(); err != nil {
		return nil, nil, nil, err
	}
	return chains, b.sources, b.sinks, nil
}

// chainSub names one subtask of one chain.
type chainSub struct {
	chain string
	sub   int
}

// slotKey names the channel one upstream subtask of an edge sends to one
// downstream subtask over.
type slotKey struct {
	edge     string
	from, to int
}

// topology is what instantiate derives from the plan before it creates
// anything.
type topology struct {
	par     map[string]int       // operator ID -> parallelism
	chainOf map[string]job.Chain // operator ID -> its chain
	// inboxes of the local chain instances that receive over channels,
	// and the slot of each (edge, from, to) at its receiver.
	inboxes map[chainSub]*inbox
	slotOf  map[slotKey]int
}

// topology counts the slots of every local receiving chain instance, one
// per upstream sender of each non-chained edge (a forward edge has one
// sender per subtask), and creates its inbox with that many. Edges are
// visited in plan order, so slot numbers are deterministic.
func (r *Runtime) topology() topology {
	spec, plan := r.g.Spec, r.g.Plan
	t := topology{par: map[string]int{}, chainOf: map[string]job.Chain{}, inboxes: map[chainSub]*inbox{}, slotOf: map[slotKey]int{}}
	for _, op := range spec.Operators {
		t.par[op.ID] = planner.OperatorParallelism(spec, &op)
	}
	for _, c := range plan.Chains {
		for _, op := range c.Operators {
			t.chainOf[op] = c
		}
	}
	slots := map[chainSub]int{}
	from := map[chainSub][]string{} // the upstream operator of each slot
	for _, e := range plan.Edges {
		if e.Mode == job.EdgeChained {
			continue
		}
		to := t.chainOf[e.To]
		for dst := 0; dst < t.par[e.To]; dst++ {
			if !r.isLocal(planner.TaskID(e.To, dst)) {
				continue // placement units are closed under edges
			}
			for f := 0; f < t.par[e.From]; f++ {
				if e.Mode == job.EdgeForward && f != dst {
					continue
				}
				k := chainSub{to.ID, dst}
				t.slotOf[slotKey{e.ID, f, dst}] = slots[k]
				slots[k]++
				from[k] = append(from[k], e.From)
			}
		}
	}
	for k, n := range slots {
		t.inboxes[k] = newInbox(n, r.opts.ChannelCapacity)
		t.inboxes[k].from = from[k]
	}
	return t
}

// instantiation is one call of instantiate in progress: what it has
// created so far and the first error.
type instantiation struct {
	r      *Runtime
	st     statestore.Backend
	topo   topology
	coPart map[string]string
	nodes  map[string]*node // task ID -> node
	wals   []*durable.Source
	// sources and sinks are those created whole, in creation order.
	sources []*sourceHead
	sinks   []*sinkInstance
	err     error
}

// fail keeps the first error.
func (b *instantiation) fail(e error) {
	if b.err == nil {
		b.err = e
	}
}

// info is the TaskInfo of one subtask of an operator.
func (b *instantiation) info(op string, sub int) connectors.TaskInfo {
	return connectors.TaskInfo{JobID: b.r.g.Spec.ID, OperatorID: op, Subtask: sub, Parallelism: b.topo.par[op], Logger: b.r.log.With("operator", op, "subtask", sub)}
}

// chainInstance creates subtask sub of chain c with a node per operator.
// A node that fails is recorded and left out of the chain. Each node's
// metrics are published to the runtime only once the node is complete:
// Metrics and Details read them from other goroutines.
func (b *instantiation) chainInstance(ctx context.Context, c job.Chain, sub int) *chainInstance {
	r := b.r
	id := fmt.Sprintf("%s-%d", c.ID, sub)
	ci := &chainInstance{id: id, inbox: b.topo.inboxes[chainSub{c.ID, sub}], log: r.log.With("chain", id), barriers: r.barriers, restoredWM: r.restoredWatermarks}
	for _, opID := range c.Operators {
		n, err := b.node(ctx, ci, opID, sub)
		if err != nil {
			b.fail(err)
			continue
		}
		b.nodes[n.task] = n
		if len(ci.nodes) == 0 {
			// The chain's head reads the chain's inbox.
			n.m.inbox = ci.inbox
		}
		ci.nodes = append(ci.nodes, n)
		r.mu.Lock()
		r.tasks = append(r.tasks, n.m)
		r.mu.Unlock()
	}
	if len(ci.nodes) > 0 {
		ci.head = ci.nodes[0]
	}
	return ci
}

// node creates subtask sub of operator opID in ci: a source head, a sink
// or an operator instance, by kind.
func (b *instantiation) node(ctx context.Context, ci *chainInstance, opID string, sub int) (*node, error) {
	op, _ := b.r.g.Spec.Operator(opID)
	task := planner.TaskID(opID, sub)
	m := &taskMetrics{task: task, op: opID}
	m.watermark.Store(eventtime.NoWatermark)
	m.finite.Store(eventtime.NoWatermark)
	n := &node{task: task, opID: opID, m: m}
	var err error
	switch op.Kind {
	case job.KindSource:
		err = b.sourceNode(ctx, ci, n, sub)
	case job.KindSink:
		err = b.sinkNode(ci, n, sub)
	default:
		err = b.operatorNode(n, op, sub)
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

// sourceNode creates the source of n's task and makes it ci's head: the
// connector's source, wrapped by its WAL when the source is durable,
// seeked to the restored positions, with its event-time tracker. The
// node itself passes batches through.
func (b *instantiation) sourceNode(ctx context.Context, ci *chainInstance, n *node, sub int) error {
	r, g, spec := b.r, b.r.g, b.r.g.Spec
	opID, task, m := n.opID, n.task, n.m
	src, err := g.Inputs[opID].NewSource(b.info(opID, sub))
	if err != nil {
		return fmt.Errorf("creating source %s: %w", task, err)
	}
	// Read before a WAL wraps the source.
	pr, _ := src.(connectors.ProgressReporter)
	raw := src // the connector's own, for its metrics
	var ds *durable.Source
	if cfg := g.Durability[opID]; cfg != nil {
		ds, err = durable.Open(ctx, cfg, src, r.opts.DataDir, b.info(opID, sub), task, durable.Job{Checkpoints: spec.Checkpoint != nil})
		if err != nil {
			return err
		}
		b.wals = append(b.wals, ds)
		src = ds
	}
	if ps, ok := r.startPositions[task]; ok {
		p, can := src.(connectors.Positioner)
		if !can && len(ps) == 0 {
			// Nothing consumed at the checkpoint: the
			// configured start is where it resumes anyway.
		} else if !can {
			return fmt.Errorf("source %s cannot resume from positions (its connector does not implement connectors.Positioner)", task)
		}
		if err := p.Seek(ps); err != nil {
			return fmt.Errorf("source %s: seeking to %v: %w", task, ps, err)
		}
	}
	st, err := r.sourceTime(opID, sub)
	if err != nil {
		return fmt.Errorf("source %s: %w", task, err)
	}
	ci.source = &sourceHead{task: task, src: src, time: st, wal: ds, done: make(chan struct{}), drain: r.draining}
	if spec.Checkpoint != nil {
		ci.source.barriers = make(chan barrierReq)
	}
	if ds != nil {
		m.gauges = ds
	}
	if pr != nil {
		m.gauges = sourceProgress{wal: m.gauges, pr: pr}
	}
	m.source, m.conn = ci.source, raw
	b.sources = append(b.sources, ci.source)
	n.inst = ops.Passthrough{}
	return nil
}

// sinkNode creates the sink of n's task; the node writes to it and
// reports the barriers that reach it.
func (b *instantiation) sinkNode(ci *chainInstance, n *node, sub int) error {
	snk, err := b.r.g.Outputs[n.opID].NewSink(b.info(n.opID, sub))
	if err != nil {
		return fmt.Errorf("creating sink %s: %w", n.task, err)
	}
	b.sinks = append(b.sinks, &sinkInstance{task: n.task, snk: snk})
	n.m.conn = snk
	n.inst = newSinkOp(n.task, snk, n.m)
	n.onBarrier = b.r.barriers.arrived
	ci.sinks = append(ci.sinks, n.task)
	return nil
}

// operatorNode creates the operator instance of n's task over the state
// backend, with its key groups, and registers its journal when it has
// one (checkpoints flush it).
func (b *instantiation) operatorNode(n *node, op *job.Operator, sub int) error {
	r, g, spec := b.r, b.r.g, b.r.g.Spec
	task := n.task
	t, _ := planner.Task(g.Plan, task)
	stInfo := b.info(n.opID, sub)
	stInfo.JobID = stateJob(spec)
	var ckptWM func() (int64, bool)
	if spec.Checkpoint != nil {
		ckptWM = func() (int64, bool) { return r.checkpointWatermark(task) }
	}
	groups := keys.HashGrouper(spec.MaxParallelism)
	coPart := build.CoPartitionedKeyed(spec, op, b.coPart)
	if coPart {
		// Its rows were not routed by key group: its keys
		// stay in its own range (see job.Source.KeyedBy).
		groups = keys.RangeGrouper(t.Partitions[0].KeyGroup)
	}
	inst, err := g.Ops[n.opID].New(ops.Task{TaskInfo: stInfo, State: b.st, KeyGroups: t.Partitions[0].KeyGroup, MaxParallelism: spec.MaxParallelism, Groups: groups,
		Now: func() int64 { return r.opts.Clock.Now().UnixMilli() }, CheckpointWatermark: ckptWM})
	if err != nil {
		return fmt.Errorf("creating operator %s: %w", task, err)
	}
	n.inst = inst
	r.registerQuery(n.opID, sub, b.topo.par[n.opID], coPart, inst)
	if gg, ok := inst.(ops.Gauger); ok {
		n.m.gauges = gg
	}
	if jd, ok := inst.(ops.Journaled); ok {
		r.mu.Lock()
		if r.journals == nil {
			r.journals = map[string]*statestore.Journal{}
		}
		r.journals[task] = jd.Journal()
		r.mu.Unlock()
	}
	return nil
}

// wireEdges connects the created nodes along the plan's edges: a chained
// edge makes the receiver a child of the sender; any other edge gives the
// sender a writer over the slots of its receivers (one, for forward), and
// a key-groups edge a router over the key column.
func (b *instantiation) wireEdges() error {
	spec, g, topo := b.r.g.Spec, b.r.g, b.topo
	for _, e := range g.Plan.Edges {
		for f := 0; f < topo.par[e.From]; f++ {
			if !b.r.isLocal(planner.TaskID(e.From, f)) {
				continue
			}
			from := b.nodes[planner.TaskID(e.From, f)]
			port := ops.PortMain
			if e.Port == job.PortLate {
				port = ops.PortLate
			}
			switch e.Mode {
			case job.EdgeChained:
				from.children[port] = append(from.children[port], b.nodes[planner.TaskID(e.To, f)])
				continue
			}
			to := topo.chainOf[e.To]
			w := &edgeWriter{edge: e.ID, mode: e.Mode}
			for t := 0; t < topo.par[e.To]; t++ {
				if e.Mode == job.EdgeForward && t != f {
					continue
				}
				w.targets = append(w.targets, topo.inboxes[chainSub{to.ID, t}].slots[topo.slotOf[slotKey{e.ID, f, t}]])
			}
			if e.Mode == job.EdgeKeyGroups {
				op, _ := spec.Operator(e.To)
				key := op.KeyField
				if k, ok := g.Ops[e.To].InputKeys[e.From]; ok {
					key = k
				}
				idx := g.Schemas[e.From].FieldIndices(key)
				if len(idx) == 0 {
					return fmt.Errorf("edge %s: key field %q is not in the rows of %q", e.ID, key, e.From)
				}
				w.keyCol = idx[0]
				w.router = keys.NewRouter(spec.MaxParallelism, topo.par[e.To])
			}
			from.writers[port] = append(from.writers[port], w)
		}
	}
	return nil
}
