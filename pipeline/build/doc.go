// Package build carries out plans as `llbuild build` does: each target's artifacts, then, when
// asked, its runtime image, and a report of what came out.
package build
