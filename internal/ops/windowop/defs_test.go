package windowop

import (
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/agg"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Definition builds configs in this package's tests the way
// window.Definition does (that package imports this one).
type Definition struct{ Config }

func Tumbling(size time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeTumbling, SizeMS: size.Milliseconds()}}}
}

func Sliding(size, slide time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeSliding, SizeMS: size.Milliseconds(), SlideMS: slide.Milliseconds()}}}
}

func Session(gap time.Duration) Definition {
	return Definition{Config{Window: Spec{Type: TypeSession, GapMS: gap.Milliseconds()}}}
}

func (d Definition) with(a job.Aggregate) Definition {
	d.Aggregates = append(append([]job.Aggregate(nil), d.Aggregates...), a)
	return d
}

func (d Definition) Count(as string) Definition {
	return d.with(job.Aggregate{Function: agg.Count, As: as})
}

func (d Definition) Sum(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Sum, Field: field, As: as})
}

func (d Definition) Min(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Min, Field: field, As: as})
}

func (d Definition) Max(field, as string) Definition {
	return d.with(job.Aggregate{Function: agg.Max, Field: field, As: as})
}
