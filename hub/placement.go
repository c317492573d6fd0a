package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// assignmentPayload is what the Hub keeps with an assignment: the plan
// tasks (whole placement units) the node runs. Empty Tasks means the
// whole job, for Agents that cannot run a part of one.
type assignmentPayload struct {
	Units []string `json:"units,omitempty"`
	Tasks []string `json:"tasks,omitempty"`
}

func assignmentTasks(a hubstore.Assignment) assignmentPayload {
	var p assignmentPayload
	if len(a.Payload) > 0 {
		_ = json.Unmarshal(a.Payload, &p) // written by placeUnits
	}
	return p
}

// physicalPlan is the job.Plan of a stored version: its tasks and
// placement units.
func physicalPlan(v hubstore.JobVersion) (*job.Plan, error) {
	spec, err := job.Parse(v.Spec)
	if err != nil {
		return nil, err
	}
	return planner.NewPlan(spec)
}

// candidate is an online Agent that fits a job.
type candidate struct {
	node  string
	units bool // it can run a part of a job (placement units)
	load  int  // units (or whole jobs) it runs now, other jobs included
	prev  bool // it held an assignment of the job's previous generation
}

// placement puts the job's placement units on the online Agents that fit
// (units are the connected parts of the task graph): a unit is never split, units stay where they ran at the
// previous generation when that node still fits, and the others go to the
// least-loaded fitting Agent. A job of one unit, or without Agents that run
// parts of jobs, goes whole onto one Agent. exclude names nodes that must
// not be used (a failed-over node). None fitting is 409 node_unavailable,
// naming what each node lacks.
func (h *Hub) placement(ctx context.Context, j hubstore.Job, v hubstore.JobVersion, gen int64, exclude map[string]bool) ([]hubstore.Assignment, *hubhttp.Error) {
	return h.place(ctx, j, v, gen, exclude, false)
}

// place is placement; with balance, a unit stays on its node only while
// that node holds fewer than its share of the job's units (the ceiling of
// units over fitting Agents), so units move from crowded Agents to idle
// ones, and no more of them than that.
func (h *Hub) place(ctx context.Context, j hubstore.Job, v hubstore.JobVersion, gen int64, exclude map[string]bool, balance bool) ([]hubstore.Assignment, *hubhttp.Error) {
	var hp requirements
	if err := json.Unmarshal(v.Plan, &hp); err != nil {
		return nil, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, "the stored plan does not decode")
	}
	pp, err := physicalPlan(v)
	if err != nil {
		return nil, hubhttp.NewError(http.StatusInternalServerError, hubwire.CodeInvalidPersistedJob, "the stored spec does not plan: "+err.Error())
	}
	agents, err := h.store.ListAgents(ctx)
	if err != nil {
		return nil, hubhttp.Internal()
	}
	load, err := h.load(ctx, j.JobID)
	if err != nil {
		return nil, hubhttp.Internal()
	}
	unitNode, prevNodes := h.currentPlacement(ctx, j)
	cands, why := h.candidates(agents, hp, exclude, load, prevNodes)
	if len(cands) == 0 {
		msg := "no online agent can run job " + j.JobID
		if len(why) > 0 {
			msg += ": " + strings.Join(why, "; ")
		}
		return nil, hubhttp.NewError(http.StatusConflict, hubwire.CodeNodeUnavailable, msg).WithDetails(map[string]any{"nodes": why})
	}
	var split []candidate
	for _, c := range cands {
		if c.units {
			split = append(split, c)
		}
	}
	if len(pp.PlacementUnits) < 2 || len(split) == 0 {
		return []hubstore.Assignment{placeWhole(j.JobID, gen, cands, pp)}, nil
	}
	return placeUnits(j.JobID, gen, split, pp, unitNode, balance), nil
}

// currentPlacement returns where each placement unit of a running job
// runs at its current generation, and the nodes it runs on.
func (h *Hub) currentPlacement(ctx context.Context, j hubstore.Job) (unitNode map[string]string, nodes map[string]bool) {
	unitNode, nodes = map[string]string{}, map[string]bool{}
	if as, err := h.store.Assignments(ctx, j.JobID, j.Generation); err == nil && j.DesiredState == hubstore.DesiredRunning {
		for _, a := range as {
			nodes[a.NodeID] = true
			for _, u := range assignmentTasks(a).Units {
				unitNode[u] = a.NodeID
			}
		}
	}
	return unitNode, nodes
}

// candidates returns the Agents that fit the job's requirements, with
// their load and whether they ran it at its current generation, and why
// each of the others does not.
func (h *Hub) candidates(agents []hubstore.Agent, hp requirements, exclude map[string]bool, load map[string]int, prevNodes map[string]bool) (cands []candidate, why []string) {
	now := h.cfg.Clock()
	for _, a := range agents {
		if exclude[a.NodeID] {
			why = append(why, a.NodeID+" is failing over")
			continue
		}
		nc := h.compatibility(a, hp, now)
		if !nc.Compatible {
			why = append(why, fmt.Sprintf("%s lacks %s", a.NodeID, strings.Join(nc.MissingCapabilities, ", ")))
			continue
		}
		cands = append(cands, candidate{node: a.NodeID, units: slices.Contains(a.Capabilities.Features, hubwire.CapabilityPlacementUnits),
			load: load[a.NodeID], prev: prevNodes[a.NodeID]})
	}
	return cands, why
}

// assignmentID names the assignment of a job's generation to a node.
func assignmentID(jobID, node string, gen int64) string {
	return fmt.Sprintf("%s:%s:%d", jobID, node, gen)
}

