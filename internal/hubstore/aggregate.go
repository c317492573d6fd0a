package hubstore

import (
	"context"
	"database/sql"
	"sort"
	"time"
)

// ObservedState is a job's aggregated observed state.
type ObservedState string

// Observed states.
const (
	ObservedRunning    ObservedState = "running"
	ObservedStopped    ObservedState = "stopped"
	ObservedConverging ObservedState = "converging"
	ObservedFailed     ObservedState = "failed"
)

// Outcome is what is known of one assignment's command for the action.
type Outcome struct {
	AssignmentID string
	NodeID       string
	CommandID    string
	Generation   int64
	State        CommandState
	FailureClass string
	Error        string
	At           time.Time // the latest outcome per assignment wins
}

// AssignmentStatus is one assignment's place in the aggregate.
type AssignmentStatus struct {
	AssignmentID string
	NodeID       string
	Status       string // pending | succeeded | degraded | failed
	// CommandState is the state of the assignment's latest command for
	// the action ("" before one was queued).
	CommandState CommandState
	CommandID    string
	FailureClass string
	Error        string
}

// Failure is the correlation metadata of a terminal failure.
type Failure struct {
	JobID        string
	Generation   int64
	CommandID    string
	AssignmentID string
	NodeID       string
	FailureClass string
	Message      string
}

// Aggregate is the observed state of a job generation.
type Aggregate struct {
	State       ObservedState
	Expected    int
	Succeeded   int
	Pending     int
	Degraded    int
	Failed      int
	Assignments []AssignmentStatus
	Failure     *Failure // set when State is failed
}

// retryable failure classes: the attempt will be retried, so the job is
// converging, not failed.
func retryable(state CommandState, class string) bool {
	switch class {
	case "temporary_execution", "transport", "node_unavailable", "ambiguous", "timeout":
		return true
	case "":
		return state == CommandTimedOut || state == CommandNodeUnavailable || state == CommandCancelled
	}
	return false
}

// AggregateObserved derives a job generation's observed state from every
// expected assignment: target ("running" or "stopped") only when
// all succeeded; converging while any is pending or retryably degraded;
// failed when an assignment failed permanently, with that command's
// correlation metadata. Outcomes of other generations or of unexpected
// assignments are ignored, so a stale result never decides anything, and
// one node's transient failure never overrides healthy nodes. With no
// expected assignment the target holds trivially.
func AggregateObserved(jobID string, generation int64, target ObservedState, expected []Assignment, outcomes []Outcome) Aggregate {
	latest := map[string]Outcome{}
	for _, o := range outcomes {
		if o.Generation != generation {
			continue
		}
		if cur, ok := latest[o.AssignmentID]; !ok || !o.At.Before(cur.At) {
			latest[o.AssignmentID] = o
		}
	}
	exp := append([]Assignment(nil), expected...)
	sort.Slice(exp, func(i, j int) bool { return exp[i].AssignmentID < exp[j].AssignmentID })
	agg := Aggregate{Expected: len(exp)}
	for _, a := range exp {
		st := AssignmentStatus{AssignmentID: a.AssignmentID, NodeID: a.NodeID, Status: "pending"}
		if o, ok := latest[a.AssignmentID]; ok {
			st.CommandID, st.CommandState, st.FailureClass, st.Error = o.CommandID, o.State, o.FailureClass, o.Error
			switch {
			case o.State == CommandSucceeded:
				st.Status = "succeeded"
			case !o.State.Terminal() || o.State == CommandSuperseded:
				st.Status = "pending"
			case retryable(o.State, o.FailureClass):
				st.Status = "degraded"
			default:
				st.Status = "failed"
			}
		}
		switch st.Status {
		case "succeeded":
			agg.Succeeded++
		case "pending":
			agg.Pending++
		case "degraded":
			agg.Degraded++
		case "failed":
			agg.Failed++
			if agg.Failure == nil {
				agg.Failure = &Failure{JobID: jobID, Generation: generation, CommandID: st.CommandID, AssignmentID: a.AssignmentID,
					NodeID: a.NodeID, FailureClass: st.FailureClass, Message: st.Error}
			}
		}
		agg.Assignments = append(agg.Assignments, st)
	}
	switch {
	case agg.Failed > 0:
		agg.State = ObservedFailed
	case agg.Pending > 0 || agg.Degraded > 0:
		agg.State = ObservedConverging
	default:
		agg.State = target
	}
	return agg
}

// ObserveJob aggregates the job's current generation: its assignments and
// the commands of operation sent for them, read in one snapshot. target is
// the state that success means (running for a start, stopped for a stop).
func (s *Store) ObserveJob(ctx context.Context, jobID, operation string, target ObservedState) (Aggregate, error) {
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Aggregate{}, err
	}
	defer s.rc.prepareMissed() // runs after the rollback: the connection is back in the pool
	defer rtx.Rollback()
	tx := newTx(ctx, rtx, s.rc)
	j, err := getJob(ctx, tx, jobID)
	if err != nil {
		return Aggregate{}, err
	}
	as, err := listAssignments(ctx, tx, jobID, j.Generation)
	if err != nil {
		return Aggregate{}, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+commandCols+" FROM commands WHERE job_id = ? AND generation = ? AND operation = ? AND assignment_id != '' ORDER BY seq",
		jobID, j.Generation, operation)
	if err != nil {
		return Aggregate{}, err
	}
	cmds, err := collectCommands(rows)
	if err != nil {
		return Aggregate{}, err
	}
	outs := make([]Outcome, 0, len(cmds))
	for i, c := range cmds {
		o := Outcome{AssignmentID: c.AssignmentID, NodeID: c.NodeID, CommandID: c.ID, Generation: c.Generation, State: c.State,
			At: time.Unix(0, int64(i+1))} // queue order, not wall time: a retry's command wins over the one it retried
		if c.State.Terminal() {
			r, err := terminalResult(ctx, tx, c.ID)
			if err != nil {
				return Aggregate{}, err
			}
			if r != nil {
				o.FailureClass, o.Error = r.FailureClass, r.Error
			}
		}
		outs = append(outs, o)
	}
	return AggregateObserved(jobID, j.Generation, target, as, outs), nil
}
