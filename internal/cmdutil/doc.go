// Package cmdutil is what llbuild's commands share and nothing else: errors that carry their exit
// status, the streams a command writes to, checks of flag values, and JSON on stdout.
package cmdutil
