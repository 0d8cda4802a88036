// Package targets describes the hosts llbuild builds for: their CPU, GPUs and driver, and how
// llama.cpp must be built to run on them.
package targets
