package planner

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/jobdefaults"
	"github.com/arkflow-rs/arkflow-go/internal/suggest"

	"github.com/arkflow-rs/arkflow-go/job"
)

// CheckStructure runs the validation rules that need no knowledge of
// components: identifiers, parallelism, graph shape (unknown endpoints,
// cycles, reachability, keyed edges without a key field), time, state,
// checkpoint and recovery settings. It records every problem in p.
//
// It first records the problems Parse found decoding s (unknown fields,
// values of the wrong type), then checks the rest; it reports nothing
// more about a field that did not decode (its value is not the user's).
//
// It is one half of validation. arkflow.Validate runs it and then the deep
// build of every operator, source and sink (config, schemas, key fields), the
// same build a real start performs; most callers want that.
func CheckStructure(s *job.Spec, p *Problems) {
	p.undecoded(undecodedOf(s))
	c := checker{s: s, p: p}
	c.job()
	c.operators()
	c.bindings()
	c.edges()
	// Reachability is only meaningful on a complete graph: an edge to an
	// unknown operator is the one problem to report, not the dead ends it
	// leaves behind.
	if !c.cyclic() && c.edgesResolve() {
		c.reachability()
	}
	c.state()
}

type checker struct {
	s *job.Spec
	p *Problems
	// ops maps operator ID to its index, for IDs that are valid and unique.
	ops map[string]int
}

// validID reports whether id is 1–128 characters of [A-Za-z0-9_-] (the job
// ID rule of ArkFlow v1) or, when dot is set, also '.'.
func validID(id string, dot bool) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		case r == '.' && dot:
		default:
			return false
		}
	}
	return true
}

func (c *checker) job() {
	s, p := c.s, c.p
	if !validID(s.ID, false) {
		p.Add("", "id", "must be 1-128 letters, digits, '-' or '_' (got %q)", s.ID)
	}
	if s.Version == 0 {
		p.Add("", "version", "must be >= 1 (got 0)")
	}
	if s.MaxParallelism < 1 || s.MaxParallelism > jobdefaults.MaxMaxParallelism {
		p.Add("", "max_parallelism", "must be in [1, %d] (got %d)", jobdefaults.MaxMaxParallelism, s.MaxParallelism)
	}
	if s.Parallelism < 1 || (s.MaxParallelism >= 1 && s.Parallelism > s.MaxParallelism) {
		p.Add("", "parallelism", "must be in [1, max_parallelism=%d] (got %d)", s.MaxParallelism, s.Parallelism)
	}
	switch s.Recovery {
	case job.RecoverLatestCheckpoint, job.RecoverLatestSavepoint, job.RecoverFail:
	default:
		p.Add("", "recovery", "must be one of latest_checkpoint, latest_savepoint, fail (got %q)", s.Recovery)
	}
	if len(s.Sources) == 0 {
		p.Add("", "sources", "a job needs at least one source")
	}
	if len(s.Sinks) == 0 {
		p.Add("", "sinks", "a job needs at least one sink")
	}
}

func (c *checker) operators() {
	s, p := c.s, c.p
	c.ops = map[string]int{}
	for i, op := range s.Operators {
		at := fmt.Sprintf("operators[%d]", i)
		switch {
		case !validID(op.ID, true):
			p.Add(op.ID, at+".id", "must be 1-128 letters, digits, '.', '-' or '_' (got %q)", op.ID)
		case strings.HasPrefix(op.ID, "__arkflow"):
			p.Add(op.ID, at+".id", "ids starting with \"__arkflow\" are reserved for the runtime's own state (got %q)", op.ID)
		case c.has(op.ID):
			p.Add(op.ID, at+".id", "duplicate operator id (also operators[%d])", c.ops[op.ID])
		default:
			c.ops[op.ID] = i
		}
		known := false
		for _, k := range Kinds {
			known = known || op.Kind == k
		}
		if !known {
			p.Add(op.ID, at+".kind", "unknown operator kind %q (known: %s)%s", op.Kind, strings.Join(Kinds, ", "), suggest.Hint(op.Kind, Kinds))
		}
		if op.Stateful && op.KeyField == "" {
			p.Add(op.ID, at+".key_field", "a stateful operator needs key_field")
		}
		if op.Stateful && (op.Kind == job.KindSource || op.Kind == job.KindSink) {
			p.Add(op.ID, at+".stateful", "a %s operator cannot be stateful", op.Kind)
		}
		if op.Parallelism < 0 || (op.Parallelism > 0 && s.MaxParallelism >= 1 && op.Parallelism > s.MaxParallelism) {
			p.Add(op.ID, at+".parallelism", "must be in [1, max_parallelism=%d] (got %d)", s.MaxParallelism, op.Parallelism)
		}
	}
}

func (c *checker) has(id string) bool { _, ok := c.ops[id]; return ok }

