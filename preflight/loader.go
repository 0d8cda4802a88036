package preflight

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/ggmlload"
)

// BackendSearch is where ggml's loader (ggml_backend_load_all) would look for backends
// when an executable starts, and what it would find there.
type BackendSearch struct {
	// Dirs are searched in order: the executable's directory (after symlinks, as
	// /proc/self/exe gives it) and the working directory (preflight's own: the one the
	// program will run in is not known).
	Dirs []string `json:"dirs"`
	// EnvPath is GGML_BACKEND_PATH, a backend file ggml loads as well, whatever it scores.
	EnvPath string `json:"envPath,omitempty"`
	// Found are the backend files found.
	Found []string `json:"found,omitempty"`
	// DL is set when a libggml.so the executable loads is built with GGML_BACKEND_DL (it
	// does not link a CPU backend), so without a libggml-cpu*.so found there is no CPU
	// backend unless the GGML_BACKEND_DIR compiled into it has one.
	DL bool `json:"dl,omitempty"`
	// CPUFound is set when a CPU backend was found.
	CPUFound bool `json:"cpuFound,omitempty"`
}

// ggmlBackendFile reports whether a file name is one ggml's loader would dlopen.
func ggmlBackendFile(name string) (backend string, ok bool) { return ggmlload.BackendFile(name) }

// systemLibDirs are the directories the dynamic loader searches after RUNPATH: the ones
// /etc/ld.so.conf.d names, then the default ones.
func systemLibDirs() []string {
	var dirs []string
	confs, _ := filepath.Glob("/etc/ld.so.conf.d/*.conf")
	sort.Strings(confs)
	for _, c := range confs {
		f, err := os.Open(c)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "/") {
				dirs = append(dirs, line)
			}
		}
		f.Close()
	}
	return append(dirs, "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// expandOrigin replaces $ORIGIN in a RUNPATH entry with the directory of the file that has it.
func expandOrigin(entry, file string) string {
	origin := filepath.Dir(file)
	entry = strings.ReplaceAll(entry, "${ORIGIN}", origin)
	return strings.ReplaceAll(entry, "$ORIGIN", origin)
}

type loadItem struct {
	path   string
	decode bool
	search string   // GGMLSearch for files found by ggml's backend search
	rpath  []string // DT_RPATH directories inherited from the files that load this one
}

// ReadFiles reads the named ELF files and what the loader and ggml would load with them;
// every named file is decoded in full. For each DT_NEEDED library it searches as ld.so does
// (DT_RPATH of the file and the files that load it, LD_LIBRARY_PATH, DT_RUNPATH with
// $ORIGIN expanded, the system library directories): a library found through RPATH or
// RUNPATH, or named like llama.cpp's own, is read and decoded; one found only in
// LD_LIBRARY_PATH or the system directories is listed in SystemLibs and not decoded, as
// bundles leave out the C runtime; one not found is listed in NotFound. For an executable
// it also reads the backends ggml's loader would dlopen (see BackendSearch).
func ReadFiles(ctx context.Context, paths []string) ([]*Binary, error) {
	var out []*Binary
	seen := map[string]bool{}
	var queue []loadItem
	for _, p := range paths {
		queue = append(queue, loadItem{path: p, decode: true})
	}
	sysDirs := systemLibDirs()
	sysReal := map[string]bool{}
	for _, d := range sysDirs {
		sysReal[filepath.Clean(d)] = true
		if real, err := filepath.EvalSymlinks(d); err == nil {
			sysReal[real] = true
		}
	}
	var ldPath []string
	for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			ldPath = append(ldPath, d)
		}
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := it.path
		if real, err := filepath.EvalSymlinks(it.path); err == nil {
			key = real
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		if st, err := os.Stat(it.path); err == nil && st.IsDir() {
			return nil, fmt.Errorf("%s is a directory: name its ELF files, or check a bundle or artifact directory with --bundle", it.path)
		}
		b, err := readPath(it.path, it.path, it.decode)
		if err != nil {
			return nil, err
		}
		b.GGMLSearch = it.search
		b.System = !IsLlamaFile(it.path) && (underDir(it.path, sysReal) || underDir(key, sysReal))
		out = append(out, b)

		var own []string
		for _, d := range b.Runpath {
			own = append(own, expandOrigin(d, it.path))
		}
		inherited := it.rpath
		if b.RPath {
			inherited = append(append([]string(nil), own...), it.rpath...)
		}
		for _, lib := range b.Needed {
			if strings.Contains(lib, "/") {
				queue = append(queue, loadItem{path: lib, decode: IsLlamaFile(lib), rpath: inherited})
				continue
			}
			var dirs []string
			if b.RPath || len(b.Runpath) == 0 {
				// DT_RPATH, the file's and its loaders', applies only without DT_RUNPATH.
				dirs = append(append(dirs, own...), it.rpath...)
			}
			if found := findIn(lib, dirs); found != "" {
				queue = append(queue, loadItem{path: found, decode: true, rpath: inherited})
				continue
			}
			if found := findIn(lib, ldPath); found != "" {
				b.SystemLibs = appendLib(b.SystemLibs, lib, &queue, found, inherited)
				continue
			}
			if !b.RPath {
				if found := findIn(lib, own); found != "" {
					queue = append(queue, loadItem{path: found, decode: true, rpath: inherited})
					continue
				}
			}
			if found := findIn(lib, sysDirs); found != "" {
				b.SystemLibs = appendLib(b.SystemLibs, lib, &queue, found, inherited)
				continue
			}
			if _, backend := ggmlBackendFile(filepath.Base(it.path)); backend &&
				(strings.HasPrefix(lib, "libggml-base.so") || strings.HasPrefix(lib, "libggml.so")) {
				// A backend is dlopened by a process that has loaded ggml already.
				continue
			}
			b.NotFound = append(b.NotFound, lib)
		}
		if b.Executable && it.search == "" {
			bs, found := backendSearch(it.path)
			b.Backends = bs
			for _, f := range found {
				queue = append(queue, loadItem{path: f, decode: true, search: searchLabel + it.path})
			}
			if bs.EnvPath != "" {
				// Not part of the search: ggml_backend_load_all loads it besides, unscored.
				queue = append(queue, loadItem{path: bs.EnvPath, decode: true})
			}
		}
	}
	for _, b := range out {
		if b.Backends == nil || b.Backends.EnvPath == "" {
			continue
		}
		env, _ := filepath.EvalSymlinks(b.Backends.EnvPath)
		for _, x := range out {
			if real, _ := filepath.EvalSymlinks(x.Path); x.Path == b.Backends.EnvPath || (real != "" && real == env) {
				x.GGMLForced = true
			}
		}
	}
	// Whether ggml is a GGML_BACKEND_DL build is known once its libggml.so has been read.
	dl := false
	for _, b := range out {
		if strings.HasPrefix(filepath.Base(b.Path), "libggml.so") {
			linksCPU := false
			for _, n := range b.Needed {
				linksCPU = linksCPU || strings.HasPrefix(n, "libggml-cpu")
			}
			dl = dl || !linksCPU
		}
	}
	// A library already loaded under its SONAME satisfies a later file's DT_NEEDED: ggml's
	// backends need libggml-base.so, which libggml.so brought in.
	loaded := map[string]bool{}
	for _, b := range out {
		loaded[filepath.Base(b.Path)] = true
		if b.SONAME != "" {
			loaded[b.SONAME] = true
		}
	}
	for _, b := range out {
		if b.Backends != nil {
			b.Backends.DL = dl
		}
		var still []string
		for _, lib := range b.NotFound {
			if !loaded[lib] {
				still = append(still, lib)
			}
		}
		b.NotFound = still
	}
	return out, nil
}

