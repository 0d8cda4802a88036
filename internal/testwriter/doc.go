// Package testwriter is the writer tests hand to code that writes from several goroutines
// (logs, progress, a server's output) and read while it still runs.
package testwriter
