// Package publish names, pushes and re-finds runtime images in a registry: tag templates
// rendered from a plan, idempotent publishing keyed by the plan-hash tag, and registry
// credentials that never reach a message.
package publish
