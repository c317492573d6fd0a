package windowop

import (
	"github.com/arkflow-rs/arkflow-go/internal/agg"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Output column names.
const (
	ColumnStart  = "window_start"
	ColumnEnd    = "window_end"
	ColumnUpdate = "__arkflow_window_update"
)

// Config is a window operator's spec config: what window.Definition
// marshals to and what the factory decodes.
type Config struct {
	Window     Spec            `json:"window"`
	Aggregates []job.Aggregate `json:"aggregates"`
}

func (c Config) aggSpecs() []agg.Spec { return c.Aggregates }
