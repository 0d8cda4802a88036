// Package depcheck holds the test that keeps llbuild's packages inside their boundaries:
// what the shim, the bench, manifest and llamaserver may import.
package depcheck
