// Package hostexec carries out a build plan natively on this machine, for hosts that already
// are the build image (a CI job inside a devel image, a GPU box, an air-gapped lab).
package hostexec
