package recipes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/llbuild/llbuild/patches"
)

// BumpCopy is Bump of a copy of the built-in server recipe and patch series, written into dir
// (created) as server.yaml and series with the patches beside it; opts' RecipeFile and
// SeriesFile are replaced by the copies. Nothing is left half-written: dir is removed again
// if the copy or the bump fails.
func BumpCopy(ctx context.Context, dir string, opts BumpOptions) (*BumpResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	opts.RecipeFile, opts.SeriesFile = filepath.Join(dir, "server.yaml"), filepath.Join(dir, "series")
	raw, err := Raw("server")
	if err == nil {
		err = os.WriteFile(opts.RecipeFile, raw, 0o644)
	}
	if err == nil {
		err = patches.WriteSeries(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	res, err := Bump(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	res.Copy = true
	return res, nil
}

// Log tells what the bump did that asks something of the user: the patches it dropped or
// removed (to git rm), or that there was nothing to do.
func (r *BumpResult) Log(log *slog.Logger) {
	gitRm := "; git rm the file when you commit"
	if r.Copy {
		gitRm = "" // a copy outside llbuild's tree: nothing to commit
	}
	for _, d := range r.Dropped {
		log.Info("dropped from the series: already upstream"+gitRm, "patch", d, "commit", r.Status.Commit)
	}
	if len(r.Written) == 0 {
		log.Info("the recipe is already at the commit and the series is current", "commit", r.Status.Commit)
	}
	for _, f := range r.Removed {
		log.Info("removed from the series: the new series does not name it"+strings.ReplaceAll(gitRm, "the file", "it"), "patch", f, "recorded in", r.Recorded)
	}
}

// WriteFiles writes one line per file the bump wrote, then the directory it recorded the old
// series in, if any.
func (r *BumpResult) WriteFiles(w io.Writer) error {
	for _, f := range append(r.Written, r.Recorded) {
		if f == "" {
			continue
		}
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}
