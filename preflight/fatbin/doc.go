// Package fatbin lists the entries of CUDA fat binaries (the .nv_fatbin ELF section) and
// decides whether a GPU of a given compute capability has a kernel image among them.
package fatbin
