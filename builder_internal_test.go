package arkflow

import (
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Every row of builderCalls translates its spec path, with and without a
// rest, and with any index; other paths, and paths that only share a
// prefix with a row, stay as they are.
func TestInBuilderTerms(t *testing.T) {
	t.Parallel()
	withIndex := func(p string) string {
		out := []byte{}
		for i := 0; i < len(p); i++ {
			if p[i] == '[' && i+1 < len(p) && p[i+1] == ']' {
				out = append(out, "[3]"...)
				i++
				continue
			}
			out = append(out, p[i])
		}
		return string(out)
	}
	b := NewJob("j").State(job.State{})
	for _, c := range builderCalls {
		for field, want := range map[string]string{
			withIndex(c.path):          c.call,
			withIndex(c.path) + ".x.y": c.call + ": x.y",
		} {
			got := b.inBuilderTerms(&job.ValidationError{Job: "j", Field: field, Reason: "r"})
			if got.Field != want || got.Reason != "r" || got.Job != "j" {
				t.Errorf("%s: got %+v, want field %q", field, got, want)
			}
		}
	}
	for _, field := range []string{"operators[2].config.size_ms", "sources[0].config.schema[1].type", "states", "state_x", "operators[1].kind", "edges[0].to", "builder", ""} {
		if got := b.inBuilderTerms(&job.ValidationError{Field: field}); got.Field != field {
			t.Errorf("%q became %q", field, got.Field)
		}
	}
	// The longest path wins.
	if got := b.inBuilderTerms(&job.ValidationError{Field: "sources[0].time.watermark.idle_timeout_ms"}); got.Field != "EventTime{IdleTimeout}" {
		t.Errorf("idle timeout: %q", got.Field)
	}
	// A State the Builder filled in for Checkpoint names Checkpoint.
	implicit := NewJob("j").Checkpoint(job.Checkpoint{})
	if got := implicit.inBuilderTerms(&job.ValidationError{Field: "state.path"}); got.Field != `.Checkpoint(job.Checkpoint{...}) with its default .State(job.State{Backend: "badger"}): path` {
		t.Errorf("implicit state: %q", got.Field)
	}
}
