package arkflow

import (
	"github.com/arkflow-rs/arkflow-go/internal/harness"
	"github.com/arkflow-rs/arkflow-go/internal/runtime"
	"github.com/arkflow-rs/arkflow-go/job"
)

// The test harness (package arkflowtest) reaches the engine through
// internal/harness: what it needs (a fake clock, the runtime's barriers
// and journals) is not part of this package's API.
func init() {
	harness.RuntimeOf = func(j any) *runtime.Runtime { return j.(*Job).rt }
	harness.CheckpointStatus = func(j any) any { return checkpointStatus(j.(*Job).rt.CheckpointStatus()) }
	harness.Bindings = func(b any) map[string]any { return b.(*Builder).bindings }
	harness.NewJob = func(spec *job.Spec, bindings map[string]any, opts []any) (any, error) {
		o := make([]Option, 0, len(opts))
		for _, x := range opts {
			o = append(o, x.(Option))
		}
		j, err := newJob(spec, bindings, o)
		if err != nil {
			return nil, err // not a nil *Job in a non-nil any
		}
		return j, nil
	}
	harness.Build = func(b any, edit func(*job.Spec), opts []any) (any, error) {
		cp := *b.(*Builder)
		cp.spec = *cp.spec.Clone()
		edit(&cp.spec)
		o := make([]Option, 0, len(opts))
		for _, x := range opts {
			o = append(o, x.(Option))
		}
		j, err := cp.Build(o...)
		if err != nil {
			return nil, err
		}
		return j, nil
	}
	harness.Option = func(f func(*runtime.Options)) any {
		return optionFunc(func(o *options) { o.tune = append(o.tune, f) })
	}
}
