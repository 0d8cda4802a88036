// Package inputerr marks errors that are the caller's mistake rather than a failure of the work, so that a command can report them as usage errors (exit 2) whatever library made them.
package inputerr
