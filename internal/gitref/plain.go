package gitref

import (
	"context"
	"os"
)

// IsPlainDirectory says whether dir is a directory that is not a git repository: a source tree
// without history, whose content only its tree hash can pin.
func IsPlainDirectory(ctx context.Context, dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir() && !IsRepository(ctx, dir)
}
