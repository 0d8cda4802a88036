package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/llbuild/llbuild/internal/ggmlload"
)

// Server is llama-server and everything it loads, taken out of a runtime image: the files a
// bundle needs to run the image's server on the host without the image (bundle --image).
type Server struct {
	// Path is llama-server's path in the image (/app/llama-server).
	Path string
	// Files are the server, its loader and its libraries, extracted under the directory given to
	// ExtractServer. Names are unique: a bundle puts the server in bin/ and the rest in lib/.
	Files []ServerFile
	// Loader is the Name of the dynamic loader (the server's PT_INTERP, from the image): the bundle
	// runs the server through it, so that the image's own C library is used, as in the image.
	Loader string
	// Backends are the ggml backends the server's ggml dlopens at start (a GGML_BACKEND_DL
	// build's libggml-cpu-<variant>.so, libggml-cuda.so), in the order ggml's loader meets
	// them; each is also among Files, under its Name.
	Backends []Backend
	// BackendDir is the GGML_BACKEND_DIR compiled into the server's libggml.so when the image
	// has that directory: ggml's loader searches it before the server's own directory.
	BackendDir string
	// BackendPath is the Name of the backend the image's GGML_BACKEND_PATH names: ggml loads
	// it besides the ones it finds, whatever it scores.
	BackendPath string
	// Host lists the libraries the server needs that the host provides, not the image: the GPU
	// driver's (libcuda.so.1), which the container runtime mounts into a container.
	Host []string
	// Config is the image's config; Digest its manifest's digest.
	Config *v1.ConfigFile
	Digest v1.Hash
}

// ServerFile is one file of a Server.
type ServerFile struct {
	// Name is the file's name in the bundle's bin/ or lib/.
	Name string
	// Executable marks llama-server; the others are libraries (the loader included).
	Executable bool
	// Link, when set, makes the file a symbolic link to the sibling Link (a library's soname
	// pointing at the file the image holds under another name).
	Link string
	// From is the extracted file; ImagePath where it was in the image. Empty for a link.
	From, ImagePath string
}

// Backend is a ggml backend of a Server.
type Backend struct {
	// Name is the file's name in the bundle (ggml loads files by the names they have).
	Name string
	// Backend is what the file is a backend of (cpu, cuda, vulkan), Variant the CPU variant
	// its name says (haswell), if any.
	Backend, Variant string
	// ImagePath is where the image holds the file; Search says how ggml finds it there:
	// "GGML_BACKEND_DIR", "the server's directory", "the working directory" or
	// "GGML_BACKEND_PATH".
	ImagePath, Search string
}

// hostProvided are the libraries of the GPU driver: a container runtime mounts the host's into
// the container (they must match the kernel module), so an image holds at most a stub of them.
func hostProvided(soname string) bool {
	for _, p := range []string{"libcuda.so", "libnvidia-", "libcudadebugger.so", "libnvcuvid.so", "libnvoptix.so"} {
		if strings.HasPrefix(soname, p) {
			return true
		}
	}
	return false
}

// defaultLibDirs are the directories the x86-64 glibc loader searches after the ld.so.conf ones.
var defaultLibDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// imageFS is the flattened filesystem of an image as far as ExtractServer keeps it: ELF files
// (extracted), symbolic and hard links, and the loader's configuration.
type imageFS struct {
	dir     string
	elves   map[string]string // image path -> extracted file
	links   map[string]string // image path -> symlink target as written
	hard    map[string]string // image path -> image path it is a hard link of
	ldconf  map[string][]byte // /etc/ld.so.conf and /etc/ld.so.conf.d/*.conf
	servers []string          // regular ELF files named llama-server
}

