// Package cliargs lets flags follow a command's arguments (urfave/cli stops reading flags at the
// first argument) and reports the mistakes in them as usage errors, naming flags as help does.
package cliargs
