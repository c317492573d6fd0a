package main

import (
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the module root relative to this package's directory.
const moduleRoot = "../../.."

// TestMetricsMarkdownUpToDate fails when METRICS.md is out of step with
// what the collectors describe and gather: a family renamed, added or
// gone, a label or type changed, a help text edited, or README's advice
// changed.
func TestMetricsMarkdownUpToDate(t *testing.T) {
	if err := run(moduleRoot, true); err != nil {
		t.Fatal(err)
	}
}

// TestTyped: a family takes the type it was gathered with, or its
// fallback; one with neither, a fallback for a family that is gathered or
// not described, and labels that differ from the description are errors.
func TestTyped(t *testing.T) {
	fams := func() []family {
		return []family{
			{Name: "a_total", Labels: []string{"job", "operator"}},
			{Name: "b", Labels: []string{"job"}},
		}
	}
	got, err := typed(fams(),
		map[string]gathered{"a_total": {Type: "counter", Labels: []string{"job", "operator"}}},
		map[string]string{"b": "gauge"})
	if err != nil || got[0].Type != "counter" || got[1].Type != "gauge" {
		t.Errorf("typed: %+v, %v", got, err)
	}
	for _, c := range []struct {
		name     string
		types    map[string]gathered
		fallback map[string]string
		want     string
	}{
		{"unknown type", map[string]gathered{"a_total": {Type: "counter", Labels: []string{"job", "operator"}}}, nil,
			"b is described but nothing"},
		{"stale fallback", map[string]gathered{"a_total": {Type: "counter", Labels: []string{"job", "operator"}}, "b": {Type: "gauge", Labels: []string{"job"}}},
			map[string]string{"b": "gauge"}, "b is gathered now"},
		{"fallback not described", map[string]gathered{"a_total": {Type: "counter", Labels: []string{"job", "operator"}}},
			map[string]string{"b": "gauge", "c": "gauge"}, "c has a fallback type but is not described"},
		{"labels differ", map[string]gathered{"a_total": {Type: "counter", Labels: []string{"job", "task"}}},
			map[string]string{"b": "gauge"}, "a_total is described with the labels [job operator] but gathered with [job task]"},
	} {
		if _, err := typed(fams(), c.types, c.fallback); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestOperatingNotes reads the families of the "You see" column and the
// "Do" advice of README's table, escaped pipes included, and nothing
// after the section.
func TestOperatingNotes(t *testing.T) {
	readme := "# x\n\n## Operating a job\n\nText naming `arkflow_not_a_row`.\n\n" +
		"| You see | It means | Do |\n|---|---|---|\n" +
		"| `arkflow_a_total` rising, `arkflow_b` 0 | Something `arkflow_c` | Fix `x \\| y`. |\n" +
		"| A log line | No family | Nothing. |\n" +
		"| `arkflow_b` high | More | Wait. |\n\n" +
		"## Next\n\n| You see | It means | Do |\n|---|---|---|\n| `arkflow_d` | x | y |\n"
	notes, err := operatingNotes(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"arkflow_a_total": {"Fix `x \\| y`."},
		"arkflow_b":       {"Fix `x \\| y`.", "Wait."},
	}
	if len(notes) != len(want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	for k, v := range want {
		if !slices.Equal(notes[k], v) {
			t.Errorf("notes[%s] = %q, want %q", k, notes[k], v)
		}
	}
	if _, err := operatingNotes("# x\n\n## Operating a job\n\nNo table.\n"); err == nil {
		t.Error("a README without the table: no error")
	}
}
