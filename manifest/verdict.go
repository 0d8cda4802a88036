package manifest

import (
	"fmt"
	"io"
	"strings"
)

// Verdict is what verifying a bundle found: the bundle's path, whether it is sound, and its
// problems (never nil, so that JSON says [] for none).
type Verdict struct {
	Path     string    `json:"path"`
	OK       bool      `json:"ok"`
	Problems []Problem `json:"problems"`
}

// VerifyPath verifies the bundle at path: a directory with Verify (isDir), an archive with
// VerifyArchive, which streams it once and writes nothing.
func VerifyPath(path string, isDir bool) (*Verdict, error) {
	var problems []Problem
	if isDir {
		problems = Verify(path)
	} else {
		var err error
		if problems, err = VerifyArchive(path); err != nil {
			return nil, err
		}
	}
	if problems == nil {
		problems = []Problem{}
	}
	return &Verdict{Path: path, OK: len(problems) == 0, Problems: problems}, nil
}

// WriteProblems writes one line per problem.
func (v *Verdict) WriteProblems(w io.Writer) error {
	for _, p := range v.Problems {
		if _, err := fmt.Fprintln(w, p.String()); err != nil {
			return err
		}
	}
	return nil
}

// VerifyError is nil when the bundle directory dir verifies (Verify finds no problem), and
// otherwise one error naming the bundle as name and listing every problem, one a line.
func VerifyError(dir, name string) error {
	problems := Verify(dir)
	if len(problems) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range problems {
		b.WriteString("\n  " + p.String())
	}
	return fmt.Errorf("bundle %s does not verify:%s", name, b.String())
}
