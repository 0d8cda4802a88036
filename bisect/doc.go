// Package bisect finds the upstream commit that changed a build's measured speed: it builds
// commits of a first-parent range, benches each against the good end on the same device, and
// keeps its state as a log that any machine can resume.
package bisect
