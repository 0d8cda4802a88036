package manifest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/walkroot"
)

// Problem is one thing wrong with a bundle. Path is the bundle path it concerns, if any.
type Problem struct {
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// String renders the problem as one line: "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Load reads and validates the manifest of the bundle at dir.
func Load(dir string) (*Manifest, error) {
	p := filepath.Join(dir, FileName)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// Verify checks the bundle at dir and returns every problem found, none when it is sound:
// the manifest decodes strictly and validates (schema version, launch arguments that stay
// inside the bundle); every listed file is there with its size and sha256; links point at
// listed siblings; nothing else is there (no unlisted file, no link leading out, no
// device, socket or pipe); the GGUF headers of model and draft parse and give the facts
// the manifest records.
func Verify(dir string) []Problem {
	var ps []Problem
	add := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...)})
	}
	m, problems := loadProblems(dir)
	if m == nil {
		return problems
	}
	ps = append(ps, problems...)

	listed := map[string]File{}
	for _, f := range m.Files {
		listed[f.Path] = f
	}
	// Everything on disk must be listed; walk without following links.
	err := filepath.WalkDir(walkroot.Dir(dir), func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if err != nil {
			add(rel, "%v", err)
			return nil
		}
		if rel == "." || rel == FileName {
			return nil
		}
		mode := d.Type()
		switch {
		case mode.IsDir():
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				add(rel, "%v", err)
				return nil
			}
			if linkEscapes(rel, target) {
				add(rel, "is a link to %s, outside the bundle", target)
				return nil
			}
			if f, ok := listed[rel]; !ok || f.Link == "" {
				add(rel, "is a link to %s that the manifest does not list as a link", target)
			}
		case mode.IsRegular():
			if _, ok := listed[rel]; !ok {
				add(rel, "is not listed in %s", FileName)
			}
		default:
			if _, ok := listed[rel]; !ok { // a listed file is verifyFile's to report
				add(rel, "is a %s, not a regular file", describeMode(mode))
			}
		}
		return nil
	})
	if err != nil {
		add("", "walking %s: %v", dir, err)
	}

	type result struct{ problems []Problem }
	results := make([]result, len(m.Files))
	sem := make(chan struct{}, hashWorkers())
	var wg sync.WaitGroup
	for i, f := range m.Files {
		if CheckPath(f.Path) != nil {
			continue // reported by Validate
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i].problems = verifyFile(dir, f)
		}()
	}
	wg.Wait()
	for _, r := range results {
		ps = append(ps, r.problems...)
	}
	ps = append(ps, checkModels(m, func(p string) (*gguf.File, error) {
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err != nil || !fi.Mode().IsRegular() {
			return nil, errSkip
		}
		return gguf.Open(filepath.Join(dir, filepath.FromSlash(p)))
	})...)
	return sortProblems(ps)
}

var errSkip = errors.New("reported elsewhere")

func loadProblems(dir string) (*Manifest, []Problem) {
	p := filepath.Join(dir, FileName)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, []Problem{{Path: FileName, Message: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}}
	}
	if !fi.Mode().IsRegular() {
		return nil, []Problem{{Path: FileName, Message: "is not a regular file"}}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, []Problem{{Path: FileName, Message: err.Error()}}
	}
	return parseProblems(b)
}

