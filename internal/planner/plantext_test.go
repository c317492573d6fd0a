package planner_test

import (
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/planner"
)

// plan --text draws a chain as the tree it is: a fan-out's branches are
// siblings, not one operator after the other.
func TestPlanTextDrawsFanOutAsSiblings(t *testing.T) {
	s := mustParse(t, `{"id":"j","operators":[
		{"id":"in","kind":"source"},{"id":"m","kind":"map"},
		{"id":"f","kind":"filter"},{"id":"out-a","kind":"sink"},{"id":"out-b","kind":"sink"},{"id":"out-c","kind":"sink"}],
	"edges":[{"id":"e1","from":"in","to":"m"},{"id":"e2","from":"m","to":"out-a"},{"id":"e3","from":"m","to":"f"},
		{"id":"e4","from":"f","to":"out-b"},{"id":"e5","from":"f","to":"out-c"}],
	"sources":[{"operator_id":"in","input_type":"memory"}],
	"sinks":[{"operator_id":"out-a","output_type":"memory"},{"operator_id":"out-b","output_type":"memory"},{"operator_id":"out-c","output_type":"memory"}]}`)
	p, err := planner.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chains) != 1 {
		t.Fatalf("chains %+v, want one", p.Chains)
	}
	want := "in -> m -> {out-a, f -> {out-b, out-c}}"
	if text := p.String(); !strings.Contains(text, "x1  "+want+"\n") {
		t.Fatalf("plan text does not draw the chain as %q:\n%s", want, text)
	}
}
