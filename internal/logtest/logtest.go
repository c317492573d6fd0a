// Package logtest records what code logs, for tests that check a
// job's log records (their keys, their levels, that nothing reaches the
// default logger).
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// Record is one record as a Recorder kept it: its level, message, and
// attributes (those of the logger it came through first, then its own)
// rendered as strings.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Recorder is a slog.Handler that keeps every record, at every level.
// Loggers derived with With share the recording. Safe for concurrent use.
type Recorder struct {
	mu    *sync.Mutex
	recs  *[]Record
	attrs []slog.Attr
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{mu: &sync.Mutex{}, recs: &[]Record{}} }

// Enabled is true at every level.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// WithGroup ignores the group: keys are recorded as given.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// WithAttrs returns a Recorder sharing r's records that adds as to each.
func (r *Recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &Recorder{mu: r.mu, recs: r.recs, attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}

// Handle records rec.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Msg: rec.Message, Attrs: map[string]string{}}
	for _, a := range r.attrs {
		out.Attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		out.Attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	*r.recs = append(*r.recs, out)
	r.mu.Unlock()
	return nil
}

// Records returns the records so far, oldest first.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), *r.recs...)
}

// Warnings returns the records at level Warn so far.
func (r *Recorder) Warnings() []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Level == slog.LevelWarn {
			out = append(out, rec)
		}
	}
	return out
}

// Messages returns the messages of the records so far.
func (r *Recorder) Messages() []string {
	var out []string
	for _, rec := range r.Records() {
		out = append(out, rec.Msg)
	}
	return out
}
