// Package imagebundle makes a bundle's server out of a container image, llbuild's or anyone
// else's: llama-server, its loader and libraries read from the layers, the plan from an llbuild
// image's labels, a foreign image marked so by its digest.
package imagebundle
