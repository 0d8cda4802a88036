// Package image assembles a byte-reproducible runtime image from an artifact directory: the
// runtime base by digest plus one deterministic layer and the plan's configuration, which
// records the whole plan so that the image can be read back as one.
package image
