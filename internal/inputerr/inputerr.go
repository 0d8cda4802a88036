package inputerr

import (
	"errors"
	"fmt"
)

// Error marks a mistake in what the caller asked for: an input named that is not there or is
// not what it should be, an output that exists without force, an archive name of no known
// format, settings that contradict each other. Its message is Err's.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is fmt.Errorf marked as the caller's mistake.
func Errorf(format string, args ...any) error { return &Error{fmt.Errorf(format, args...)} }

// Is says whether err, or an error it wraps or joins, is an Error.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
