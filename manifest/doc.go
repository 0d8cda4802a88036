// Package manifest defines a submission bundle's manifest.json (strict decoding, deterministic encoding, validation), how a bundle's llama-server is launched from it, and the verification of a bundle directory or archive against it.
package manifest
