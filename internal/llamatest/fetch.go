package llamatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/llbuild/llbuild/internal/sidapt"
)

// Packages are the sid packages extracted into the sysroot: llama-server, the
// libraries it links against and everything those need at run time, so that
// nothing resolves to the host's (older) libraries.
var Packages = []string{
	"llama.cpp-tools",
	"libllama0",
	"libggml0",
	"libc6",
	"libstdc++6",
	"libgcc-s1",
	"libgomp1",
	"libssl3t64",
	"libzstd1",
	"zlib1g",
}

// Suite is the Debian suite the packages come from.
const Suite = sidapt.Suite

const (
	// libDir is the multiarch library directory inside the sysroot.
	libDir = "usr/lib/x86_64-linux-gnu"
	// backendDir is where Debian's libggml0 puts the CPU backend variants
	// (libggml-cpu-<variant>.so) that ggml dlopens at start.
	backendDir = libDir + "/ggml/backends0"
	// loaderName is the dynamic loader's file name.
	loaderName = "ld-linux-x86-64.so.2"
	// wrapperName is the executable script that behaves like llama-server.
	wrapperName = "llama-server"
	// readyMarker exists only in a completely extracted sysroot.
	readyMarker = "llbuild-ready"
)

// Binary is an extracted llama-server ready to run on this host.
type Binary struct {
	// Path is an executable script that runs llama-server with any
	// arguments it is given, like an installed llama-server binary.
	Path string
	// Root is the extracted sysroot.
	Root string
	// Argv is the command the script executes, without llama-server's own
	// arguments: sid's loader, its library path and the real binary.
	Argv []string
	// Version is the first line of `llama-server --version`.
	Version string
	// Packages maps each extracted package to its Debian version.
	Packages map[string]string
}

// CacheDir returns the directory the sysroot is cached in:
// $LLBUILD_LLAMA_CACHE, else $XDG_CACHE_HOME/llbuild-test/llama-server,
// else ~/.cache/llbuild-test/llama-server.
func CacheDir() string {
	if d := os.Getenv("LLBUILD_LLAMA_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "llbuild-test", "llama-server")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "llbuild-test", "llama-server")
	}
	return filepath.Join(os.TempDir(), "llbuild-test", "llama-server")
}

// Ensure returns the llama-server cached in dir, downloading and extracting
// the sid packages first if they are not there yet. Concurrent callers, in
// this process or others, are serialised by a lock file; the sysroot is
// extracted into a temporary directory and renamed into place, so a sysroot
// that exists is complete.
func Ensure(ctx context.Context, dir string) (Binary, error) {
	root := filepath.Join(dir, "root")
	if b, err := load(ctx, root); err == nil {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, fmt.Errorf("creating cache %s: %w", dir, err)
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		return Binary{}, err
	}
	defer unlock()
	if b, err := load(ctx, root); err == nil {
		return b, nil
	}
	// A sysroot without the marker is left over from an interrupted run.
	if err := os.RemoveAll(root); err != nil {
		return Binary{}, fmt.Errorf("removing incomplete %s: %w", root, err)
	}
	debs, err := sidapt.Download(ctx, dir, Packages)
	if err != nil {
		return Binary{}, err
	}
	tmp, err := os.MkdirTemp(dir, "root-*")
	if err != nil {
		return Binary{}, fmt.Errorf("creating temporary sysroot: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := extract(ctx, debs, tmp, root); err != nil {
		return Binary{}, err
	}
	if err := os.Rename(tmp, root); err != nil {
		return Binary{}, fmt.Errorf("moving sysroot into place: %w", err)
	}
	// The package lists and .debs are no longer needed; packages.txt in
	// the sysroot records what was extracted.
	os.RemoveAll(filepath.Join(dir, "apt"))
	return load(ctx, root)
}

func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// extract unpacks debs into tmp, which will be renamed to root, and adds
// the loader copy and the wrapper script.
func extract(ctx context.Context, debs []string, tmp, root string) error {
	var versions strings.Builder
	for _, deb := range debs {
		if _, err := sidapt.Run(ctx, "", nil, "dpkg-deb", "-x", deb, tmp); err != nil {
			return err
		}
		out, err := sidapt.Run(ctx, "", nil, "dpkg-deb", "-f", deb, "Package", "Version")
		if err != nil {
			return err
		}
		var name, version string
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "Package: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "Version: "); ok {
				version = v
			}
		}
		fmt.Fprintf(&versions, "%s %s\n", name, version)
	}
	if err := os.WriteFile(filepath.Join(tmp, "packages.txt"), []byte(versions.String()), 0o644); err != nil {
		return fmt.Errorf("writing package list: %w", err)
	}
	// ggml looks for its CPU backends beside the running executable, which
	// for a binary started through the loader is the loader itself. A copy
	// of the loader inside the backends directory makes ggml find them
	// without depending on the working directory. (A symlink would not do:
	// /proc/self/exe resolves it.)
	loader, err := os.ReadFile(filepath.Join(tmp, libDir, loaderName))
	if err != nil {
		return fmt.Errorf("reading sid's loader: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, backendDir, loaderName), loader, 0o755); err != nil {
		return fmt.Errorf("placing loader beside the ggml backends: %w", err)
	}
	argv := command(root)
	var script strings.Builder
	script.WriteString("#!/bin/sh\n# Runs Debian sid's llama-server through sid's loader and libraries.\nexec")
	for _, a := range argv {
		script.WriteString(" " + shellQuote(a))
	}
	script.WriteString(" \"$@\"\n")
	if err := os.WriteFile(filepath.Join(tmp, wrapperName), []byte(script.String()), 0o755); err != nil {
		return fmt.Errorf("writing wrapper script: %w", err)
	}
	if err := checkClosure(ctx, tmp); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tmp, readyMarker), []byte("ok\n"), 0o644)
}