func (c *checker) kind(id string) string {
	if i, ok := c.ops[id]; ok {
		return c.s.Operators[i].Kind
	}
	return ""
}

func (c *checker) operatorIDs() string {
	ids := make([]string, 0, len(c.ops))
	for id := range c.ops {
		ids = append(ids, id)
	}
	return quoteList(ids)
}

// unknownOperator is the reason for a reference to an operator ID that
// does not exist: the operators there are, and the one it probably
// misspells.
func (c *checker) unknownOperator(id string) string {
	ids := make([]string, 0, len(c.ops))
	for _, op := range c.s.Operators {
		if c.has(op.ID) {
			ids = append(ids, op.ID)
		}
	}
	return fmt.Sprintf("unknown operator %q (operators: %s)%s", id, c.operatorIDs(), suggest.Hint(id, ids))
}

// bindings checks sources[] and sinks[] against operators of kind source
// and sink: each such operator has exactly one binding.
func (c *checker) bindings() {
	s, p := c.s, c.p
	bound := map[string]string{}
	for i, src := range s.Sources {
		at := fmt.Sprintf("sources[%d]", i)
		switch {
		case !c.has(src.OperatorID):
			p.Add(src.OperatorID, at+".operator_id", "%s", c.unknownOperator(src.OperatorID))
		case c.kind(src.OperatorID) != job.KindSource:
			p.Add(src.OperatorID, at+".operator_id", "operator %q has kind %q; a source binds an operator of kind \"source\"", src.OperatorID, c.kind(src.OperatorID))
		case bound[src.OperatorID] != "":
			p.Add(src.OperatorID, at+".operator_id", "operator %q is already bound by %s", src.OperatorID, bound[src.OperatorID])
		default:
			bound[src.OperatorID] = at
		}
		if src.InputType == "" {
			p.Add(src.OperatorID, at+".input_type", "is required")
		}
		c.time(src, at)
	}
	for i, snk := range s.Sinks {
		at := fmt.Sprintf("sinks[%d]", i)
		switch {
		case !c.has(snk.OperatorID):
			p.Add(snk.OperatorID, at+".operator_id", "%s", c.unknownOperator(snk.OperatorID))
		case c.kind(snk.OperatorID) != job.KindSink:
			p.Add(snk.OperatorID, at+".operator_id", "operator %q has kind %q; a sink binds an operator of kind \"sink\"", snk.OperatorID, c.kind(snk.OperatorID))
		case bound[snk.OperatorID] != "":
			p.Add(snk.OperatorID, at+".operator_id", "operator %q is already bound by %s", snk.OperatorID, bound[snk.OperatorID])
		default:
			bound[snk.OperatorID] = at
		}
		if snk.OutputType == "" {
			p.Add(snk.OperatorID, at+".output_type", "is required")
		}
	}
	for i, op := range s.Operators {
		if (op.Kind == job.KindSource || op.Kind == job.KindSink) && op.ID != "" && bound[op.ID] == "" {
			list := "sources"
			if op.Kind == job.KindSink {
				list = "sinks"
			}
			p.Add(op.ID, fmt.Sprintf("operators[%d]", i), "operator of kind %q has no entry in %s[] (nothing says what it reads or writes)", op.Kind, list)
		}
	}
}