// underDir reports whether the file p lies in one of dirs or in a directory below one:
// Debian's OpenBLAS is /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0.
func underDir(p string, dirs map[string]bool) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if dirs[d] {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// appendLib records a library taken from LD_LIBRARY_PATH or a system directory. llama.cpp's
// own libraries there are still read and decoded.
func appendLib(sys []string, lib string, queue *[]loadItem, found string, rpath []string) []string {
	if IsLlamaFile(lib) {
		*queue = append(*queue, loadItem{path: found, decode: true, rpath: rpath})
		return sys
	}
	return append(sys, lib)
}

func findIn(lib string, dirs []string) string {
	for _, d := range dirs {
		p := filepath.Join(d, lib)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// backendSearch lists the backend files ggml_backend_load_all would find for the executable
// at exe: in its real directory, then the working directory, then GGML_BACKEND_PATH.
func backendSearch(exe string) (*BackendSearch, []string) {
	bs := &BackendSearch{}
	dir := filepath.Dir(exe)
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		dir = filepath.Dir(real)
	}
	bs.Dirs = append(bs.Dirs, dir)
	if wd, err := os.Getwd(); err == nil && wd != dir {
		bs.Dirs = append(bs.Dirs, wd)
	}
	var found []string
	for _, d := range bs.Dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			backend, ok := ggmlBackendFile(e.Name())
			if !ok {
				continue
			}
			p := filepath.Join(d, e.Name())
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				continue // ggml checks is_regular_file, which follows symlinks
			}
			found = append(found, p)
			bs.CPUFound = bs.CPUFound || backend == "cpu"
		}
	}
	if env := os.Getenv("GGML_BACKEND_PATH"); env != "" {
		bs.EnvPath = env
		if st, err := os.Stat(env); err == nil && st.Mode().IsRegular() {
			if b, ok := ggmlBackendFile(filepath.Base(env)); ok && b == "cpu" {
				bs.CPUFound = true
			}
		}
	}
	bs.Found = found
	return bs, found
}
