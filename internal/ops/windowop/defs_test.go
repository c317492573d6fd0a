package windowop

import (
	"time"

	"github.com/arkflow-rs/arkflow-go/job"
)

// Definition builds configs in this package's tests the way
// window.Definition does (that package imports this one).
type Definition struct{ Config }

func Tumbling(size time.Duration, aggs ...job.Aggregate) Definition {
	return Definition{Config{Window: Spec{Type: TypeTumbling, SizeMS: size.Milliseconds()}, Aggregates: aggs}}
}

func Sliding(size, slide time.Duration, aggs ...job.Aggregate) Definition {
	return Definition{Config{Window: Spec{Type: TypeSliding, SizeMS: size.Milliseconds(), SlideMS: slide.Milliseconds()}, Aggregates: aggs}}
}

func Session(gap time.Duration, aggs ...job.Aggregate) Definition {
	return Definition{Config{Window: Spec{Type: TypeSession, GapMS: gap.Milliseconds()}, Aggregates: aggs}}
}
