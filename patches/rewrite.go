package patches

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/llbuild/llbuild/internal/digest"
)

// Refresh reads the series file seriesPath of fsys as it is on disk, digests and all, and
// returns the patches it lists with the digests of their files now, and the file's contents
// with those digests and without the patches named in drop. Comments, blank lines and order
// stay. Use it to move a series to new files; Load is what checks a series.
func Refresh(fsys fs.FS, seriesPath string, drop map[string]bool) ([]byte, []Patch, error) {
	data, err := fs.ReadFile(fsys, seriesPath)
	if err != nil {
		return nil, nil, fmt.Errorf("reading patch series: %w", err)
	}
	var (
		out  bytes.Buffer
		kept []Patch
		errs []error
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		fields := strings.Fields(text)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			out.WriteString(text + "\n")
			continue
		}
		name := fields[0]
		if len(fields) != 2 || strings.Contains(name, "/") || !strings.HasSuffix(name, ".patch") {
			errs = append(errs, fmt.Errorf("%s:%d: want \"<file>.patch sha256:<64 hex>\", got %q", seriesPath, line, strings.TrimSpace(text)))
			continue
		}
		body, err := fs.ReadFile(fsys, path.Join(path.Dir(seriesPath), name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", seriesPath, line, err))
			continue
		}
		if drop[name] {
			continue
		}
		p := Patch{Name: name, SHA256: digest.SHA256Hex(body), Data: body}
		kept = append(kept, p)
		fmt.Fprintf(&out, "%s sha256:%s\n", p.Name, p.SHA256)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return out.Bytes(), kept, nil
}
