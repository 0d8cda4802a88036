// Package preflight predicts whether llama.cpp binaries will start on a host: CPU
// instructions the host lacks (SIGILL), a driver that cannot serve the CUDA an image needs,
// and GPUs without a kernel image, from facts read off ELF files and a host description.
package preflight