// command is the argv that runs llama-server in the sysroot at root.
func command(root string) []string {
	lib := filepath.Join(root, libDir)
	return []string{
		filepath.Join(root, backendDir, loaderName),
		"--library-path", lib + ":" + filepath.Join(lib, "llama"),
		"--argv0", "llama-server",
		filepath.Join(root, "usr/bin/llama-server"),
	}
}

// checkClosure fails when llama-server or a CPU backend would load any
// library from outside the sysroot.
func checkClosure(ctx context.Context, root string) error {
	lib := filepath.Join(root, libDir)
	backends, _ := filepath.Glob(filepath.Join(root, backendDir, "libggml-cpu-*.so"))
	if len(backends) == 0 {
		return fmt.Errorf("no ggml CPU backends in %s", filepath.Join(root, backendDir))
	}
	var errs []error
	for _, f := range append([]string{filepath.Join(root, "usr/bin/llama-server")}, backends[0]) {
		out, err := sidapt.Run(ctx, "", nil, filepath.Join(lib, loaderName), "--library-path", lib+":"+filepath.Join(lib, "llama"), "--list", f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			line = strings.TrimSpace(line)
			name, target, ok := strings.Cut(line, " => ")
			if !ok || strings.HasPrefix(target, root) || strings.Contains(name, loaderName) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %s resolves outside the sysroot (%s); add its package to llamatest.Packages", filepath.Base(f), name, target))
		}
	}
	return errors.Join(errs...)
}

// load returns the Binary in a complete sysroot.
func load(ctx context.Context, root string) (Binary, error) {
	if _, err := os.Stat(filepath.Join(root, readyMarker)); err != nil {
		return Binary{}, err
	}
	b := Binary{
		Path:     filepath.Join(root, wrapperName),
		Root:     root,
		Argv:     command(root),
		Packages: map[string]string{},
	}
	list, err := os.ReadFile(filepath.Join(root, "packages.txt"))
	if err != nil {
		return Binary{}, fmt.Errorf("reading package list: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		if name, version, ok := strings.Cut(line, " "); ok {
			b.Packages[name] = version
		}
	}
	out, err := sidapt.Run(ctx, "", nil, b.Path, "--version")
	if err != nil {
		return Binary{}, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "version:") {
			b.Version = strings.TrimSpace(line)
		}
	}
	if b.Version == "" {
		return Binary{}, fmt.Errorf("llama-server --version printed no version line: %q", sidapt.Tail(out))
	}
	return b, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
