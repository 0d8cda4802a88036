// Package patches holds llbuild's llama.cpp patch series: the patch files and the series that
// orders them and pins each by sha256.
package patches
