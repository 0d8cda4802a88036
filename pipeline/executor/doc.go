// Package executor chooses and configures what carries out plans, the dagger or the host
// executor, from the options every building command shares.
package executor