// parseProblems decodes a manifest; a manifest that decodes but does not validate is
// returned with its problems, so that its files are still checked.
func parseProblems(b []byte) (*Manifest, []Problem) {
	m, err := Decode(bytes.NewReader(b))
	if err != nil {
		return nil, []Problem{{Path: FileName, Message: "does not decode: " + err.Error()}}
	}
	if m.SchemaVersion < MinSchemaVersion || m.SchemaVersion > SchemaVersion {
		return nil, []Problem{{Path: FileName, Message: fmt.Sprintf("schemaVersion is %d, this llbuild reads %d to %d", m.SchemaVersion, MinSchemaVersion, SchemaVersion)}}
	}
	var ps []Problem
	if err := m.Validate(); err != nil {
		for _, e := range unjoin(err) {
			ps = append(ps, Problem{Path: FileName, Message: e.Error()})
		}
	}
	return m, ps
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func verifyFile(dir string, f File) []Problem {
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	bad := func(format string, args ...any) []Problem {
		return []Problem{{Path: f.Path, Message: fmt.Sprintf(format, args...)}}
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return bad("is missing")
	}
	if err != nil {
		return bad("%v", err)
	}
	if f.Link != "" {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return bad("should be a link to %s, is a %s", f.Link, describeMode(fi.Mode()))
		}
		got, err := os.Readlink(p)
		if err != nil {
			return bad("%v", err)
		}
		if got != f.Link {
			return bad("links to %s, the manifest says %s", got, f.Link)
		}
		return nil
	}
	if !fi.Mode().IsRegular() {
		return bad("is a %s, not a regular file", describeMode(fi.Mode()))
	}
	if fi.Size() != f.Size {
		return bad("has %d bytes, the manifest says %d (tampered or truncated)", fi.Size(), f.Size)
	}
	if f.Kind == KindExecutable && fi.Mode()&0o111 == 0 {
		return bad("is not executable (mode %v): serve could not start it; chmod +x %s, or unpack the bundle again", fi.Mode().Perm(), f.Path)
	}
	fh, err := os.Open(p)
	if err != nil {
		return bad("%v", err)
	}
	defer fh.Close()
	n, sum, err := CopyAndHashFile(context.Background(), nil, fh, nil)
	if err != nil {
		return bad("reading: %v", err)
	}
	if n != f.Size || sum != f.SHA256 {
		return bad("sha256 %s, the manifest says %s (tampered)", sum, f.SHA256)
	}
	return nil
}

// checkModels parses the GGUF headers of model and draft and compares their facts with
// the manifest's.
func checkModels(m *Manifest, open func(p string) (*gguf.File, error)) []Problem {
	var ps []Problem
	models := []*Model{&m.Models.Model}
	if m.Models.Draft != nil {
		models = append(models, m.Models.Draft)
	}
	for _, mo := range models {
		if CheckPath(mo.Path) != nil {
			continue
		}
		f, err := open(mo.Path)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			ps = append(ps, Problem{Path: mo.Path, Message: fmt.Sprintf("GGUF header does not parse: %v", err)})
			continue
		}
		if got := f.Facts(); !reflect.DeepEqual(got, mo.GGUF) {
			ps = append(ps, Problem{Path: mo.Path, Message: fmt.Sprintf("GGUF facts (%s, %s, %d tokens) differ from the manifest's (%s, %s, %d tokens)",
				got.Architecture, got.Quantization, got.VocabSize, mo.GGUF.Architecture, mo.GGUF.Quantization, mo.GGUF.VocabSize)})
		}
	}
	return ps
}

