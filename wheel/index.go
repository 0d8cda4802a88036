package wheel

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/artifacts"
	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/walkroot"
)

// Entry is one wheel of an index.
type Entry struct {
	// From is where the wheel is now (inside an artifact directory).
	From     string
	Filename string
	SHA256   string
	Size     int64
	// Project is the normalized project name; Variant the index it goes in (cu131, cpu, ...).
	Project, Variant string
	RequiresPython   string
}

// Collect finds the wheels of every artifact directory under root (root itself may be one),
// checks each against the digest its artifacts.json records, and returns them sorted by
// variant, project and file name. A wheel's variant is the first part of its version's local
// label, which llbuild sets to what the wheel was built for (cu131.sm86.avx2 goes in cu131).
func Collect(ctx context.Context, root string) ([]Entry, error) {
	var manifests []string
	err := filepath.WalkDir(walkroot.Dir(root), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".tmp-") {
			return filepath.SkipDir // an artifact directory being written
		}
		if !d.IsDir() && d.Name() == artifacts.ManifestFile {
			manifests = append(manifests, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading artifacts %s: %w", root, err)
	}
	sort.Strings(manifests)
	var out []Entry
	var errs []error
	for _, m := range manifests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Open verifies every file against the sizes and digests artifacts.json records.
		a, err := artifacts.Open(filepath.Dir(m))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range a.Files(artifacts.KindWheel) {
			e, err := entryOf(a.Path(f), f)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no wheels under %s: build one with llbuild wheel", root)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Variant != b.Variant {
			return a.Variant < b.Variant
		}
		if a.Project != b.Project {
			return a.Project < b.Project
		}
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.From < b.From
	})
	return out, nil
}

func entryOf(p string, f artifacts.File) (Entry, error) {
	fh, err := os.Open(p)
	if err != nil {
		return Entry{}, err
	}
	defer fh.Close()
	n, sum := f.Size, f.SHA256
	w, _, err := Read(fh, n, p)
	if err != nil {
		return Entry{}, err
	}
	label := w.File.LocalLabel()
	variant, _, _ := strings.Cut(label, ".")
	if variant == "" {
		return Entry{}, fmt.Errorf("%s: version %s has no local label, so which index it belongs in is unknown (llbuild wheel labels what a wheel was built for, e.g. +cpu.avx2)", p, w.File.Version)
	}
	return Entry{
		From: p, Filename: filepath.Base(p), SHA256: sum, Size: n,
		Project: NormalizeName(w.Name), Variant: variant, RequiresPython: w.RequiresPython,
	}, nil
}

// WriteIndex writes a PEP 503 simple index of entries to dir, one per variant:
// dir/<variant>/simple/index.html lists the projects, dir/<variant>/simple/<project>/ holds
// the project page, whose links carry #sha256= fragments, and the wheels beside it. pip takes
// --index-url or --extra-index-url http://HOST/<variant>/simple. The index is assembled next to
// dir and renamed into place; a previous index stays whole until then.
func WriteIndex(dir string, entries []Entry) error {
	unique, err := uniqueEntries(entries)
	if err != nil {
		return err
	}
	return writeIndex(dir, unique)
}

// uniqueEntries is entries with each wheel once (a root named twice finds its wheels twice);
// two different wheels of one name in one variant are an error.
func uniqueEntries(entries []Entry) ([]Entry, error) {
	var unique []Entry
	seen := map[string]Entry{}
	for _, e := range entries {
		id := e.Variant + "/" + e.Filename
		if prev, dup := seen[id]; dup {
			if prev.SHA256 == e.SHA256 {
				continue
			}
			return nil, fmt.Errorf("two different wheels are both %s in the %s index: %s and %s; index one of them", e.Filename, e.Variant, prev.From, e.From)
		}
		seen[id] = e
		unique = append(unique, e)
	}
	return unique, nil
}

