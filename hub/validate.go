package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/planner"
	"github.com/arkflow-rs/arkflow-go/job"
)

// plan is what the Hub derives from a spec and stores with the version,
// the "plan" of the v1 API: ArkFlow v1's JobPlan ({spec, tasks}, each
// task {id "{op}-{subtask}", operator_id, subtask, partitions with their
// key-group ranges}) as job.Plan computes it, with the rest of the
// physical plan (chains, edges, placement units) and what an Agent needs
// to run it (requirements) as added fields.
type plan struct {
	*job.Plan
	requirements
}

// requirements are what a node must offer to run a plan.
type requirements struct {
	// NodeIDs restricts placement to these nodes (empty: any).
	NodeIDs              []string `json:"node_ids"`
	RequiredCapabilities []string `json:"required_capabilities"`
	// StateBackend is the spec's state backend ("" when it keeps none).
	StateBackend string `json:"state_backend,omitempty"`
	// Connectors are the spec's "input:T" and "output:T" connectors.
	Connectors []string `json:"connectors"`
	// GoOperators are the "job/operator" IDs bound to Go values on the
	// Agent (Go functions, func sinks, push sources): only an Agent that
	// declares them can run the job.
	GoOperators []string `json:"go_operators"`
}

// validation is the outcome of a deep validation.
type validation struct {
	spec     *job.Spec
	specJSON []byte
	plan     plan
	problems []string // non-empty: invalid
	fields   []string // the field path of each problem
	warnings []string
}

// validateSpec parses and deep-validates raw with arkflow.Validate, the
// same build a start runs. Problems of operators that an Agent binds to Go
// values (or whose connector only an Agent has) are not problems here:
// they become requirements of the plan, checked per node.
func (h *Hub) validateSpec(ctx context.Context, raw json.RawMessage, nodeIDs []string) (*validation, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("spec is required")
	}
	// v1 also accepts the spec as a JSON string.
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	// A spec with decode mistakes (an unknown field, a value of the wrong
	// type) still goes through the deep build, which reports them with
	// every other mistake of the spec (and never builds it).
	spec, err := job.Parse(raw)
	if spec == nil {
		return nil, err
	}
	undecoded := err != nil
	v := &validation{spec: spec}
	v.specJSON, err = spec.JSON()
	if err != nil {
		return nil, err
	}
	v.plan.requirements = requirements{NodeIDs: append([]string{}, nodeIDs...), Connectors: []string{}, GoOperators: []string{},
		RequiredCapabilities: []string{hubwire.CapabilityJobRuntime, hubwire.CapabilityStateBackend}}
	if spec.State != nil {
		v.plan.StateBackend = spec.State.Backend
	}
	connOf := map[string]string{}
	for _, src := range spec.Sources {
		if src.InputType != "func" && src.InputType != "push" {
			connOf[src.OperatorID] = "input:" + src.InputType
		}
	}
	for _, snk := range spec.Sinks {
		if snk.OutputType != "func" {
			connOf[snk.OperatorID] = "output:" + snk.OutputType
		}
	}
	for _, c := range connOf {
		if !slices.Contains(v.plan.Connectors, c) {
			v.plan.Connectors = append(v.plan.Connectors, c)
		}
	}
	sort.Strings(v.plan.Connectors)

	dir := filepath.Join(h.cfg.DataDir, "validate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Validate what the Agent will get: the secrets resolved (in memory
	// only). A secret the Hub does not have is a problem now.
	checked := spec
	if resolved, missing := resolveSecrets(v.specJSON, h.cfg.Secrets); len(missing) > 0 {
		for _, name := range missing {
			v.problems = append(v.problems, fmt.Sprintf("job %q: secret %q is not set in the Hub's environment", spec.ID, name))
			v.fields = append(v.fields, "spec")
		}
		return v, nil
	} else if string(resolved) != string(v.specJSON) && !undecoded {
		// (A spec that did not decode is not built: its secrets do not
		// matter, and parsing its JSON again would drop its mistakes.)
		if checked, err = job.Parse(resolved); err != nil {
			return nil, err
		}
	}
	if verr := arkflow.Validate(checked, arkflow.WithDataDir(dir)); verr != nil {
		h.problemsOf(ctx, v, verr, connOf)
	}
	if len(v.problems) == 0 {
		// The tasks of the spec as stored (its secrets unresolved).
		if v.plan.Plan, err = planner.NewPlan(spec); err != nil {
			v.problems = append(v.problems, err.Error())
			v.fields = append(v.fields, "spec")
		}
	}
	return v, nil
}