// ExtractServer reads img's flattened filesystem once, keeps its ELF files under dir, and finds
// llama-server (the entrypoint when it is one, else the one file of that name), its dynamic
// loader and the libraries it loads as the loader would find them (RPATH, the image's
// LD_LIBRARY_PATH, RUNPATH, ld.so.conf, the default directories; $ORIGIN expanded), plus the
// ggml backends a GGML_BACKEND_DL build dlopens at start (see Server.Backends) and what they
// load. Every library the
// server needs must be in the image, but for the GPU driver's (Host). dir must exist and be empty;
// the caller removes it once the files are placed.
func ExtractServer(ctx context.Context, img v1.Image, dir string) (*Server, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image config: %w", err)
	}
	dg, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("reading the image digest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("reading the image's layers: %w", err)
	}
	// mutate.Extract reads a layer it cannot open as an empty one: open each first, so that an
	// image read in part is an error rather than a server that seems to lack its libraries.
	for i, l := range layers {
		rc, err := l.Compressed()
		if err == nil {
			var b [1]byte
			_, err = io.ReadFull(rc, b[:])
			rc.Close()
		}
		if err != nil {
			d, _ := l.Digest()
			return nil, fmt.Errorf("reading layer %d (%s): %w", i, d, err)
		}
	}
	fsys := &imageFS{dir: dir, elves: map[string]string{}, links: map[string]string{}, hard: map[string]string{}, ldconf: map[string][]byte{}}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := fsys.read(ctx, tar.NewReader(rc)); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range cf.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	serverPath, err := fsys.findServer(cf, env)
	if err != nil {
		return nil, err
	}
	s := &Server{Path: serverPath, Config: cf, Digest: dg}
	if err := fsys.closure(s, env); err != nil {
		return nil, err
	}
	return s, nil
}

// SearchBackendPath is the Search of a backend only the image's GGML_BACKEND_PATH names.
const SearchBackendPath = "GGML_BACKEND_PATH"

// foundBackend is a Backend and the ELF file it resolves to in the image.
type foundBackend struct {
	Backend
	resolved string
	forced   bool
}

// backends finds what ggml's loader (ggml_backend_load_all) would dlopen when the image runs
// the server, when its libggml.so is a GGML_BACKEND_DL build (it links no CPU backend; a
// server without libggml.so links ggml statically): the backend files of the GGML_BACKEND_DIR compiled into its libggml.so (read off
// the library against the image's directories that hold backends), of the server's directory
// and of the working directory, in that order, a name met twice kept where ggml meets it first
// (of two variants that score the same it keeps the first); then the file GGML_BACKEND_PATH
// names. files are the libraries the server loads, by bundle name.
func (fsys *imageFS) backends(s *Server, env map[string]string, files map[string]string) ([]foundBackend, error) {
	wd := s.Config.Config.WorkingDir
	if wd == "" {
		wd = "/"
	}
	wd = path.Clean(wd)
	byDir := map[string][]string{} // directory -> backend files (regular ELF files or links to one)
	for _, m := range []map[string]string{fsys.elves, fsys.links, fsys.hard} {
		for p := range m {
			if _, ok := ggmlload.BackendFile(path.Base(p)); ok && fsys.resolve(p) != "" {
				byDir[path.Dir(p)] = append(byDir[path.Dir(p)], p)
			}
		}
	}
	type place struct{ dir, search string }
	var search []place
	dl := false
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasPrefix(name, "libggml.so") {
			continue
		}
		d, err := readDeps(fsys.elves[files[name]])
		if err != nil {
			return nil, fmt.Errorf("reading %s in the image: %w", files[name], err)
		}
		if slices.ContainsFunc(d.needed, func(n string) bool { return strings.HasPrefix(n, "libggml-cpu") }) {
			continue // ggml links its backends; what a search finds beside it is never loaded
		}
		dl = true
		lib, err := os.ReadFile(fsys.elves[files[name]])
		if err != nil {
			return nil, err
		}
		// the server's and the working directory are searched anyway; a short name such as
		// /app could also be matched by chance
		var candidates []string
		for d := range byDir {
			if d != path.Dir(s.Path) && d != wd {
				candidates = append(candidates, d)
			}
		}
		if d := ggmlload.CompiledDir(lib, candidates); d != "" {
			s.BackendDir = d
			search = append(search, place{d, "GGML_BACKEND_DIR"})
		}
	}
	if !dl {
		return nil, nil
	}
	search = append(search, place{path.Dir(s.Path), "the server's directory"}, place{wd, "the working directory"})
	var out []foundBackend
	seenDir, seenName := map[string]bool{}, map[string]bool{}
	for _, pl := range search {
		if seenDir[pl.dir] {
			continue
		}
		seenDir[pl.dir] = true
		names := slices.Clone(byDir[pl.dir])
		sort.Strings(names)
		for _, p := range names {
			name := path.Base(p)
			if seenName[name] {
				continue
			}
			seenName[name] = true
			b, _ := ggmlload.BackendFile(name)
			out = append(out, foundBackend{Backend: Backend{Name: name, Backend: b, Variant: ggmlload.Variant(name), ImagePath: p, Search: pl.search}, resolved: fsys.resolve(p)})
		}
	}
	if p := env["GGML_BACKEND_PATH"]; p != "" {
		if !path.IsAbs(p) {
			p = path.Join(wd, p)
		}
		r := fsys.resolve(p)
		if r == "" {
			return nil, fmt.Errorf("the image's GGML_BACKEND_PATH %s is not an ELF file of the image", env["GGML_BACKEND_PATH"])
		}
		name := path.Base(p)
		for i, b := range out {
			if b.Name == name {
				if b.resolved != r {
					return nil, fmt.Errorf("the image's GGML_BACKEND_PATH %s and %s would both be %s in the bundle", p, b.ImagePath, name)
				}
				out[i].forced = true
				return out, nil
			}
		}
		b, _ := ggmlload.BackendFile(name)
		out = append(out, foundBackend{Backend: Backend{Name: name, Backend: b, Variant: ggmlload.Variant(name), ImagePath: p, Search: SearchBackendPath}, resolved: r, forced: true})
	}
	return out, nil
}

