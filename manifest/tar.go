package manifest

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"strings"
)

// TarEntry is an entry of a bundle archive that may be in a bundle: its name is a bundle
// path (or manifest.json), it is the first entry of that name, it lies under no file or
// link, and it is a directory, a link staying inside, or a regular file.
type TarEntry struct {
	// Name is slash-separated, without a leading ./ or a trailing slash.
	Name string
	// Type is tar.TypeDir, tar.TypeSymlink or tar.TypeReg.
	Type     byte
	Linkname string
	Mode     int64
	Size     int64
	// Contents reads a regular file's bytes; it is valid only during the visit.
	Contents io.Reader
}

// WalkTar reads a bundle archive's tar stream once and calls visit for each entry that may
// be in a bundle, in archive order. It is the one reader of archives, for verifying and for
// unpacking alike, so both refuse the same entries: a bad name, a name seen before (a second
// manifest.json a reader might take instead of the first), an entry under a file or a link,
// a link leading out, a special file. Those are returned as problems and not visited. A
// stream that does not read, or an error from visit, ends the walk and is returned.
func WalkTar(r io.Reader, visit func(TarEntry) error) ([]Problem, error) {
	var ps []Problem
	add := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[string]byte{}    // entry name → type
	parents := map[string]bool{} // directories that entries lie under
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ps, nil
		}
		if err != nil {
			return ps, fmt.Errorf("reading the archive: %w", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		if err := checkEntryName(name); err != nil {
			add(h.Name, "entry %v", err)
			continue
		}
		if _, dup := seen[name]; dup {
			add(name, "appears twice in the archive")
			continue
		}
		seen[name] = h.Typeflag
		if h.Typeflag != tar.TypeDir && parents[name] {
			add(name, "is a %s, but entries before it lie under it", entryKind(h.Typeflag))
			continue
		}
		under := ""
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if t, ok := seen[d]; ok && t != tar.TypeDir {
				under = d
			}
			parents[d] = true
		}
		if under != "" {
			if seen[under] == tar.TypeSymlink {
				add(name, "passes through the link %s", under)
			} else {
				add(name, "is under %s, which is a file", under)
			}
			continue
		}
		e := TarEntry{Name: name, Type: h.Typeflag, Linkname: h.Linkname, Mode: h.Mode, Size: h.Size}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeSymlink:
			if err := CheckLink(name, h.Linkname); err != nil {
				add(name, "is a link to %s, outside the bundle", h.Linkname)
				continue
			}
		case tar.TypeReg:
			e.Contents = tr
		default:
			add(name, "is a %s entry; a bundle holds only files, directories and links", TarTypeName(h.Typeflag))
			continue
		}
		if err := visit(e); err != nil {
			return ps, err
		}
	}
}

func entryKind(t byte) string {
	if t == tar.TypeSymlink {
		return "link"
	}
	return "file"
}
