package planner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/jobdecode"
	"github.com/arkflow-rs/arkflow-go/internal/specpath"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Problems collects validation errors for one job.
type Problems struct {
	Job  string
	list job.ValidationErrors
	// decode are the problems of a spec's values that did not decode
	// (recorded by CheckStructure): Err reports nothing else at or under
	// their fields.
	decode []*job.ValidationError
}

// undecoded records the problems Parse found decoding a spec.
func (p *Problems) undecoded(es job.ValidationErrors) {
	p.list = append(p.list, es...)
	p.decode = append(p.decode, es...)
}

// shadowed reports whether e is about a field whose value did not decode,
// and is not that decode problem itself: the field holds a zero or a
// default, not what the user wrote, so anything more said about it is
// noise.
func (p *Problems) shadowed(e *job.ValidationError) bool {
	for _, d := range p.decode {
		if e == d {
			return false
		}
	}
	for _, d := range p.decode {
		if d.Field != "" && (e.Field == d.Field || strings.HasPrefix(e.Field, d.Field+".") || strings.HasPrefix(e.Field, d.Field+"[")) {
			return true
		}
	}
	return false
}

// Add records a problem. operator may be empty.
func (p *Problems) Add(operator, field, format string, args ...any) {
	p.list = append(p.list, &job.ValidationError{Job: p.Job, Operator: operator, Field: field, Reason: fmt.Sprintf(format, args...)})
}

// Append records already built errors.
func (p *Problems) Append(es ...*job.ValidationError) { p.list = append(p.list, es...) }

// Len is the number of problems recorded.
func (p *Problems) Len() int { return len(p.list) }

// Err returns the problems as job.ValidationErrors in spec order (job fields,
// operators, edges, sources, sinks, state, checkpoint; by index within
// each), or nil when there are none. Duplicates (same operator, field and
// reason) are reported once, and a field whose value did not decode only
// with its decode problem.
func (p *Problems) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out job.ValidationErrors
	for _, e := range p.list {
		k := e.Operator + "\x00" + e.Field + "\x00" + e.Reason
		if seen[k] || p.shadowed(e) {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return specpath.Less(out[i].Field, out[j].Field) })
	return out
}

// List returns the recorded problems.
func (p *Problems) List() job.ValidationErrors { return p.list }

// undecodedOf returns the problems job.Parse found decoding s, which the
// spec remembers (see internal/jobdecode).
func undecodedOf(s *job.Spec) job.ValidationErrors {
	es, _ := jobdecode.Problems(s).(job.ValidationErrors)
	return es
}

func quoteList(xs []string) string {
	s := append([]string(nil), xs...)
	sort.Strings(s)
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
