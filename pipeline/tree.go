package pipeline

import "github.com/llbuild/llbuild/internal/srctree"

// TreeHash is the content hash of a source tree that is not a git checkout, as provenance
// records an unverified source (srctree.Hash, which patches status names such a tree by too).
func TreeHash(dir string) (string, error) { return srctree.Hash(dir) }
