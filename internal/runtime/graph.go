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

func (r *Runtime) instantiate(st statestore.Backend) (chains []*chainInstance, sources []*sourceHead, sinks []*sinkInstance, err error) {
	// WALs hold a lock on their directory: one that opened must be closed
	// if instantiation fails.
	var wals []*durable.Source
	defer func() {
		if err != nil {
			for _, w := range wals {
				w.CloseWAL()
			}
		}
	}()
	g := r.g
	plan := g.Plan
	spec := g.Spec
	par := map[string]int{}
	for _, op := range spec.Operators {
		par[op.ID] = spec.OperatorParallelism(&op)
	}
	// Inboxes of chain heads that receive over channels.
	type key struct {
		chain string
		sub   int
	}
	inboxes := map[key]*inbox{}
	coPart := build.CoPartitioned(spec)
	// slotIndex[(edge, fromSub, toSub)] = slot at the receiver.
	type slotKey struct {
		edge     string
		from, to int
	}
	slotOf := map[slotKey]int{}
	chainOfOp := map[string]job.Chain{}
	for _, c := range plan.Chains {
		for _, op := range c.Operators {
			chainOfOp[op] = c
		}
	}
	// Count slots per receiving chain instance, in a deterministic order.
	slots := map[key]int{}
	for _, e := range plan.Edges {
		if e.Mode == job.EdgeChained {
			continue
		}
		to := chainOfOp[e.To]
		for t := 0; t < par[e.To]; t++ {
			if !r.isLocal(job.TaskID(e.To, t)) {
				continue // placement units are closed under edges
			}
			for f := 0; f < par[e.From]; f++ {
				if e.Mode == job.EdgeForward && f != t {
					continue
				}
				k := key{to.ID, t}
				slotOf[slotKey{e.ID, f, t}] = slots[k]
				slots[k]++
			}
		}
	}
	for k, n := range slots {
		inboxes[k] = newInbox(n, r.opts.ChannelCapacity)
	}
	// Build nodes.
	nodes := map[string]*node{} // task ID -> node
	info := func(op string, sub int) connectors.TaskInfo {
		return connectors.TaskInfo{JobID: spec.ID, OperatorID: op, Subtask: sub, Parallelism: par[op], Logger: r.log.With("operator", op, "subtask", sub)}
	}
	fail := func(e error) {
		if err == nil {
			err = e
		}
	}
	for _, c := range plan.Chains {
		for sub := 0; sub < c.Parallelism; sub++ {
			// A run of part of the job creates only its chain instances
			// (a chain instance lies in one placement unit).
			if !r.isLocal(job.TaskID(c.Head, sub)) {
				continue
			}
			ci := &chainInstance{id: fmt.Sprintf("%s-%d", c.ID, sub), inbox: inboxes[key{c.ID, sub}], log: r.log.With("chain", fmt.Sprintf("%s-%d", c.ID, sub)), barriers: r.barriers, restoredWM: r.restoredWatermarks}
			for _, opID := range c.Operators {
				op, _ := spec.Operator(opID)
				task := job.TaskID(opID, sub)
				m := &taskMetrics{task: task, op: opID}
				m.watermark.Store(eventtime.NoWatermark)
				m.finite.Store(eventtime.NoWatermark)
				n := &node{task: task, opID: opID, m: m}
				switch op.Kind {
				case job.KindSource:
					src, e := g.Inputs[opID].NewSource(info(opID, sub))
					if e != nil {
						fail(fmt.Errorf("creating source %s: %w", task, e))
						continue
					}
					// Read before a WAL wraps the source.
					pr, _ := src.(connectors.ProgressReporter)
					raw := src // the connector's own, for its metrics
					var ds *durable.Source
					if cfg := g.Durability[opID]; cfg != nil {
						ds, e = durable.Open(context.Background(), cfg, src, r.opts.DataDir, info(opID, sub), task, durable.Job{Checkpoints: spec.Checkpoint != nil})
						if e != nil {
							fail(e)
							continue
						}
						wals = append(wals, ds)
						src = ds
					}
					if ps, ok := r.startPositions[task]; ok {
						p, can := src.(connectors.Positioner)
						if !can && len(ps) == 0 {
							// Nothing consumed at the checkpoint: the
							// configured start is where it resumes anyway.
						} else if !can {
							fail(fmt.Errorf("source %s cannot resume from positions (its connector does not implement connectors.Positioner)", task))
							continue
						}
						if e := p.Seek(ps); e != nil {
							fail(fmt.Errorf("source %s: seeking to %v: %w", task, ps, e))
							continue
						}
					}
					st, e := r.sourceTime(opID, sub)
					if e != nil {
						fail(fmt.Errorf("source %s: %w", task, e))
						continue
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
					sources = append(sources, ci.source)
					n.inst = ops.Passthrough{}
				case job.KindSink:
					snk, e := g.Outputs[opID].NewSink(info(opID, sub))
					if e != nil {
						fail(fmt.Errorf("creating sink %s: %w", task, e))
						continue
					}
					sinks = append(sinks, &sinkInstance{task: task, snk: snk})
					m.conn = snk
					n.inst = newSinkOp(task, snk, m)
					n.onBarrier = r.barriers.arrived
					ci.sinks = append(ci.sinks, task)
				default:
					t, _ := plan.Task(task)
					stInfo := info(opID, sub)
					stInfo.JobID = stateJob(spec)
					var ckptWM func() (int64, bool)
					if spec.Checkpoint != nil {
						ckptWM = func() (int64, bool) { return r.checkpointWatermark(task) }
					}
					groups := keys.HashGrouper(spec.MaxParallelism)
					if build.CoPartitionedKeyed(spec, op, coPart) {
						// Its rows were not routed by key group: its keys
						// stay in its own range (see job.Source.KeyedBy).
						groups = keys.RangeGrouper(t.KeyGroups())
					}
					inst, e := g.Ops[opID].New(ops.Task{TaskInfo: stInfo, State: st, KeyGroups: t.KeyGroups(), MaxParallelism: spec.MaxParallelism, Groups: groups,
						Now: func() int64 { return r.opts.Clock.Now().UnixMilli() }, CheckpointWatermark: ckptWM})
					if e != nil {
						fail(fmt.Errorf("creating operator %s: %w", task, e))
						continue
					}
					n.inst = inst
					if gg, ok := inst.(ops.Gauger); ok {
						m.gauges = gg
					}
					if jd, ok := inst.(ops.Journaled); ok {
						r.mu.Lock()
						if r.journals == nil {
							r.journals = map[string]*statestore.Journal{}
						}
						r.journals[task] = jd.Journal()
						r.mu.Unlock()
					}
				}
				nodes[task] = n
				if len(ci.nodes) == 0 {
					// The chain's head reads the chain's inbox.
					m.inbox = ci.inbox
				}
				ci.nodes = append(ci.nodes, n)
				// Published only once complete: Metrics and Details read
				// it from other goroutines.
				r.mu.Lock()
				r.tasks = append(r.tasks, m)
				r.mu.Unlock()
			}
			if len(ci.nodes) > 0 {
				ci.head = ci.nodes[0]
			}
			chains = append(chains, ci)
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	// Wire edges.
	for _, e := range plan.Edges {
		for f := 0; f < par[e.From]; f++ {
			if !r.isLocal(job.TaskID(e.From, f)) {
				continue
			}
			from := nodes[job.TaskID(e.From, f)]
			port := ops.PortMain
			if e.Port == job.PortLate {
				port = ops.PortLate
			}
			switch e.Mode {
			case job.EdgeChained:
				from.children[port] = append(from.children[port], nodes[job.TaskID(e.To, f)])
				continue
			}
			to := chainOfOp[e.To]
			w := &edgeWriter{edge: e.ID, mode: e.Mode}
			for t := 0; t < par[e.To]; t++ {
				if e.Mode == job.EdgeForward && t != f {
					continue
				}
				w.targets = append(w.targets, inboxes[key{to.ID, t}].slots[slotOf[slotKey{e.ID, f, t}]])
			}
			if e.Mode == job.EdgeKeyGroups {
				op, _ := spec.Operator(e.To)
				idx := g.Schemas[e.From].FieldIndices(op.KeyField)
				if len(idx) == 0 {
					return nil, nil, nil, fmt.Errorf("edge %s: key field %q is not in the rows of %q", e.ID, op.KeyField, e.From)
				}
				w.keyCol = idx[0]
				w.router = keys.NewRouter(spec.MaxParallelism, par[e.To])
			}
			from.writers[port] = append(from.writers[port], w)
		}
	}
	return chains, sources, sinks, nil
}
