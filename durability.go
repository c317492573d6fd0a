package arkflow

import (
	"encoding/json"

	"github.com/arkflow-rs/arkflow-go/job"
)

// durabilitySpec returns the durability block as a spec stores it: the
// fields d sets, by their JSON keys (zero fields are left out, so a
// source's block inherits them from the job-wide one).
func durabilitySpec(d job.Durability) json.RawMessage {
	raw, _ := json.Marshal(d) // a struct of strings, numbers and bools
	return raw
}

// Durable gives one source a write-ahead log (see job.Durability): every
// batch it reads is appended to the log, and made durable per d.Sync,
// before it enters the pipeline, and a restart replays what the pipeline
// had not acknowledged. It is merged over the job-wide Builder.Durability
// key by key: the fields d sets replace the job-wide values, its zero
// fields inherit them. Durable(job.Durability{Enabled: &off}) with off
// false turns an inherited log off. Only valid on a Source.
func Durable(d job.Durability) SourceOption {
	return sourceOption(func(s *opSettings) { s.durability = durabilitySpec(d) })
}

// Durability gives every source of the job a write-ahead log (see
// job.Durability); a source's own Durable option is merged over it. Zero
// fields take the defaults; Build reports bad values (a negative
// duration, an unknown sync mode) with the field's spec key.
func (b *Builder) Durability(d job.Durability) *Builder {
	b.spec.Durability = durabilitySpec(d)
	return b
}
