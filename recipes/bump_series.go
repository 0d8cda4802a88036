package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/patches"
)

// bumpToNewSeries is Bump with opts.NewSeries: the refreshed patches must all go in at the
// commit; then the old series, its patches and the old recipe are recorded in a directory of
// their own, the new patches replace the old ones beside the series file, and the recipe moves.
// Every file is written whole, and on any failure what was written is put back.
func bumpToNewSeries(ctx context.Context, opts BumpOptions, oldRecipe, oldSeries []byte) (*BumpResult, error) {
	old, err := Parse(opts.RecipeFile, oldRecipe)
	if err != nil {
		return nil, err
	}
	seriesDir := filepath.Dir(opts.SeriesFile)
	oldPatches, err := patches.Load(os.DirFS(seriesDir), filepath.Base(opts.SeriesFile))
	if err != nil {
		return nil, fmt.Errorf("the series being replaced does not load, so it cannot be recorded: %w; fix it (llbuild recipe bump --commit %s refreshes its digests) first", err, old.Source.Commit)
	}
	if ps, err := patches.Load(os.DirFS(filepath.Dir(opts.NewSeries)), filepath.Base(opts.NewSeries)); err == nil && len(ps) == 0 && len(oldPatches) > 0 {
		// an empty file (a redirect gone wrong) would drop every patch with only a log line
		return nil, inputerr.Errorf("--new-series %s names no patches: the bump would drop all %d of the series; write the refreshed patches' lines into it (--drop-upstream drops the ones upstream has)", opts.NewSeries, len(oldPatches))
	}
	newSeries, series, res, err := seriesAt(ctx, opts, os.DirFS(filepath.Dir(opts.NewSeries)), filepath.Base(opts.NewSeries), "the new series: ")
	if err != nil {
		return nil, err
	}
	rep := res.Status
	newRecipe, err := SetSource(opts.RecipeFile, oldRecipe, rep.Commit, rep.CommitTime, countAt(ctx, opts.Source, rep, old))
	if err != nil {
		return nil, err
	}
	record := opts.Record
	if record == "" {
		record = filepath.Join(seriesDir, old.Source.Commit[:9])
	}
	if _, err := os.Lstat(record); err == nil {
		return nil, inputerr.Errorf("%s already exists: the old series would be recorded there; move it away or give --record DIR; nothing was changed", record)
	}

	// the record, made whole in a temporary directory beside it and renamed into place
	tmp, err := os.MkdirTemp(filepath.Dir(record), ".record-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{"series": oldSeries, filepath.Base(opts.RecipeFile): oldRecipe}
	for _, p := range oldPatches {
		files[p.Name] = p.Data
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	if err := atomicfile.SyncTree(tmp); err != nil {
		return nil, err
	}

	var tx txn
	if err := os.Rename(tmp, record); err != nil {
		return nil, err
	}
	tx.undo = append(tx.undo, func() error { return os.RemoveAll(record) })
	res.Recorded = record
	keep := map[string]bool{}
	for _, p := range series {
		keep[p.Name] = true
		if err := tx.write(filepath.Join(seriesDir, p.Name), p.Data); err != nil {
			return nil, tx.rollback(err)
		}
	}
	for _, p := range oldPatches {
		if !keep[p.Name] {
			f := filepath.Join(seriesDir, p.Name)
			if err := tx.remove(f); err != nil {
				return nil, tx.rollback(err)
			}
			res.Removed = append(res.Removed, f)
		}
	}
	if err := tx.write(opts.SeriesFile, newSeries); err != nil {
		return nil, tx.rollback(err)
	}
	if err := tx.write(opts.RecipeFile, newRecipe); err != nil {
		return nil, tx.rollback(err)
	}
	res.Written = tx.written
	return res, nil
}

// txn writes and removes files, remembering how to put each back.
type txn struct {
	undo    []func() error
	written []string
}

func (t *txn) write(path string, data []byte) error {
	// a link (dangling too) is written through, so its target is what is put back or removed
	path, err := atomicfile.Resolve(path)
	if err != nil {
		return err
	}
	prev, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(prev, data):
		return nil
	case err == nil:
		t.undo = append(t.undo, func() error { return atomicfile.WriteThrough(path, prev, 0o644) })
	case errors.Is(err, os.ErrNotExist):
		t.undo = append(t.undo, func() error { return os.Remove(path) })
	default:
		return err
	}
	if err := atomicfile.WriteThrough(path, data, 0o644); err != nil {
		return err
	}
	t.written = append(t.written, path)
	return nil
}

func (t *txn) remove(path string) error {
	prev, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	t.undo = append(t.undo, func() error { return atomicfile.WriteThrough(path, prev, 0o644) })
	return os.Remove(path)
}

// rollback puts back what was done, newest first, and returns err with whatever could not be.
func (t *txn) rollback(err error) error {
	for i := len(t.undo) - 1; i >= 0; i-- {
		if uerr := t.undo[i](); uerr != nil {
			err = fmt.Errorf("%w; putting things back failed too (%v): restore the series and recipe with git checkout and git clean", err, uerr)
		}
	}
	return err
}

// sameFile reports whether a and b are one file.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
