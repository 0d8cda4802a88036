// Package recorded reads back the plan that a build's outputs record: an artifact directory's provenance.json, a bundle's manifest.json, an image's config labels, or a plan file.
package recorded
