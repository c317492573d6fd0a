// Package logformat is the --log-format flag of the commands (arkflow
// run, validate, plan and agent; arkflow-hub) and the one function that
// builds their logger from it, so every command writes the same records
// the same way.
package logformat

import (
	"fmt"
	"io"
	"log/slog"
)

// Format is the value of --log-format. Its zero value is Text. It is a
// flag.Value: Set refuses anything but "text" and "json", and the flag
// package then reports "invalid value ... for flag -log-format: ...",
// which names the flag and the values it takes.
type Format string

const (
	// Text is slog's key=value lines (slog.TextHandler), the default.
	Text Format = "text"
	// JSON is one JSON object a line (slog.JSONHandler), with the keys
	// time, level and msg, then the record's attributes.
	JSON Format = "json"
)

// Usage is the flag's help text.
const Usage = "write log records as `text` (key=value) or json (one object a line)"

// String returns the format, "text" for the zero value.
func (f *Format) String() string {
	if f == nil || *f == "" {
		return string(Text)
	}
	return string(*f)
}

// Set takes "text" or "json".
func (f *Format) Set(s string) error {
	switch Format(s) {
	case Text, JSON:
		*f = Format(s)
		return nil
	}
	return fmt.Errorf("must be text or json")
}

// New returns the logger a command writes to w: format f (the zero value
// is Text), at debug level when verbose (-v), else info.
func New(w io.Writer, f Format, verbose bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	if f == JSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
