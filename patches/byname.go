package patches

import (
	"os"
	"path/filepath"

	"github.com/llbuild/llbuild/internal/inputerr"
)

// ByName is the series that --series names: a named series (SeriesNames), a series file in the
// built-in format (its patches beside it), or, for "", the built-in series. A name that is
// neither a named series nor a file is an inputerr.Error.
func ByName(name string) ([]Patch, error) {
	switch name {
	case "":
		return Series()
	case SeriesScoring, SeriesPlain:
		return Named(name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, inputerr.Errorf("--series %s: neither a named series (scoring, plain) nor a file: %v", name, err)
	}
	ps, err := Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	if err != nil {
		// the user's series file (its lines, digests, patches): theirs to mend, exit 2 in every
		// command alike, as patches status has it
		return nil, &inputerr.Error{Err: err}
	}
	return ps, nil
}
