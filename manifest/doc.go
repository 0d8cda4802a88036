// Package manifest defines a submission bundle's manifest.json (strict decoding, deterministic encoding, validation), how a bundle is planned and written from artifacts and models (a directory, an archive or both), how its llama-server is launched from it, and the verification and unpacking of a bundle directory or archive against it.
package manifest
