// Package jsonout writes the JSON that commands print with --json: indented by two spaces, a
// trailing newline, lists as [] rather than null.
package jsonout
