// Package bundler makes a bundle from a target's artifacts or a server image: it finds the
// server, plans the manifest, warns of what the bundle will lack and writes it.
package bundler
