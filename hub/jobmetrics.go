package hub

import (
	"encoding/json"

	"github.com/arkflow-rs/arkflow-go/internal/hubstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
)

// jobMetrics is the detail's metrics: the aggregation, field by field as
// hubwire.JobMetrics documents it, of what the nodes of the current
// generation last reported of the job (nodes: each one's
// JobStatus.Metrics), with the generation's checkpoint rounds the Hub
// itself recorded failed (failedRounds). A field no node measured stays
// absent.
func jobMetrics(nodes []hubwire.JobMetrics, failedRounds uint64) hubwire.JobMetrics {
	var out hubwire.JobMetrics
	var parts *hubwire.PartitionHealth
	for _, m := range nodes {
		if m.WatermarkLagMs != nil && (out.WatermarkLagMs == nil || *m.WatermarkLagMs > *out.WatermarkLagMs) {
			out.WatermarkLagMs = ptr(*m.WatermarkLagMs)
		}
		if m.StateBytes != nil {
			out.StateBytes = ptr(deref(out.StateBytes) + *m.StateBytes)
		}
		if m.CheckpointDurationMs != nil && (out.CheckpointDurationMs == nil || *m.CheckpointDurationMs > *out.CheckpointDurationMs) {
			out.CheckpointDurationMs = ptr(*m.CheckpointDurationMs)
		}
		if m.CheckpointFailures != nil && (out.CheckpointFailures == nil || *m.CheckpointFailures > *out.CheckpointFailures) {
			out.CheckpointFailures = ptr(*m.CheckpointFailures)
		}
		if m.RecoveryProgress != nil && (out.RecoveryProgress == nil || *m.RecoveryProgress < *out.RecoveryProgress) {
			out.RecoveryProgress = ptr(*m.RecoveryProgress)
		}
		if m.TaskPressure != nil && (out.TaskPressure == nil || *m.TaskPressure > *out.TaskPressure) {
			out.TaskPressure = ptr(*m.TaskPressure)
		}
		var p hubwire.PartitionHealth
		if len(m.PartitionHealth) > 0 && json.Unmarshal(m.PartitionHealth, &p) == nil {
			if parts == nil {
				parts = &hubwire.PartitionHealth{}
			}
			parts.Healthy += p.Healthy
			parts.Idle += p.Idle
		}
	}
	if failedRounds > 0 && (out.CheckpointFailures == nil || failedRounds > *out.CheckpointFailures) {
		out.CheckpointFailures = ptr(failedRounds)
	}
	if parts != nil {
		out.PartitionHealth, _ = json.Marshal(parts)
	}
	return out
}

// failedRounds counts the checkpoint rounds of generation gen the Hub
// recorded failed.
func failedRounds(cps []hubstore.Checkpoint, gen int64) uint64 {
	var n uint64
	for _, c := range cps {
		if c.Kind == hubstore.KindCheckpoint && c.Status == hubstore.CheckpointFailed && c.Generation == gen {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