func (c *checker) time(src job.Source, at string) {
	p := c.p
	t := src.Time
	if t == nil {
		return
	}
	at += ".time"
	op := src.OperatorID
	switch t.Mode {
	case job.ProcessingTime:
		if t.Watermark != nil {
			p.Add(op, at+".watermark", "a processing_time source cannot declare a watermark")
		}
	case job.EventTime:
		if t.TimestampField == "" {
			p.Add(op, at+".timestamp_field", "an event_time source needs timestamp_field")
		}
		if t.Watermark == nil {
			p.Add(op, at+".watermark", "an event_time source needs a watermark")
		}
	default:
		p.Add(op, at+".mode", "must be processing_time or event_time (got %q)", t.Mode)
	}
	if w := t.Watermark; w != nil {
		switch w.Strategy {
		case job.BoundedOutOfOrderness, job.Monotonous:
		default:
			p.Add(op, at+".watermark.strategy", "must be bounded_out_of_orderness or monotonous (got %q)", w.Strategy)
		}
		if w.OutOfOrdernessMS < 0 {
			p.Add(op, at+".watermark.out_of_orderness_ms", "must be >= 0 (got %d)", w.OutOfOrdernessMS)
		}
		if w.IdleTimeoutMS != nil && *w.IdleTimeoutMS <= 0 {
			p.Add(op, at+".watermark.idle_timeout_ms", "must be > 0 (got %d)", *w.IdleTimeoutMS)
		}
		switch w.Advance {
		case "", job.AdvanceBatch, job.AdvancePerRow:
		default:
			p.Add(op, at+".watermark.advance", "must be batch or per_row (got %q)", w.Advance)
		}
		switch w.AllIdle {
		case "", job.AllIdleHold:
			if w.AllIdleDelayMS != 0 {
				p.Add(op, at+".watermark.all_idle_delay_ms", "is only used with all_idle \"advance\" (all_idle is %q)", cmp.Or(w.AllIdle, job.AllIdleHold))
			}
		case job.AllIdleAdvance:
			if w.AllIdleDelayMS <= 0 {
				p.Add(op, at+".watermark.all_idle_delay_ms", "must be > 0 with all_idle \"advance\": the longest an event takes from its timestamp to the source (got %d)", w.AllIdleDelayMS)
			}
			if w.IdleTimeoutMS == nil {
				p.Add(op, at+".watermark.all_idle", "\"advance\" needs watermark.idle_timeout_ms: partitions turn idle only after it, so without it the watermark would never follow the clock")
			}
		default:
			p.Add(op, at+".watermark.all_idle", "must be hold or advance (got %q)", w.AllIdle)
		}
	}
	if t.AllowedLatenessMS < 0 {
		p.Add(op, at+".allowed_lateness_ms", "must be >= 0 (got %d)", t.AllowedLatenessMS)
	}
	switch t.LateEventPolicy {
	case "", job.LateDrop, job.LateUpdate:
		if t.LateEventRoute != "" {
			p.Add(op, at+".late_event_route", "is only used with late_event_policy \"route\" (policy is %q)", t.LateEventPolicy)
		}
	case job.LateRoute:
		switch {
		case t.LateEventRoute == "":
			p.Add(op, at+".late_event_route", "late_event_policy \"route\" needs late_event_route naming a sink operator")
		case !c.has(t.LateEventRoute):
			p.Add(op, at+".late_event_route", "%s", c.unknownOperator(t.LateEventRoute))
		case c.kind(t.LateEventRoute) != job.KindSink:
			p.Add(op, at+".late_event_route", "operator %q has kind %q; late rows are routed to a sink", t.LateEventRoute, c.kind(t.LateEventRoute))
		}
	default:
		p.Add(op, at+".late_event_policy", "must be drop, route or update (got %q)", t.LateEventPolicy)
	}
}

func (c *checker) edges() {
	s, p := c.s, c.p
	ids := map[string]int{}
	pairs := map[[2]string]int{}
	for i, e := range s.Edges {
		at := fmt.Sprintf("edges[%d]", i)
		owner := e.From
		if !c.has(owner) {
			owner = e.To
		}
		if e.ID == "" {
			p.Add(owner, at+".id", "is required")
		} else if j, dup := ids[e.ID]; dup {
			p.Add(owner, at+".id", "duplicate edge id %q (also edges[%d])", e.ID, j)
		} else {
			ids[e.ID] = i
		}
		fromOK, toOK := c.has(e.From), c.has(e.To)
		if !fromOK {
			p.Add(owner, at+".from", "%s", c.unknownOperator(e.From))
		}
		if !toOK {
			p.Add(owner, at+".to", "%s", c.unknownOperator(e.To))
		}
		if !fromOK || !toOK {
			continue
		}
		if e.From == e.To {
			p.Add(e.From, at, "an edge cannot connect operator %q to itself", e.From)
			continue
		}
		if c.kind(e.To) == job.KindSource {
			p.Add(e.To, at+".to", "operator %q is a source; sources have no inputs", e.To)
		}
		if c.kind(e.From) == job.KindSink {
			p.Add(e.From, at+".from", "operator %q is a sink; sinks have no outputs", e.From)
		}
		if j, dup := pairs[[2]string{e.From, e.To}]; dup {
			p.Add(e.From, at, "duplicate edge from %q to %q (also edges[%d]); every row would be delivered twice", e.From, e.To, j)
		}
		pairs[[2]string{e.From, e.To}] = i
		if e.Partitioned {
			to := s.Operators[c.ops[e.To]]
			// A join routes each input by its own key (config.left_key,
			// config.right_key), which its factory checks.
			if to.KeyField == "" && to.Kind != job.KindJoin {
				p.Add(e.To, fmt.Sprintf("operators[%d].key_field", c.ops[e.To]),
					"is required: %s (%q -> %q) is partitioned, and rows are routed by the key_field of the operator they go to", at, e.From, e.To)
			}
		}
	}
}

// edgesResolve reports whether every edge connects two known operators.
func (c *checker) edgesResolve() bool {
	for _, e := range c.s.Edges {
		if !c.has(e.From) || !c.has(e.To) {
			return false
		}
	}
	return true
}

