// Package sidapt downloads Debian sid packages with apt-get under a private configuration, for
// test fixtures that need newer programs than the host's Debian has, leaving the host's apt
// state alone.
package sidapt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Suite is the Debian suite packages come from.
const Suite = "sid"

const (
	mirror  = "http://deb.debian.org/debian"
	keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
)

// Download fetches packages from sid into dir/apt/debs, with apt's lists, cache and
// configuration under dir/apt, and returns the .deb paths, sorted.
func Download(ctx context.Context, dir string, packages []string) ([]string, error) {
	aptDir := filepath.Join(dir, "apt")
	for _, d := range []string{"lists/partial", "cache/archives/partial", "etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d", "debs"} {
		if err := os.MkdirAll(filepath.Join(aptDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating apt directory: %w", err)
		}
	}
	sources := fmt.Sprintf("deb [signed-by=%s] %s %s main\n", keyring, mirror, Suite)
	if err := os.WriteFile(filepath.Join(aptDir, "etc/sources.list"), []byte(sources), 0o644); err != nil {
		return nil, fmt.Errorf("writing sources.list: %w", err)
	}
	if err := os.WriteFile(filepath.Join(aptDir, "status"), nil, 0o644); err != nil {
		return nil, fmt.Errorf("writing empty dpkg status: %w", err)
	}
	opts := []string{
		"Dir::State::Lists=" + filepath.Join(aptDir, "lists"),
		"Dir::State::status=" + filepath.Join(aptDir, "status"),
		"Dir::Cache=" + filepath.Join(aptDir, "cache"),
		"Dir::Etc::SourceList=" + filepath.Join(aptDir, "etc/sources.list"),
		"Dir::Etc::SourceParts=" + filepath.Join(aptDir, "etc/sources.list.d"),
		"Dir::Etc::Parts=" + filepath.Join(aptDir, "etc/apt.conf.d"),
		"Dir::Etc::Preferences=" + filepath.Join(aptDir, "etc/preferences"),
		"Dir::Etc::PreferencesParts=" + filepath.Join(aptDir, "etc/preferences.d"),
		"APT::Architecture=amd64",
		"APT::Architectures=amd64",
		"Acquire::Languages=none",
		// Mirrors and snapshots of sid may serve a Release file past its
		// Valid-Until; the signature is still checked.
		"Acquire::Check-Valid-Until=false",
	}
	if os.Geteuid() == 0 {
		// apt drops to _apt for downloads, which cannot write to our cache.
		opts = append(opts, "APT::Sandbox::User=root")
	}
	var args []string
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	// APT_CONFIG=/dev/null keeps the host's apt.conf out of it.
	env := append(os.Environ(), "APT_CONFIG=/dev/null", "LC_ALL=C")
	if _, err := Run(ctx, "", env, "apt-get", append(args, "-q", "update")...); err != nil {
		return nil, err
	}
	debDir := filepath.Join(aptDir, "debs")
	old, _ := filepath.Glob(filepath.Join(debDir, "*.deb"))
	for _, f := range old {
		os.Remove(f)
	}
	if _, err := Run(ctx, debDir, env, "apt-get", append(append(args, "-q", "download"), packages...)...); err != nil {
		return nil, err
	}
	debs, err := filepath.Glob(filepath.Join(debDir, "*.deb"))
	if err != nil || len(debs) != len(packages) {
		return nil, fmt.Errorf("apt-get download gave %d packages in %s, want %d", len(debs), debDir, len(packages))
	}
	sort.Strings(debs)
	return debs, nil
}

// Run runs a command in dir with env and returns its combined output; a failure carries the
// command line and the tail of the output.
func Run(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.Bytes(), fmt.Errorf("running %s %s: %w\n%s", name, strings.Join(withoutOptions(args), " "), err, Tail(b.Bytes()))
	}
	return b.Bytes(), nil
}

// withoutOptions drops apt's long -o list from error messages.
func withoutOptions(args []string) []string {
	var keep []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-o" {
			i++
			continue
		}
		keep = append(keep, args[i])
	}
	return keep
}

// Tail returns the last 2000 bytes of b.
func Tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
