// Package cmdutil is what llbuild's commands share and nothing else: errors that carry their exit
// status, the streams a command writes to, and the flags several commands take.
package cmdutil
