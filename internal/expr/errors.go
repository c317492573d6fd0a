package expr

import (
	"fmt"
	"unicode/utf8"
)

// Error is the error type returned by Compile, and by Eval and EvalMask for
// errors that can be attributed to a part of the expression.
type Error struct {
	// Pos is the 1-based column, counted in characters, of the part of the
	// source the error refers to; 0 if the error has no position.
	Pos int
	// Msg describes the problem.
	Msg string
}

// Error formats the error as "column 7: unknown column ..." or, without a
// position, just the message.
func (e *Error) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("column %d: %s", e.Pos, e.Msg)
	}
	return e.Msg
}

// errorAt returns an *Error positioned at byte offset off of src.
func errorAt(src string, off int, format string, args ...any) *Error {
	off = max(0, min(off, len(src)))
	return &Error{
		Pos: utf8.RuneCountInString(src[:off]) + 1,
		Msg: fmt.Sprintf(format, args...),
	}
}

// errorf returns an *Error without a position.
func errorf(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}
