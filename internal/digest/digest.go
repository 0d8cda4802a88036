// Package digest names content the one way llbuild writes it everywhere: the sha256 of the
// bytes in lower-case hex (manifests, plans, series, provenance and GGUF facts add their own
// "sha256:" prefix where their format has one).
package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// SHA256Hex is the sha256 of b in lower-case hex.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
