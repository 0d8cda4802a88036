// Package progress reports long work while it runs: one status line redrawn in place when
// stderr is a terminal, a log line every so often when it is not.
package progress
