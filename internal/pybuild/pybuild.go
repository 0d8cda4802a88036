package pybuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/llbuild/llbuild/internal/sidapt"
)

// Packages are the Debian packages extracted: pure-Python (Architecture: all), from sid,
// because bookworm has no python3-scikit-build-core and its packaging (23.0) and pathspec
// (0.11) are older than scikit-build-core 0.12 requires (>= 23.2, >= 0.12).
var Packages = []string{
	"python3-build",
	"python3-packaging",
	"python3-pathspec",
	"python3-pyproject-hooks",
	"python3-scikit-build-core",
}

// Suite is the Debian suite the packages come from.
const Suite = sidapt.Suite

const (
	sitePackage = "usr/lib/python3/dist-packages"
	readyMarker = "llbuild-ready"
)

// CacheDir is where the packages are extracted: $LLBUILD_PYBUILD_CACHE, else
// $XDG_CACHE_HOME/llbuild-test/pybuild, else ~/.cache/llbuild-test/pybuild.
func CacheDir() string {
	if d := os.Getenv("LLBUILD_PYBUILD_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "llbuild-test", "pybuild")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "llbuild-test", "pybuild")
	}
	return filepath.Join(os.TempDir(), "llbuild-test", "pybuild")
}

// Ensure returns a directory to put on PYTHONPATH that holds python-build and
// scikit-build-core, downloading and extracting the packages into dir first if needed.
// Concurrent callers are serialised by a lock file; the tree is extracted into a temporary
// directory and renamed into place, so one that exists is complete.
func Ensure(ctx context.Context, dir string) (string, error) {
	root := filepath.Join(dir, "root")
	site := filepath.Join(root, sitePackage)
	if _, err := os.Stat(filepath.Join(root, readyMarker)); err == nil {
		return site, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", dir, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(root, readyMarker)); err == nil {
		return site, nil
	}
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	debs, err := sidapt.Download(ctx, dir, Packages)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "root-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	var list strings.Builder
	for _, deb := range debs {
		if _, err := sidapt.Run(ctx, "", nil, "dpkg-deb", "-x", deb, tmp); err != nil {
			return "", err
		}
		fmt.Fprintln(&list, filepath.Base(deb))
	}
	if err := os.WriteFile(filepath.Join(tmp, "packages.txt"), []byte(list.String()), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, readyMarker), []byte("ok\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, root); err != nil {
		return "", err
	}
	os.RemoveAll(filepath.Join(dir, "apt"))
	return site, nil
}

// Need returns the PYTHONPATH directory for a test, or skips the test with the reason (fails
// it under CI=true) when the packages cannot be had: dpkg-deb or apt-get missing, or no
// network to Debian.
func Need(t testing.TB) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			fail("%s not found: the wheel tests extract python-build and scikit-build-core from Debian packages", tool)
		}
	}
	site, err := Ensure(context.Background(), CacheDir())
	if err != nil {
		fail("getting python-build and scikit-build-core from Debian %s: %v", Suite, err)
	}
	return site
}

// Python returns the version ("3.11") of Debian's python3, which the packages are for, or
// skips the test (fails it under CI=true) when there is none.
func Python(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("/usr/bin/python3 is required in CI (apt-get install python3): %v", err)
		}
		t.Skipf("no /usr/bin/python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}