// cleanName makes a tar entry's name an absolute, clean image path; "" for one outside the root.
func cleanName(n string) string {
	p := path.Clean("/" + strings.TrimPrefix(n, "./"))
	if p == "/" {
		return ""
	}
	return p
}

func (fsys *imageFS) read(ctx context.Context, tr *tar.Reader) error {
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the image's layers: %w", err)
		}
		p := cleanName(h.Name)
		if p == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			fsys.links[p] = h.Linkname
		case tar.TypeLink:
			fsys.hard[p] = cleanName(h.Linkname)
		case tar.TypeReg:
			if p == "/etc/ld.so.conf" || path.Dir(p) == "/etc/ld.so.conf.d" {
				b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
				if err != nil {
					return fmt.Errorf("reading %s in the image: %w", p, err)
				}
				fsys.ldconf[p] = b
				continue
			}
			if h.Size < 64 {
				continue
			}
			br := bufio.NewReaderSize(tr, 64<<10)
			head, err := br.Peek(4)
			if err != nil {
				return fmt.Errorf("reading %s in the image: %w", p, err)
			}
			if !bytes.Equal(head, []byte(elf.ELFMAG)) {
				continue
			}
			n++
			dst := filepath.Join(fsys.dir, fmt.Sprintf("%06d-%s", n, path.Base(p)))
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, br)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("extracting %s from the image: %w", p, err)
			}
			fsys.elves[p] = dst
			if path.Base(p) == "llama-server" {
				fsys.servers = append(fsys.servers, p)
			}
		}
	}
}

// resolve follows symbolic links (of the path and its directories) and hard links to the path of
// an ELF file the image holds: "" when there is none.
func (fsys *imageFS) resolve(p string) string {
	p = path.Clean(p)
	for hops := 0; hops < 64; hops++ {
		if h, ok := fsys.hard[p]; ok {
			p = h
			continue
		}
		if _, ok := fsys.elves[p]; ok {
			return p
		}
		// the longest prefix that is a symbolic link
		changed := false
		for q := p; q != "/" && q != "."; q = path.Dir(q) {
			t, ok := fsys.links[q]
			if !ok {
				continue
			}
			if !strings.HasPrefix(t, "/") {
				t = path.Join(path.Dir(q), t)
			}
			p = path.Join(t, strings.TrimPrefix(p, q))
			changed = true
			break
		}
		if !changed {
			return ""
		}
	}
	return ""
}