// adjacency returns the successors of every valid operator along valid
// edges, the implicit late-row edges included.
func (c *checker) adjacency() (out, in map[string][]string) {
	out, in = map[string][]string{}, map[string][]string{}
	for _, e := range append(append([]job.Edge(nil), c.s.Edges...), LateEdges(c.s)...) {
		if c.has(e.From) && c.has(e.To) && e.From != e.To {
			out[e.From] = append(out[e.From], e.To)
			in[e.To] = append(in[e.To], e.From)
		}
	}
	return out, in
}

// cyclic reports (and records) a cycle in the operator graph.
func (c *checker) cyclic() bool {
	out, _ := c.adjacency()
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range out[n] {
			switch color[m] {
			case grey:
				for i, x := range stack {
					if x == m {
						cycle = append(append([]string(nil), stack[i:]...), m)
					}
				}
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, op := range c.s.Operators {
		if c.has(op.ID) && color[op.ID] == white && visit(op.ID) {
			c.p.Add(cycle[0], "edges", "the operator graph has a cycle: %s", strings.Join(cycle, " -> "))
			return true
		}
	}
	return false
}

func (c *checker) reachability() {
	s, p := c.s, c.p
	out, in := c.adjacency()
	walk := func(start string, next map[string][]string) map[string]bool {
		seen := map[string]bool{start: true}
		todo := []string{start}
		for len(todo) > 0 {
			n := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for _, m := range next[n] {
				if !seen[m] {
					seen[m] = true
					todo = append(todo, m)
				}
			}
		}
		return seen
	}
	late := map[string]bool{}
	for _, e := range LateEdges(s) {
		late[e.To] = true
	}
	// A window's late-row edge does not carry its results: only spec
	// edges count as an operator's output.
	hasMainOutput := map[string]bool{}
	for _, e := range s.Edges {
		hasMainOutput[e.From] = true
	}
	for i, src := range s.Sources {
		if c.kind(src.OperatorID) != job.KindSource {
			continue
		}
		if t := src.Time; t != nil && t.LateEventPolicy == job.LateRoute && c.kind(t.LateEventRoute) == job.KindSink && !late[t.LateEventRoute] {
			p.Add(src.OperatorID, fmt.Sprintf("sources[%d].time.late_event_route", i),
				"no window operator is downstream of source %q, so it has no late rows to route to %q", src.OperatorID, t.LateEventRoute)
		}
		reach := walk(src.OperatorID, out)
		ok := false
		for n := range reach {
			ok = ok || c.kind(n) == job.KindSink
		}
		if !ok {
			p.Add(src.OperatorID, fmt.Sprintf("sources[%d].operator_id", i), "source %q reaches no sink; add an edge path to a sink", src.OperatorID)
		}
	}
	for i, op := range s.Operators {
		if !c.has(op.ID) || c.ops[op.ID] != i {
			continue
		}
		at := fmt.Sprintf("operators[%d]", i)
		if op.Kind != job.KindSource && len(in[op.ID]) == 0 {
			p.Add(op.ID, at, "operator %q has no incoming edge; nothing feeds it", op.ID)
		}
		if op.Kind != job.KindSink && !hasMainOutput[op.ID] {
			p.Add(op.ID, at, "operator %q has no outgoing edge; its output would be discarded", op.ID)
		}
	}
}

func (c *checker) state() {
	s, p := c.s, c.p
	if st := s.State; st != nil {
		switch st.Backend {
		case job.BackendBadger, job.BackendMemory, job.BackendEmbeddedKV:
		default:
			p.Add("", "state.backend", "unknown state backend %q (known: badger, memory, embedded_kv = badger)", st.Backend)
		}
		if st.FormatVersion < 1 {
			p.Add("", "state.format_version", "must be >= 1 (got %d)", st.FormatVersion)
		}
		if st.TTLMS != nil && *st.TTLMS <= 0 {
			p.Add("", "state.ttl_ms", "must be > 0 (got %d)", *st.TTLMS)
		}
	}
	if cp := s.Checkpoint; cp != nil {
		if s.State == nil {
			p.Add("", "checkpoint", "checkpoints need a state block (state.backend)")
		}
		if cp.IntervalMS <= 0 {
			p.Add("", "checkpoint.interval_ms", "must be > 0 (got %d)", cp.IntervalMS)
		}
		if cp.Retention <= 0 {
			p.Add("", "checkpoint.retention", "must be > 0 (got %d)", cp.Retention)
		}
		if strings.TrimSpace(cp.ObjectStoreURI) == "" {
			p.Add("", "checkpoint.object_store_uri", "is required (file:///dir or s3://bucket/prefix)")
		} else if u, err := url.Parse(cp.ObjectStoreURI); err != nil || (u.Scheme != "file" && u.Scheme != "s3") {
			p.Add("", "checkpoint.object_store_uri", "must be file:///dir or s3://bucket/prefix (got %q)", cp.ObjectStoreURI)
		}
	}
}