// placeWhole puts the whole job on one Agent: the previous node if it
// still fits, else the least loaded. An Agent that runs placement units
// gets them all named.
func placeWhole(jobID string, gen int64, cands []candidate, pp *job.Plan) hubstore.Assignment {
	best := cands[0]
	for _, c := range cands[1:] {
		if (c.prev && !best.prev) || (c.prev == best.prev && c.load < best.load) {
			best = c
		}
	}
	var p assignmentPayload
	if best.units {
		for _, u := range pp.PlacementUnits {
			p.Units = append(p.Units, u.ID)
			p.Tasks = append(p.Tasks, u.Tasks...)
		}
	}
	a := hubstore.Assignment{AssignmentID: assignmentID(jobID, best.node, gen), NodeID: best.node}
	if len(p.Tasks) > 0 {
		a.Payload, _ = json.Marshal(p)
	}
	return a
}

// placeUnits spreads the placement units over the Agents that run them
// (split): a unit stays on the node it ran on while that node fits (and,
// with balance, holds fewer than its share), the others go one by one to
// the least-loaded Agent (ties by name). One assignment per node used, by
// node.
func placeUnits(jobID string, gen int64, split []candidate, pp *job.Plan, unitNode map[string]string, balance bool) []hubstore.Assignment {
	byNode := map[string]*assignmentPayload{}
	fits := map[string]*candidate{}
	for i := range split {
		fits[split[i].node] = &split[i]
	}
	add := func(c *candidate, u job.PlacementUnit) {
		p := byNode[c.node]
		if p == nil {
			p = &assignmentPayload{}
			byNode[c.node] = p
		}
		p.Units = append(p.Units, u.ID)
		p.Tasks = append(p.Tasks, u.Tasks...)
		c.load++
	}
	share := (len(pp.PlacementUnits) + len(split) - 1) / len(split)
	kept := map[string]int{}
	var moved []job.PlacementUnit
	for _, u := range pp.PlacementUnits {
		if c := fits[unitNode[u.ID]]; c != nil && (!balance || kept[c.node] < share) {
			kept[c.node]++
			add(c, u)
			continue
		}
		moved = append(moved, u)
	}
	for _, u := range moved {
		best := &split[0]
		for i := range split[1:] {
			if c := &split[i+1]; c.load < best.load || (c.load == best.load && c.node < best.node) {
				best = c
			}
		}
		add(best, u)
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make([]hubstore.Assignment, 0, len(nodes))
	for _, n := range nodes {
		b, _ := json.Marshal(byNode[n])
		out = append(out, hubstore.Assignment{AssignmentID: assignmentID(jobID, n, gen), NodeID: n, Payload: b})
	}
	return out
}

// load counts, per node, the placement units (or whole jobs) of the jobs
// desired running, except job skip.
func (h *Hub) load(ctx context.Context, skip string) (map[string]int, error) {
	jobs, err := h.store.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, j := range jobs {
		if j.DesiredState != hubstore.DesiredRunning || j.JobID == skip {
			continue
		}
		as, err := h.store.Assignments(ctx, j.JobID, j.Generation)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			out[a.NodeID] += max(1, len(assignmentTasks(a).Units))
		}
	}
	return out, nil
}

// taskAttempts are ArkFlow v1's task attempts of assignment a of version
// v (planned as p) at generation gen, all in state: one per plan task the
// node runs, with id "{task}:{node}:{gen}". An assignment of the whole
// job (to an Agent that cannot run parts of one) runs every task of the
// plan, as v1 assigns a job.
func taskAttempts(a hubstore.Assignment, v hubstore.JobVersion, p *job.Plan, gen int64, state string) []hubwire.TaskAttempt {
	tasks := assignmentTasks(a).Tasks
	if len(tasks) == 0 {
		for _, t := range p.Tasks {
			tasks = append(tasks, t.ID)
		}
	}
	out := make([]hubwire.TaskAttempt, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, hubwire.TaskAttempt{ID: fmt.Sprintf("%s:%s:%d", t, a.NodeID, gen), JobID: v.JobID, JobVersion: uint64(max(v.Number, 0)),
			TaskID: t, Generation: uint64(max(gen, 0)), NodeID: a.NodeID, State: state})
	}
	return out
}

// versionPlan loads a stored version and its physical plan.
func (h *Hub) versionPlan(ctx context.Context, jobID, versionID string) (hubstore.JobVersion, *job.Plan, error) {
	v, err := h.store.GetVersion(ctx, jobID, versionID)
	if err != nil {
		return v, nil, err
	}
	p, err := physicalPlan(v)
	return v, p, err
}

// servedPlan is the plan of a stored version as the API and the Agents
// get it: v1's JobPlan with our added fields (see plan). A version an
// older Hub stored holds only the requirements; its tasks are planned
// from its spec again.
func servedPlan(v hubstore.JobVersion) (json.RawMessage, error) {
	var probe struct {
		Tasks json.RawMessage `json:"tasks"`
	}
	if json.Unmarshal(v.Plan, &probe) == nil && len(probe.Tasks) > 0 {
		return v.Plan, nil
	}
	var req requirements
	if err := json.Unmarshal(v.Plan, &req); err != nil {
		return nil, fmt.Errorf("the stored plan does not decode: %w", err)
	}
	p, err := physicalPlan(v)
	if err != nil {
		return nil, fmt.Errorf("the stored spec does not plan: %w", err)
	}
	return json.Marshal(plan{Plan: p, requirements: req})
}