// findServer picks llama-server: the entrypoint (or command) when it is an ELF file named
// llama-server, else the one regular file of that name.
func (fsys *imageFS) findServer(cf *v1.ConfigFile, env map[string]string) (string, error) {
	cmd := cf.Config.Entrypoint
	if len(cmd) == 0 {
		cmd = cf.Config.Cmd
	}
	if len(cmd) > 0 {
		prog := cmd[0]
		var candidates []string
		if strings.Contains(prog, "/") {
			wd := cf.Config.WorkingDir
			if wd == "" {
				wd = "/"
			}
			if !path.IsAbs(prog) {
				prog = path.Join(wd, prog)
			}
			candidates = []string{prog}
		} else {
			p := env["PATH"]
			if p == "" {
				p = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
			}
			for _, d := range strings.Split(p, ":") {
				candidates = append(candidates, path.Join("/", d, prog))
			}
		}
		for _, c := range candidates {
			if r := fsys.resolve(c); r != "" && (path.Base(r) == "llama-server" || path.Base(c) == "llama-server") {
				return r, nil
			}
		}
	}
	switch servers := slices.Sorted(slices.Values(fsys.servers)); len(servers) {
	case 0:
		return "", fmt.Errorf("no llama-server in the image (its entrypoint is %q): bundle --image takes a llama.cpp server image", strings.Join(cmd, " "))
	case 1:
		return servers[0], nil
	default:
		return "", fmt.Errorf("the image holds %d llama-server files (%s) and its entrypoint %q is none of them: which one runs is not clear", len(servers), strings.Join(servers, ", "), strings.Join(cmd, " "))
	}
}

// ldconfDirs reads the image's /etc/ld.so.conf with its includes.
func (fsys *imageFS) ldconfDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	var walk func(file string, depth int)
	walk = func(file string, depth int) {
		if depth > 8 || seen[file] {
			return
		}
		seen[file] = true
		for _, line := range strings.Split(string(fsys.ldconf[file]), "\n") {
			line = strings.TrimSpace(line)
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			switch {
			case line == "":
			case strings.HasPrefix(line, "include "):
				pat := strings.TrimSpace(strings.TrimPrefix(line, "include "))
				if !path.IsAbs(pat) {
					pat = path.Join(path.Dir(file), pat)
				}
				var matched []string
				for f := range fsys.ldconf {
					if ok, _ := path.Match(pat, f); ok {
						matched = append(matched, f)
					}
				}
				sort.Strings(matched)
				for _, f := range matched {
					walk(f, depth+1)
				}
			default:
				dirs = append(dirs, line)
			}
		}
	}
	walk("/etc/ld.so.conf", 0)
	return dirs
}

// elfDeps reads what the loader needs to find an ELF file's libraries.
type elfDeps struct {
	needed          []string
	rpath, runpath  []string
	interp          string
	dynamic, shared bool
}

func readDeps(file string) (elfDeps, error) {
	f, err := elf.Open(file)
	if err != nil {
		return elfDeps{}, err
	}
	defer f.Close()
	var d elfDeps
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return d, fmt.Errorf("not an x86-64 ELF file (%s, %s)", f.Class, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err != nil {
				return d, err
			}
			d.interp = strings.TrimRight(string(b), "\x00")
		}
		if p.Type == elf.PT_DYNAMIC {
			d.dynamic = true
		}
	}
	if !d.dynamic {
		return d, nil
	}
	if d.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return d, err
	}
	split := func(tag elf.DynTag) []string {
		v, _ := f.DynString(tag)
		var out []string
		for _, s := range v {
			out = append(out, strings.Split(s, ":")...)
		}
		return out
	}
	d.rpath, d.runpath = split(elf.DT_RPATH), split(elf.DT_RUNPATH)
	return d, nil
}

// expandOrigin makes an RPATH's or RUNPATH's entries image directories: $ORIGIN is the
// directory of the file that has it, and an empty or relative entry is relative to the process's
// working directory (wd, the image's), as glibc's loader reads it. A CMake build tree's binaries
// have such an entry (RUNPATH "/app/build/bin:"), and upstream's images find their libraries
// through it: the build directory is gone, the libraries are in /app, the working directory.
func expandOrigin(dirs []string, origin, wd string) []string {
	var out []string
	for _, d := range dirs {
		d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
		if !path.IsAbs(d) {
			d = path.Join(wd, d)
		}
		out = append(out, path.Clean(d))
	}
	return out
}