// linkEscapes says whether a link at rel (bundle path) with the given target leads out of
// the bundle.
func linkEscapes(rel, target string) bool {
	if path.IsAbs(target) || strings.HasPrefix(target, "/") {
		return true
	}
	j := path.Join(path.Dir(rel), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

func hashWorkers() int {
	n := runtime.GOMAXPROCS(0)
	if n > 4 {
		n = 4
	}
	return n
}

func sortProblems(ps []Problem) []Problem {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
	return ps
}

// maxHeader bounds the prefix of a GGUF entry kept while streaming an archive: the header
// limits of package gguf plus the alignment padding.
var maxHeader = gguf.DefaultLimits.MaxMetadataBytes + 1<<20

// VerifyTar checks a bundle packed as an uncompressed tar stream, reading it once and
// writing nothing: every entry name is checked (no absolute path, no .., no link leading
// out, no device, pipe or hard link), then the same checks as Verify are made on the
// streamed contents.
func VerifyTar(r io.Reader) []Problem {
	var ps []Problem
	add := func(p, format string, args ...any) {
		ps = append(ps, Problem{Path: p, Message: fmt.Sprintf(format, args...)})
	}
	type entry struct {
		size   int64
		sum    string
		link   string
		isLink bool
		head   []byte
	}
	entries := map[string]*entry{}
	var manifestBytes []byte
	errStop := errors.New("stop")
	walked, err := WalkTar(r, func(h TarEntry) error {
		name := h.Name
		switch h.Type {
		case tar.TypeSymlink:
			entries[name] = &entry{link: h.Linkname, isLink: true}
		case tar.TypeReg:
			e := &entry{}
			var dst io.Writer
			var buf *bytes.Buffer
			switch {
			case name == FileName:
				if h.Size > MaxSize {
					add(name, "is larger than %d bytes", MaxSize)
					return nil
				}
				buf = &bytes.Buffer{}
				dst = buf
			case strings.HasSuffix(name, ".gguf"):
				buf = &bytes.Buffer{}
				dst = &prefixWriter{buf: buf, max: maxHeader}
			}
			n, sum, err := CopyAndHash(dst, h.Contents)
			if err != nil {
				add(name, "reading: %v", err)
				return errStop
			}
			if name == FileName {
				manifestBytes = buf.Bytes()
				return nil
			}
			e.size, e.sum = n, sum
			if buf != nil {
				e.head = buf.Bytes()
			}
			entries[name] = e
		}
		return nil
	})
	ps = append(ps, walked...)
	if err != nil {
		if err != errStop {
			add("", "%v", err)
		}
		// The stream did not read to its end: what follows would only add noise.
		return sortProblems(ps)
	}
	if manifestBytes == nil {
		add(FileName, "is missing from the archive")
		return sortProblems(ps)
	}
	m, problems := parseProblems(manifestBytes)
	ps = append(ps, problems...)
	if m == nil {
		return sortProblems(ps)
	}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Path] = true
		e, ok := entries[f.Path]
		switch {
		case !ok:
			add(f.Path, "is missing")
		case f.Link != "" && !e.isLink:
			add(f.Path, "should be a link to %s, is a file", f.Link)
		case f.Link != "" && e.link != f.Link:
			add(f.Path, "links to %s, the manifest says %s", e.link, f.Link)
		case f.Link == "" && e.isLink:
			add(f.Path, "is a link to %s, the manifest lists a file", e.link)
		case f.Link == "" && e.size != f.Size:
			add(f.Path, "has %d bytes, the manifest says %d (tampered or truncated)", e.size, f.Size)
		case f.Link == "" && e.sum != f.SHA256:
			add(f.Path, "sha256 %s, the manifest says %s (tampered)", e.sum, f.SHA256)
		}
	}
	for name := range entries {
		if !listed[name] {
			add(name, "is not listed in %s", FileName)
		}
	}
	ps = append(ps, checkModels(m, func(p string) (*gguf.File, error) {
		e, ok := entries[p]
		if !ok || e.isLink {
			return nil, errSkip
		}
		return gguf.Read(&prefixReaderAt{b: e.head}, e.size)
	})...)
	return sortProblems(ps)
}

func checkEntryName(name string) error {
	if err := CheckPath(name); err != nil && name != FileName {
		return err
	}
	return nil
}

// TarTypeName names a tar entry type that a bundle may not hold, for error messages.
func TarTypeName(t byte) string {
	switch t {
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "named pipe"
	}
	return fmt.Sprintf("type %q", t)
}

// prefixWriter keeps the first max bytes written to it.
type prefixWriter struct {
	buf *bytes.Buffer
	max int64
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	if room := w.max - int64(w.buf.Len()); room > 0 {
		if int64(len(p)) > room {
			w.buf.Write(p[:room])
		} else {
			w.buf.Write(p)
		}
	}
	return len(p), nil
}

// prefixReaderAt serves the kept prefix of a streamed file; reading past it is an error, so
// a header larger than the prefix fails to parse instead of reading garbage.
type prefixReaderAt struct{ b []byte }

func (r *prefixReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// CheckLink accepts a symbolic link at bundle path rel whose target is relative and stays
// inside the bundle.
func CheckLink(rel, target string) error {
	if target == "" || linkEscapes(rel, target) {
		return fmt.Errorf("%s is a link to %q, outside the bundle", rel, target)
	}
	return nil
}
