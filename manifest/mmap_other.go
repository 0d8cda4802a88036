//go:build !linux

package manifest

import (
	"errors"
	"os"
)

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) {}

func writeBehind(*os.File, int64, int64) {}
