// Package pybuild provides Python's wheel build tools (python-build and scikit-build-core) from
// Debian's packages for tests that build wheels, as no Python package index can be reached.
package pybuild
