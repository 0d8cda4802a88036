// Package artifacts writes and reads the content-addressed output of a build: the files, their
// digests (artifacts.json) and where they came from (provenance.json), moved into place atomically.
package artifacts
