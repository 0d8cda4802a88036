// Package publishtest starts registries and makes images and artifacts for tests of
// publishing: Debian's docker-registry and go-containerregistry's in-memory registry behind
// a request-counting proxy, a small base image, and real ELF stand-ins for a server build.
package publishtest
