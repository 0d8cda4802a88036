package pybuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
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
const Suite = "sid"

const (
	mirror      = "http://deb.debian.org/debian"
	keyring     = "/usr/share/keyrings/debian-archive-keyring.gpg"
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
	debs, err := download(ctx, dir)
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
		if _, err := run(ctx, "", nil, "dpkg-deb", "-x", deb, tmp); err != nil {
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

// download fetches the packages with apt-get under a private configuration for sid, leaving
// the host's apt state alone.
func download(ctx context.Context, dir string) ([]string, error) {
	apt := filepath.Join(dir, "apt")
	for _, d := range []string{"lists/partial", "cache/archives/partial", "etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d", "debs"} {
		if err := os.MkdirAll(filepath.Join(apt, d), 0o755); err != nil {
			return nil, err
		}
	}
	sources := fmt.Sprintf("deb [signed-by=%s] %s %s main\n", keyring, mirror, Suite)
	if err := os.WriteFile(filepath.Join(apt, "etc/sources.list"), []byte(sources), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(apt, "status"), nil, 0o644); err != nil {
		return nil, err
	}
	opts := []string{
		"Dir::State::Lists=" + filepath.Join(apt, "lists"),
		"Dir::State::status=" + filepath.Join(apt, "status"),
		"Dir::Cache=" + filepath.Join(apt, "cache"),
		"Dir::Etc::SourceList=" + filepath.Join(apt, "etc/sources.list"),
		"Dir::Etc::SourceParts=" + filepath.Join(apt, "etc/sources.list.d"),
		"Dir::Etc::Parts=" + filepath.Join(apt, "etc/apt.conf.d"),
		"Dir::Etc::Preferences=" + filepath.Join(apt, "etc/preferences"),
		"Dir::Etc::PreferencesParts=" + filepath.Join(apt, "etc/preferences.d"),
		"APT::Architecture=amd64",
		"APT::Architectures=amd64",
		"Acquire::Languages=none",
		"Acquire::Check-Valid-Until=false",
	}
	if os.Geteuid() == 0 {
		opts = append(opts, "APT::Sandbox::User=root")
	}
	var args []string
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	env := append(os.Environ(), "APT_CONFIG=/dev/null", "LC_ALL=C")
	if _, err := run(ctx, "", env, "apt-get", append(args, "-q", "update")...); err != nil {
		return nil, err
	}
	debDir := filepath.Join(apt, "debs")
	if _, err := run(ctx, debDir, env, "apt-get", append(append(args, "-q", "download"), Packages...)...); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(debDir, "*.deb"))
	if len(debs) != len(Packages) {
		return nil, fmt.Errorf("apt-get download gave %d packages in %s, want %d", len(debs), debDir, len(Packages))
	}
	sort.Strings(debs)
	return debs, nil
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(b.String())
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return nil, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return b.Bytes(), nil
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