// closure finds the loader and every library the server loads, and names them for the bundle.
func (fsys *imageFS) closure(s *Server, env map[string]string) error {
	var ldLibraryPath []string
	for _, d := range strings.Split(env["LD_LIBRARY_PATH"], ":") {
		if path.IsAbs(d) {
			ldLibraryPath = append(ldLibraryPath, path.Clean(d))
		}
	}
	system := append(fsys.ldconfDirs(), defaultLibDirs...)
	wd := s.Config.Config.WorkingDir
	if wd == "" {
		wd = "/"
	}
	type item struct{ imagePath, needed string }
	files := map[string]string{}  // bundle name -> image path (resolved)
	byPath := map[string]string{} // resolved image path -> bundle name
	links := map[string]string{}  // bundle name -> sibling it links to
	var queue []item
	var missing []string
	add := func(needed, resolved string) error {
		name := path.Base(resolved)
		if prev, ok := files[name]; ok && prev != resolved {
			return fmt.Errorf("two libraries the server loads are named %s: %s and %s", name, prev, resolved)
		}
		if _, ok := byPath[resolved]; !ok {
			files[name] = resolved
			byPath[resolved] = name
			queue = append(queue, item{resolved, needed})
		}
		if needed != "" && needed != name {
			if prev, ok := links[needed]; ok && prev != byPath[resolved] {
				return fmt.Errorf("%s would name both %s and %s", needed, prev, byPath[resolved])
			}
			if _, ok := files[needed]; !ok {
				links[needed] = byPath[resolved]
			}
		}
		return nil
	}
	server := s.Path
	queue = append(queue, item{server, ""})
	byPath[server] = "llama-server"
	deps, err := readDeps(fsys.elves[server])
	if err != nil {
		return fmt.Errorf("reading %s: %w", server, err)
	}
	if deps.interp != "" {
		r := fsys.resolve(deps.interp)
		if r == "" {
			return fmt.Errorf("%s's loader %s is not in the image", server, deps.interp)
		}
		if err := add(path.Base(deps.interp), r); err != nil {
			return err
		}
		s.Loader = byPath[r]
	}
	drain := func() error {
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			d, err := readDeps(fsys.elves[it.imagePath])
			if err != nil {
				return fmt.Errorf("reading %s in the image: %w", it.imagePath, err)
			}
			origin := path.Dir(it.imagePath)
			var search []string
			if len(d.runpath) == 0 {
				search = append(search, expandOrigin(d.rpath, origin, wd)...)
			}
			search = append(search, ldLibraryPath...)
			search = append(search, expandOrigin(d.runpath, origin, wd)...)
			search = append(search, system...)
			for _, need := range d.needed {
				if hostProvided(need) {
					if !slices.Contains(s.Host, need) {
						s.Host = append(s.Host, need)
					}
					continue
				}
				found := ""
				if strings.Contains(need, "/") {
					found = fsys.resolve(need)
				}
				for _, dir := range search {
					if found != "" {
						break
					}
					found = fsys.resolve(path.Join(dir, need))
				}
				if found == "" {
					missing = append(missing, fmt.Sprintf("%s (needed by %s)", need, it.imagePath))
					continue
				}
				if err := add(need, found); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := drain(); err != nil {
		return err
	}
	bs, err := fsys.backends(s, env, files)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if err := add(b.Name, b.resolved); err != nil {
			return err
		}
		s.Backends = append(s.Backends, b.Backend)
		if b.forced {
			s.BackendPath = b.Name
		}
	}
	if err := drain(); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("the image lacks libraries its llama-server loads: %s", strings.Join(missing, "; "))
	}
	s.Files = append(s.Files, ServerFile{Name: "llama-server", Executable: true, From: fsys.elves[server], ImagePath: server})
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := files[name]
		if p == server {
			continue
		}
		s.Files = append(s.Files, ServerFile{Name: name, From: fsys.elves[p], ImagePath: p})
	}
	for _, name := range slices.Sorted(maps.Keys(links)) {
		if _, ok := files[name]; ok {
			continue // a file of the image has the name itself
		}
		s.Files = append(s.Files, ServerFile{Name: name, Link: links[name]})
	}
	sort.Strings(s.Host)
	return nil
}
