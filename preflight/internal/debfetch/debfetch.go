package debfetch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var mu sync.Mutex

// CacheDir returns the directory test downloads are cached in (~/.cache/llbuild-test, or
// $LLBUILD_TEST_CACHE).
func CacheDir() (string, error) {
	if d := os.Getenv("LLBUILD_TEST_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w", err)
	}
	return filepath.Join(d, "llbuild-test"), nil
}

// Extracted downloads the named Debian unstable (sid) package for amd64 with apt-get
// through a private apt configuration (the system's sources are untouched), unpacks it with
// dpkg-deb and returns the directory it was unpacked into. A previous download is reused.
func Extracted(pkg string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, "apt-sid")
	out := filepath.Join(root, "extracted", pkg)
	if _, err := os.Stat(filepath.Join(out, ".done")); err == nil {
		return out, nil
	}
	for _, d := range []string{"lists/partial", "archives/partial", "cache", "etc", "debs", "extracted"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	src := "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "sources.list"), []byte(src), 0o644); err != nil {
		return "", err
	}
	opts := []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(root, "etc", "sources.list"),
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(root, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(root, "cache"),
		"-o", "Dir::Cache::Archives=" + filepath.Join(root, "archives"),
		"-o", "Dir::State::Status=/dev/null",
		"-o", "APT::Architecture=amd64",
		"-o", "APT::Sandbox::User=root",
		"-q",
	}
	debs := filepath.Join(root, "debs", pkg)
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return "", err
	}
	if matches, _ := filepath.Glob(filepath.Join(debs, "*.deb")); len(matches) == 0 {
		if _, err := os.Stat(filepath.Join(root, "lists", "deb.debian.org_debian_dists_sid_InRelease")); err != nil {
			if err := run("", "apt-get", append(opts, "update")...); err != nil {
				return "", err
			}
		}
		if err := run(debs, "apt-get", append(opts, "download", pkg)...); err != nil {
			return "", err
		}
	}
	matches, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	if len(matches) != 1 {
		return "", fmt.Errorf("downloading %s: found %d .deb files in %s, want 1", pkg, len(matches), debs)
	}
	tmp := out + ".tmp"
	os.RemoveAll(tmp)
	if err := run("", "dpkg-deb", "-x", matches[0], tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".done"), []byte(filepath.Base(matches[0])+"\n"), 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(out)
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		tail := buf.Bytes()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("running %s %v: %w\n%s", name, args[len(args)-2:], err, tail)
	}
	return nil
}

// Need returns the unpacked package, or ends the test: Fatal when CI=true, Skip otherwise.
func Need(t testing.TB, pkg string) string {
	t.Helper()
	dir, err := Extracted(pkg)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test data package %s: %v", pkg, err)
		}
		t.Skipf("test data package %s unavailable: %v", pkg, err)
	}
	return dir
}

// GGMLBackends returns the directory of Debian's libggml0 that holds libggml-cpu-*.so.
func GGMLBackends(t testing.TB) string {
	t.Helper()
	dir := Need(t, "libggml0")
	matches, _ := filepath.Glob(filepath.Join(dir, "usr/lib/*/ggml/backends0"))
	if len(matches) != 1 {
		t.Fatalf("libggml0 has %d backends0 directories, want 1", len(matches))
	}
	return matches[0]
}
