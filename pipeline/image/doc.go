// Package image assembles a byte-reproducible runtime image from an artifact directory: the
// runtime base by digest plus one deterministic layer and the plan's configuration.
package image
