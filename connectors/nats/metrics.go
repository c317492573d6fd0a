package nats

// This file holds the metrics the NATS sources and sinks report to their
// job (connectors.Metered). Everything is read from counters the
// connector keeps and from the last message's JetStream metadata: nothing
// is asked of the server when the job's metrics are read.

import (
	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricConsumerPending is a JetStream partition's messages in the
	// stream after the last one the source read (that match its subject):
	// the server's count, carried by that message. Rows read but not yet
	// processed do not count.
	MetricConsumerPending = "nats_consumer_pending_messages"
	// MetricRedeliveriesSkipped counts deliveries a JetStream source
	// skipped because it had read the message before: the server delivered
	// it again when its ack wait ran out while the job held it (in an open
	// window). Many of them call for a longer mode.ack_wait_ms.
	MetricRedeliveriesSkipped = "nats_redeliveries_skipped_total"
	// MetricDropped counts the messages a core NATS source's client
	// dropped because the job did not read them fast enough (a slow
	// consumer): they are lost, core NATS being at-most-once.
	MetricDropped = "nats_dropped_messages_total"
	// MetricDuplicates counts the messages a JetStream sink published that
	// the stream acknowledged as duplicates (a Nats-Msg-Id it had within
	// its duplicate window) and did not store again: rows written again
	// after a restart.
	MetricDuplicates = "nats_publish_duplicates_total"
)

// MetricFamilies declares the sources' metrics
// (connectors.MetricFamilies).
func (in *input) MetricFamilies() []connectors.MetricFamily {
	if in.cfg.Mode.Type == ModeRegular {
		return []connectors.MetricFamily{{
			Name: MetricDropped, Kind: connectors.Counter,
			Help: "Messages a core NATS source's client dropped because the job read them too slowly (slow consumer); lost.",
		}}
	}
	return []connectors.MetricFamily{
		{
			Name: MetricConsumerPending, Kind: connectors.Gauge, Labels: []string{"subject"},
			Help: "Messages of a JetStream partition (subject, or the stream) after the last one the source read, as the server counted them when it delivered that one.",
		},
		{
			Name: MetricRedeliveriesSkipped, Kind: connectors.Counter, Labels: []string{"subject"},
			Help: "Deliveries a JetStream source skipped as redeliveries of messages it had read (their ack wait ran out while the job held them).",
		},
	}
}

// Metrics returns the pending count and skipped redeliveries of every
// partition the source reads (connectors.Metered).
func (s *jsSource) Metrics() []connectors.Metric {
	out := make([]connectors.Metric, 0, 2*len(s.parts))
	for _, p := range s.parts {
		if n := p.pending.Load(); n >= 0 {
			out = append(out, connectors.Metric{Name: MetricConsumerPending, LabelValues: []string{p.topic}, Value: float64(n)})
		}
		out = append(out, connectors.Metric{Name: MetricRedeliveriesSkipped, LabelValues: []string{p.topic}, Value: float64(p.skipped.Load())})
	}
	return out
}

// Metrics returns the messages the client dropped
// (connectors.Metered).
func (s *coreSource) Metrics() []connectors.Metric {
	s.mu.Lock()
	sub := s.sub
	s.mu.Unlock()
	if sub != nil {
		if n, err := sub.Dropped(); err == nil {
			s.dropped.Store(int64(n))
		}
	}
	if !s.subscribes {
		return nil
	}
	return []connectors.Metric{{Name: MetricDropped, Value: float64(s.dropped.Load())}}
}

// MetricFamilies declares the sinks' metrics (connectors.MetricFamilies).
func (o *output) MetricFamilies() []connectors.MetricFamily {
	if o.cfg.Mode.Type != ModeJetStream {
		return nil
	}
	return []connectors.MetricFamily{{
		Name: MetricDuplicates, Kind: connectors.Counter,
		Help: "Messages a JetStream sink published that the stream acknowledged as duplicates (Nats-Msg-Id within its duplicate window) and did not store again.",
	}}
}

// Metrics returns the duplicates a JetStream sink's stream acknowledged
// (connectors.Metered).
func (s *sink) Metrics() []connectors.Metric {
	if s.cfg.Mode.Type != ModeJetStream {
		return nil
	}
	return []connectors.Metric{{Name: MetricDuplicates, Value: float64(s.dups.Load())}}
}

var (
	_ connectors.MetricFamilies = (*input)(nil)
	_ connectors.MetricFamilies = (*output)(nil)
	_ connectors.Metered        = (*jsSource)(nil)
	_ connectors.Metered        = (*coreSource)(nil)
	_ connectors.Metered        = (*sink)(nil)
)
