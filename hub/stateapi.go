package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/hubhttp"
	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// Error codes of the state routes. Extension: v1 has no state queries.
const (
	codeStateNotFound    = "state_not_found"
	codeInvalidState     = "invalid_state_query"
	codeStateUnavailable = "state_unavailable"
)

// stateTarget is one Agent running a part of a job, as a state query
// sees it.
type stateTarget struct {
	node  string
	tasks []string // its plan tasks; empty: the whole job
	addr  string   // its reported query address ("": none)
	why   string   // why it cannot answer ("": it can be asked)
}

// stateReply is an Agent's answer to a forwarded state query.
type stateReply struct {
	t      stateTarget
	status int
	body   []byte
	err    error
}

// queryState is GET /jobs/{id}/state/{operator}: a state query routed to
// the Agents that run the job's current generation. Each is asked (a
// key lives in the part of one of them; a job placed whole runs on one);
// the first answer with rows is the answer. When no Agent that was asked
// has the key and one that runs a part cannot be asked (down, or serving
// no state routes), the answer is 503 naming it, since the key may be
// there; otherwise 404. A scan (no key) needs the job on one Agent.
func (h *Hub) queryState(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	targets, e := h.stateTargets(ctx, id)
	if e != nil {
		hubhttp.WriteError(w, r, e)
		return
	}
	if !r.URL.Query().Has("key") && len(targets) > 1 {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, codeInvalidState,
			fmt.Sprintf("job %s runs on %d Agents: the Hub routes lookups by key (?key=); scan each Agent's state routes instead", id, len(targets))))
		return
	}
	replies := h.askAgents(ctx, targets, r.URL.Path, r.URL.RawQuery)
	var notFound []byte
	var down []string
	for _, rp := range replies {
		switch {
		case rp.t.why != "":
			down = append(down, rp.t.why)
		case rp.err != nil:
			down = append(down, fmt.Sprintf("node %s%s is unreachable at %s: %v", rp.t.node, taskList(rp.t.tasks), rp.t.addr, rp.err))
		case rp.status == http.StatusOK:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write(rp.body)
			return
		case rp.status == http.StatusBadRequest:
			hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusBadRequest, codeInvalidState, agentMessage(rp.body)))
			return
		case rp.status == http.StatusNotFound || rp.status == http.StatusMisdirectedRequest:
			if notFound == nil {
				notFound = rp.body
			}
		default:
			down = append(down, fmt.Sprintf("node %s%s answered %d: %s", rp.t.node, taskList(rp.t.tasks), rp.status, agentMessage(rp.body)))
		}
	}
	if len(down) > 0 {
		hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusServiceUnavailable, codeStateUnavailable,
			"the state may be on an Agent that cannot answer: "+strings.Join(down, "; ")))
		return
	}
	hubhttp.WriteError(w, r, hubhttp.NewError(http.StatusNotFound, codeStateNotFound, agentMessage(notFound)))
}

// stateTargets lists the Agents of the job's current generation, each with
// its query address or why it cannot be asked.
func (h *Hub) stateTargets(ctx context.Context, id string) ([]stateTarget, *hubhttp.Error) {
	j, err := h.store.GetJob(ctx, id)
	if err != nil {
		return nil, hubhttp.NewError(http.StatusNotFound, hubwire.CodeJobNotFound, "no job "+id)
	}
	as, err := h.store.Assignments(ctx, id, j.Generation)
	if err != nil {
		return nil, hubhttp.NewError(http.StatusServiceUnavailable, hubwire.CodeRepositoryUnavailable, err.Error())
	}
	if j.DesiredState != hubstore.DesiredRunning || len(as) == 0 {
		return nil, hubhttp.NewError(http.StatusServiceUnavailable, codeStateUnavailable, "job "+id+" is not running on any Agent")
	}
	now := h.cfg.Clock()
	var out []stateTarget
	for _, a := range as {
		t := stateTarget{node: a.NodeID, tasks: assignmentTasks(a).Tasks}
		ag, err := h.store.GetAgent(ctx, a.NodeID)
		switch {
		case err != nil:
			t.why = fmt.Sprintf("node %s%s is unknown to the Hub", t.node, taskList(t.tasks))
		case !ag.Online(now):
			t.why = fmt.Sprintf("node %s%s is down (its lease expired %s ago)", t.node, taskList(t.tasks), now.Sub(ag.LeaseExpires).Round(time.Millisecond))
		default:
			if t.addr = reportedQueryAddr(ag.LastReport); t.addr == "" {
				t.why = fmt.Sprintf("node %s%s serves no state routes (start it with a query address)", t.node, taskList(t.tasks))
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].node < out[k].node })
	return out, nil
}

// askAgents forwards a state query to every target that can be asked, in
// parallel, with the Hub's state token, 10 s at most.
func (h *Hub) askAgents(ctx context.Context, targets []stateTarget, path, rawQuery string) []stateReply {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	replies := make([]stateReply, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		replies[i].t = t
		if t.why != "" {
			continue
		}
		wg.Add(1)
		go func(rp *stateReply) {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.addr, "/")+path+"?"+rawQuery, nil)
			if err != nil {
				rp.err = err
				return
			}
			if h.cfg.StateToken != "" {
				req.Header.Set("Authorization", "Bearer "+h.cfg.StateToken)
			}
			resp, err := h.stateClient.Do(req)
			if err != nil {
				rp.err = err
				return
			}
			defer resp.Body.Close()
			rp.status = resp.StatusCode
			rp.body, rp.err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		}(&replies[i])
	}
	wg.Wait()
	return replies
}

// reportedQueryAddr is the query address of an Agent's last report.
func reportedQueryAddr(report json.RawMessage) string {
	var rep struct {
		QueryAddr string `json:"query_addr"`
	}
	if len(report) == 0 || json.Unmarshal(report, &rep) != nil {
		return ""
	}
	return rep.QueryAddr
}

// agentMessage is the error message of an Agent's JSON error body.
func agentMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}

// taskList is " (tasks a, b)" for an Agent that runs part of a job.
func taskList(tasks []string) string {
	if len(tasks) == 0 {
		return ""
	}
	return " (tasks " + strings.Join(tasks, ", ") + ")"
}
