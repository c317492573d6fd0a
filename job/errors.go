package job

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a configuration value: an
// operator's config, a window or aggregate spec, a connector's config. It
// is the one field-error type of the module: operators, windows,
// aggregates, connectors.DecodeConfig and connectors.FieldError all return
// it, and Validate/Build turn each into a *ValidationError whose Field is
// Path joined under the place of the value in the spec.
//
// Path is relative to the value being checked ("config.window.size_ms",
// "schema[1].type"); empty means the value itself.
//
// Connectors outside this module may return their own error types
// instead: any error with FieldPath() (and optionally FieldReason())
// methods is reported with its path, as connectors.FlattenFieldErrors
// describes.
type FieldError struct {
	Path   string
	Reason string
}

// Error returns "path: reason", or the reason alone when Path is empty.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// FieldPath returns Path. It is the method connectors.FlattenFieldErrors
// looks for, which error types of other modules can implement too.
func (e *FieldError) FieldPath() string { return e.Path }

// FieldReason returns Reason.
func (e *FieldError) FieldReason() string { return e.Reason }

// ValidationError is one problem with a job spec. It names the job, the
// operator at fault (when there is one) and the path of the field in the
// spec, so a user can find it in the file:
//
//	job "orders": operator "tumble": operators[2].config.window.size_ms: must be > 0 (got 0)
type ValidationError struct {
	Job      string
	Operator string // empty for job-level problems
	// Field is the path of the field in the spec, e.g.
	// "operators[2].config.window.size_ms" or "edges[0].to". For a job
	// written with arkflow.Builder, Build names the Builder call instead,
	// with the path inside its argument: `.Window("w", ...): window.size_ms`.
	Field  string
	Reason string
}

// Error renders the problem as job "<job>": operator "<op>": <field>:
// <reason>, leaving out the operator and field when they are empty.
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %q: ", e.Job)
	if e.Operator != "" {
		fmt.Fprintf(&b, "operator %q: ", e.Operator)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the problem as a *FieldError whose Path is the full path
// of the field in the spec (Field), so errors.As(err, &fe) with fe a
// *FieldError finds the field of a validation error as it finds that of
// a connector's config error. It returns nil when no field is at fault.
func (e *ValidationError) Unwrap() error {
	if e.Field == "" {
		return nil
	}
	return &FieldError{Path: e.Field, Reason: e.Reason}
}

// ValidationErrors is every problem found in one validation, in spec order.
// Validation never stops at the first problem.
type ValidationErrors []*ValidationError

// Error renders every problem, one per line.
func (es ValidationErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each *ValidationError.
func (es ValidationErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// AsValidationErrors returns the validation errors inside err, or nil.
func AsValidationErrors(err error) ValidationErrors {
	var ves ValidationErrors
	if errors.As(err, &ves) {
		return ves
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ValidationErrors{ve}
	}
	return nil
}
