package httpconn

// This file holds the metrics the HTTP input and output report to their
// job (connectors.Metered), from counters they keep.

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Metric family names (without the job's arkflow_ prefix).
const (
	// MetricServerRequests counts the input's answers by status code.
	MetricServerRequests = "http_server_requests_total"
	// MetricServerRejected counts the input's requests whose rows did not
	// enter the job, by reason: method, path, auth, too_large, read,
	// partition, decode, event_time, busy (429), stopped, failed, gone.
	MetricServerRejected = "http_server_rejected_total"
	// MetricServerRows counts the rows the input handed to the job.
	MetricServerRows = "http_server_rows_total"
	// MetricServerDuplicates counts rows of an Idempotency-Key accepted
	// before: acknowledged again without entering the job.
	MetricServerDuplicates = "http_server_duplicate_rows_total"
	// MetricClientRequests counts the output's requests by status code
	// ("error" for a connection error).
	MetricClientRequests = "http_client_requests_total"
	// MetricClientRetries counts the output's retried requests (after a
	// 5xx, a 429 or a connection error).
	MetricClientRetries = "http_client_retries_total"
)

// serverMetrics are the input's counters, shared by its subtasks (one
// server); subtask 0's source reports them.
type serverMetrics struct {
	mu         sync.Mutex
	codes      map[int]int64
	rejected   map[string]int64
	rows       atomic.Int64
	duplicates atomic.Int64
}

func (m *serverMetrics) request(code int, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.codes == nil {
		m.codes, m.rejected = map[int]int64{}, map[string]int64{}
	}
	m.codes[code]++
	if reason != "" {
		m.rejected[reason]++
	}
}

func (m *serverMetrics) metrics() []connectors.Metric {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []connectors.Metric{
		{Name: MetricServerRows, Value: float64(m.rows.Load())},
		{Name: MetricServerDuplicates, Value: float64(m.duplicates.Load())},
	}
	for _, c := range sortedInts(m.codes) {
		out = append(out, connectors.Metric{Name: MetricServerRequests, LabelValues: []string{strconv.Itoa(c)}, Value: float64(m.codes[c])})
	}
	for r, n := range m.rejected {
		out = append(out, connectors.Metric{Name: MetricServerRejected, LabelValues: []string{r}, Value: float64(n)})
	}
	return out
}

func sortedInts(m map[int]int64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// MetricFamilies declares the input's metrics (connectors.MetricFamilies).
func (in *input) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		{Name: MetricServerRequests, Kind: connectors.Counter, Labels: []string{"code"},
			Help: "Requests the HTTP input answered, by status code."},
		{Name: MetricServerRejected, Kind: connectors.Counter, Labels: []string{"reason"},
			Help: "Requests to the HTTP input whose rows did not enter the job, by reason (decode, auth, too_large, busy, stopped, ...)."},
		{Name: MetricServerRows, Kind: connectors.Counter,
			Help: "Rows the HTTP input handed to the job (in the write-ahead log, with durability on)."},
		{Name: MetricServerDuplicates, Kind: connectors.Counter,
			Help: "Rows of an Idempotency-Key the HTTP input had accepted before: acknowledged again without entering the job."},
	}
}

// Metrics returns the server's counters from subtask 0's source
// (connectors.Metered).
func (s *source) Metrics() []connectors.Metric {
	if !s.reports {
		return nil
	}
	return s.in.m.metrics()
}

// clientMetrics are one sink's counters.
type clientMetrics struct {
	mu      sync.Mutex
	codes   map[string]int64
	retries atomic.Int64
}

func (m *clientMetrics) request(code string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.codes == nil {
		m.codes = map[string]int64{}
	}
	m.codes[code]++
}

// MetricFamilies declares the output's metrics (connectors.MetricFamilies).
func (o *output) MetricFamilies() []connectors.MetricFamily {
	return []connectors.MetricFamily{
		{Name: MetricClientRequests, Kind: connectors.Counter, Labels: []string{"code"},
			Help: "Requests the HTTP output sent, by the status code answered (error: no answer, a connection error)."},
		{Name: MetricClientRetries, Kind: connectors.Counter,
			Help: "Requests the HTTP output sent again after a 5xx, a 429 or a connection error."},
	}
}

// Metrics returns the sink's counters (connectors.Metered).
func (s *sink) Metrics() []connectors.Metric {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	out := []connectors.Metric{{Name: MetricClientRetries, Value: float64(s.m.retries.Load())}}
	for c, n := range s.m.codes {
		out = append(out, connectors.Metric{Name: MetricClientRequests, LabelValues: []string{c}, Value: float64(n)})
	}
	return out
}

var (
	_ connectors.MetricFamilies = (*input)(nil)
	_ connectors.MetricFamilies = (*output)(nil)
	_ connectors.Metered        = (*source)(nil)
	_ connectors.Metered        = (*sink)(nil)
)
