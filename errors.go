package main

import (
	"context"
	"errors"
	"io/fs"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/manifest"
)

// usageOf makes an error that a library marked as the caller's mistake (inputerr.Error) a
// usage error (exit 2); any other error is returned as it is.
func usageOf(err error) error {
	if inputerr.Is(err) {
		return usageError{err}
	}
	return err
}

// notThere makes the error of an input the user named but that does not exist a usage error.
func notThere(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return usageError{err}
	}
	return err
}

// bundleDir is manifest.OpenDir with its errors as usage errors: a bundle named on the command
// line that is neither a bundle directory nor an archive is the caller's to fix.
func bundleDir(ctx context.Context, name string) (string, func(), error) {
	dir, cleanup, err := manifest.OpenDir(ctx, name)
	if err != nil {
		return "", nil, usageError{err}
	}
	return dir, cleanup, nil
}

// exitInterrupted is bench's exit status when it was stopped (Ctrl-C, SIGTERM) before every
// run was done: 128 + SIGINT, as shells report it.
const exitInterrupted = 130