// problemsOf records the problems of a failed validation in v, except
// those an Agent resolves: operators it binds to Go values become plan
// requirements, and connectors only Agents have become warnings.
func (h *Hub) problemsOf(ctx context.Context, v *validation, verr error, connOf map[string]string) {
	spec := v.spec
	bound, conns := h.agentOffers(ctx)
	for _, e := range job.AsValidationErrors(verr) {
		if e.Operator != "" {
			key := spec.ID + "/" + e.Operator
			if bound[key] {
				if !slices.Contains(v.plan.GoOperators, key) {
					v.plan.GoOperators = append(v.plan.GoOperators, key)
				}
				continue
			}
			if c, ok := connOf[e.Operator]; ok && conns[c] {
				v.warnings = append(v.warnings, fmt.Sprintf("operator %q: connector %s is not compiled into the Hub; it is validated on the Agent", e.Operator, c))
				continue
			}
		}
		v.problems = append(v.problems, e.Error())
		v.fields = append(v.fields, e.Field)
	}
	if len(job.AsValidationErrors(verr)) == 0 {
		v.problems = append(v.problems, verr.Error())
		v.fields = append(v.fields, "spec")
	}
	sort.Strings(v.plan.GoOperators)
}

// agentOffers returns the Go-bound operators ("job/op") and the connectors
// the known Agents declared.
func (h *Hub) agentOffers(ctx context.Context) (bound, conns map[string]bool) {
	bound, conns = map[string]bool{}, map[string]bool{}
	agents, err := h.store.ListAgents(ctx)
	if err != nil {
		return bound, conns
	}
	for _, a := range agents {
		for _, o := range a.Capabilities.Operators {
			bound[o] = true
		}
		for _, c := range a.Capabilities.Connectors {
			conns[c] = true
		}
	}
	return bound, conns
}

// compatibility says whether agent a can run a plan that needs p, and if
// not what it lacks.
func (h *Hub) compatibility(a hubstore.Agent, p requirements, now time.Time) hubwire.NodeCompatibility {
	nc := hubwire.NodeCompatibility{NodeID: a.NodeID, State: nodeState(a, now), Capabilities: a.Capabilities.Features}
	if !a.Online(now) || a.State == hubwire.NodeDraining || a.MaintenanceState != hubstore.MaintenanceActive {
		nc.MissingCapabilities = append(nc.MissingCapabilities, hubwire.CapabilityOnlineLease)
	}
	if len(a.Capabilities.Features) > 0 {
		for _, m := range hubwire.MissingCapabilities(p.RequiredCapabilities, a.Capabilities.Features) {
			nc.MissingCapabilities = append(nc.MissingCapabilities, m)
			nc.Mismatches = append(nc.Mismatches, hubwire.CapabilityMismatch{Capability: m, Required: m, Offered: a.Capabilities.Features})
		}
	}
	if p.StateBackend != "" && len(a.Capabilities.StateBackends) > 0 && !slices.Contains(a.Capabilities.StateBackends, p.StateBackend) {
		nc.MissingCapabilities = append(nc.MissingCapabilities, "state_backend:"+p.StateBackend)
		nc.Mismatches = append(nc.Mismatches, hubwire.CapabilityMismatch{Capability: hubwire.CapabilityStateBackend,
			Required: p.StateBackend, Offered: a.Capabilities.StateBackends})
	}
	if conns := a.Capabilities.Connectors; len(conns) > 0 {
		for _, c := range p.Connectors {
			if !slices.Contains(conns, c) {
				nc.MissingCapabilities = append(nc.MissingCapabilities, "connector:"+c)
				nc.Mismatches = append(nc.Mismatches, hubwire.CapabilityMismatch{Capability: "connector", Required: c, Offered: conns})
			}
		}
	}
	for _, o := range p.GoOperators {
		if !slices.Contains(a.Capabilities.Operators, o) {
			nc.MissingCapabilities = append(nc.MissingCapabilities, "operator:"+o)
			nc.Mismatches = append(nc.Mismatches, hubwire.CapabilityMismatch{Capability: "operator", Required: o, Offered: a.Capabilities.Operators})
		}
	}
	if len(p.NodeIDs) > 0 && !slices.Contains(p.NodeIDs, a.NodeID) {
		nc.MissingCapabilities = append(nc.MissingCapabilities, "placement:node_ids")
	}
	nc.Compatible = len(nc.MissingCapabilities) == 0
	return nc
}
