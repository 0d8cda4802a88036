package main

import (
	"errors"
	"io/fs"

	"github.com/llbuild/llbuild/internal/inputerr"
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