// writeIndex is WriteIndex of entries that name each wheel once.
func writeIndex(dir string, entries []Entry) error {
	dir = filepath.Clean(dir)
	if err := checkReplaceable(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-index-")
	if err != nil {
		return fmt.Errorf("creating a temporary index directory: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	type key struct{ variant, project string }
	files := map[key][]Entry{}
	projects := map[string][]string{}
	for _, e := range entries {
		k := key{e.Variant, e.Project}
		if len(files[k]) == 0 {
			projects[e.Variant] = append(projects[e.Variant], e.Project)
		}
		files[k] = append(files[k], e)
	}
	var variants []string
	for v := range projects {
		variants = append(variants, v)
	}
	sort.Strings(variants)
	for _, v := range variants {
		simple := filepath.Join(tmp, v, "simple")
		sort.Strings(projects[v])
		var links []link
		for _, p := range projects[v] {
			links = append(links, link{href: p + "/", text: p})
			pdir := filepath.Join(simple, p)
			if err := os.MkdirAll(pdir, 0o755); err != nil {
				return err
			}
			var plinks []link
			for _, e := range files[key{v, p}] {
				if err := copyWheel(e.From, filepath.Join(pdir, e.Filename)); err != nil {
					return err
				}
				plinks = append(plinks, link{href: url.PathEscape(e.Filename) + "#sha256=" + e.SHA256, text: e.Filename, requiresPython: e.RequiresPython})
			}
			if err := writePage(filepath.Join(pdir, "index.html"), "Links for "+p, plinks); err != nil {
				return err
			}
		}
		if err := writePage(filepath.Join(simple, "index.html"), "Simple index", links); err != nil {
			return err
		}
	}
	var top []link
	for _, v := range variants {
		top = append(top, link{href: v + "/simple/", text: v})
	}
	if err := writePage(filepath.Join(tmp, "index.html"), indexTitle, top); err != nil {
		return err
	}
	if err := atomicfile.SyncTree(tmp); err != nil {
		return err
	}
	if err := atomicfile.ReplaceDir(tmp, dir); err != nil {
		return err
	}
	ok = true
	return atomicfile.SyncDir(parent)
}

const indexTitle = "llbuild wheel indexes"

// checkReplaceable refuses to replace a directory that is neither empty nor an index this
// package wrote: -o pointed at the wrong place must not delete it.
func checkReplaceable(dir string) error {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// replacing it would put a directory in the link's place and leave the index it
		// names as it was
		return inputerr.Errorf("%s is a link: give the directory it names, or a new one", dir)
	} else if err == nil && !fi.IsDir() {
		return inputerr.Errorf("%s is a file, not an index directory: choose an empty or new directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !strings.Contains(string(b), "<title>"+indexTitle+"</title>") {
		return inputerr.Errorf("%s exists and is not a wheel index written by llbuild: choose an empty or new directory", dir)
	}
	return nil
}

type link struct{ href, text, requiresPython string }

func writePage(name, title string, links []link) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"1.0\">\n")
	fmt.Fprintf(&b, "    <title>%s</title>\n  </head>\n  <body>\n    <h1>%s</h1>\n", html.EscapeString(title), html.EscapeString(title))
	for _, l := range links {
		attr := ""
		if l.requiresPython != "" {
			attr = fmt.Sprintf(` data-requires-python="%s"`, html.EscapeString(l.requiresPython))
		}
		fmt.Fprintf(&b, "    <a href=\"%s\"%s>%s</a><br>\n", html.EscapeString(l.href), attr, html.EscapeString(l.text))
	}
	b.WriteString("  </body>\n</html>\n")
	return writeFile(name, []byte(b.String()))
}

func writeFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyWheel hard-links the wheel when it can (same file system) and copies it otherwise.
func copyWheel(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", from, err)
	}
	return nil
}

// Index collects the wheels under each root (Collect), writes the index of them all to dir
// (WriteIndex) and says on w what it wrote: a line per variant, sorted, with its name (cu131,
// cpu, ...), its simple/ directory and the number of wheels found for it, tab-separated. A
// root, or a wheel its artifacts.json names, that is not there is the caller's mistake: an
// inputerr.Error.
func Index(ctx context.Context, roots []string, dir string, w io.Writer) error {
	var all []Entry
	for _, root := range roots {
		es, err := Collect(ctx, root)
		if errors.Is(err, fs.ErrNotExist) {
			return &inputerr.Error{Err: err}
		}
		if err != nil {
			return err
		}
		all = append(all, es...)
	}
	unique, err := uniqueEntries(all)
	if err != nil {
		return err
	}
	if err := writeIndex(dir, unique); err != nil {
		return err
	}
	count := map[string]int{}
	var variants []string
	for _, e := range unique {
		if count[e.Variant] == 0 {
			variants = append(variants, e.Variant)
		}
		count[e.Variant]++
	}
	sort.Strings(variants)
	for _, v := range variants {
		fmt.Fprintf(w, "%s\t%s\t%d\n", v, filepath.Join(dir, v, "simple"), count[v])
	}
	return nil
}
