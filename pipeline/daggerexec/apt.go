package daggerexec

import (
	"context"
	"fmt"
	"strings"

	"dagger.io/dagger"

	"github.com/llbuild/llbuild/pipeline"
)

// Paths of the apt step inside the build container.
const (
	aptCache = "/var/cache/apt"
	aptLists = "/var/lib/apt/lists"
	// aptConf holds the step's own apt sources (sources.list, and an empty sources.list.d so
	// that the image's are not read), the bootstrap packages, the snapshot id and distribution.
	aptConf = "/etc/llbuild-apt"
)

// The apt script's modes ($1).
const (
	// aptInstall installs the arguments (name=version) from the plan's sources, unless the
	// image has every one at that version.
	aptInstall = "install"
	// aptAnyVersion installs the arguments (names) from the image's own sources, unless the
	// image has every one at any version: a substituted devel image.
	aptAnyVersion = "any"
	// aptCheck prints, for each argument, whether the plan's snapshot has that version.
	aptCheck = "check"
)

// aptScript is the apt step. In the install and check modes apt reads only the plan's sources
// (aptConf/sources.list), never the image's sources.list.d: third-party repositories in the
// image (NVIDIA's, Intel's) are not read live and cannot break the update. When a source is
// https and the image lacks a bootstrap package (ubuntu:24.04 has no ca-certificates), those
// are installed first without TLS peer verification; apt verifies every file against the
// archive's signed Release either way. (Whether the package is installed is the test, not
// whether a CA bundle exists: an engine with custom CAs writes a bundle into every container.) An archive it cannot read or verify stops
// the step (exit 3), and so does a pinned version the snapshot lacks (exit 4), each with what
// to do. The check mode prints one line per argument on stdout:
// "llbuild-pin<TAB>name<TAB>version<TAB>ok|missing<TAB>versions the snapshot has".
const aptScript = `set -eu
mode=$1; shift
conf=` + aptConf + `
installed() {
  local want=$1 have
  have=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "${want%%=*}" 2>/dev/null) || have=
  case "$want" in *=*) [ "$have" = "installed ${want#*=}" ] ;; *) [ "${have%% *}" = installed ] ;; esac
}
if [ "$mode" != check ]; then
  missing=
  for want in "$@"; do installed "$want" || missing="$missing $want"; done
  if [ -z "$missing" ]; then
    echo "llbuild: the devel image has every apt package the plan installs: apt-get is not run" >&2
    exit 0
  fi
  echo "llbuild: installing$missing" >&2
fi
rm -f /etc/apt/apt.conf.d/docker-clean
echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-cache
if [ "$mode" = any ]; then
  apt-get update -q
  exec apt-get install -y -q --no-install-recommends "$@"
fi
snapshot=$(cat $conf/snapshot)
mkdir -p $conf/sources.list.d
opts=(-q -o Dir::Etc::SourceList=$conf/sources.list -o Dir::Etc::SourceParts=$conf/sources.list.d -o Acquire::Check-Valid-Until=false -o Acquire::Retries=2)
update() {
  local out rc=0
  out=$(apt-get "${opts[@]}" "$@" update 2>&1) || rc=$?
  printf '%s\n' "$out" >&2
  if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -qE '^(Err:|[WE]: (Failed to fetch|Some index files failed|GPG error))'; then
    echo "llbuild: apt could not read or verify the archive snapshot $snapshot that the plan installs from:" >&2
    printf '%s\n' "$out" | grep -E '^(Err:|[WE]:)' | head -n 6 | sed 's/^/  /' >&2
    echo "llbuild: check that the engine's containers reach $(grep -oE 'https?://[^ ]+' $conf/sources.list | head -n 1) (network, DNS, or a proxy in the engine's HTTP_PROXY/HTTPS_PROXY), or build on a devel image that already has every package the plan installs (--base devel=...; llbuild plan --json lists them)" >&2
    exit 3
  fi
}
check() {
  local bad=0 want name ver has st
  for want in "$@"; do
    name=${want%%=*} ver=
    [ "$name" = "$want" ] || ver=${want#*=}
    has=$(apt-cache "${opts[@]}" madison "$name" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -u | paste -sd' ' -) || has=
    st=ok
    if [ -z "$has" ] || { [ -n "$ver" ] && ! printf '%s\n' $has | grep -qxF -- "$ver"; }; then st=missing bad=1; fi
    printf 'llbuild-pin\t%s\t%s\t%s\t%s\n' "$name" "$ver" "$st" "$has"
  done
  return $bad
}
require() {
  local out
  if ! out=$(check "$@"); then
    echo "llbuild: the archive snapshot $snapshot lacks versions the plan pins:" >&2
    printf '%s\n' "$out" | awk -F'\t' '$4 == "missing" { printf "  %s %s: not there (the snapshot has %s)\n", $2, $3, ($5 == "" ? "no version of it" : $5) }' >&2
    echo "llbuild: pin versions the snapshot has in recipes/apt/$(cat $conf/distro).yaml; llbuild plan --check-pins checks every pin of a target at once" >&2
    exit 4
  fi
}
boot=$(cat $conf/bootstrap) noboot=
for want in $boot; do installed "${want%%=*}" || noboot="$noboot $want"; done
noverify=()
if grep -qE '^deb( \[[^]]*\])? https://' $conf/sources.list && [ -n "$noboot" ]; then
  noverify=(-o Acquire::https::Verify-Peer=false -o Acquire::https::Verify-Host=false)
fi
if [ "$mode" = check ]; then
  update "${noverify[@]}"
  check $boot "$@" || true
  exit 0
fi
if [ ${#noverify[@]} -gt 0 ]; then
  echo "llbuild: the image lacks$noboot, so apt cannot check the snapshot's TLS certificate: installing$noboot first without TLS peer verification (apt still checks every file against the archive's signed Release)" >&2
  update "${noverify[@]}"
  require $noboot
  apt-get "${opts[@]}" "${noverify[@]}" install -y --no-install-recommends $noboot
fi
update
require "$@"
apt-get "${opts[@]}" install -y --no-install-recommends "$@"`

// aptPackages installs the plan's apt packages at their pinned versions from the pinned
// archive snapshot, unless the image already has them. A substituted devel image (--base
// devel=... of another digest) is only required to have them, at any version: the plan's
// pins are for its own image's distribution, and provenance marks the apt material as
// unverified then.
func aptPackages(_ context.Context, s *state) error {
	a := s.plan.Apt
	if a == nil || len(a.Packages) == 0 {
		return nil
	}
	mode, pkgs := aptInstall, a.InstallArgs()
	if s.develSubstituted() || len(a.Sources) == 0 {
		// The pins name the plan's distribution's versions and snapshot: a missing package
		// is installed from the substituted image's own archive, by name. So is every package
		// of a plan without pins (--allow-floating, no apt pins for the image's distribution).
		mode, pkgs = aptAnyVersion, nil
		for _, p := range a.Packages {
			pkgs = append(pkgs, p.Name)
		}
	}
	s.ctr = withApt(s.dag, s.ctr, s.aptCacheKey(), a, mode, pkgs)
	return nil
}

// aptCacheKey names the apt caches of the devel image the build runs in: one per image,
// locked, as apt does not share its cache between processes.
func (s *state) aptCacheKey() string {
	digest := s.plan.Images.Devel.Digest
	if s.develRef != "" {
		digest = s.develDigest
	}
	key := "llbuild-apt-" + strings.TrimPrefix(digest, "sha256:")
	if len(key) > len("llbuild-apt-")+16 {
		key = key[:len("llbuild-apt-")+16]
	}
	return key
}

// withApt runs the apt script in ctr in mode on pkgs, with the plan's sources, bootstrap
// packages and snapshot in aptConf.
func withApt(dag *dagger.Client, ctr *dagger.Container, key string, a *pipeline.Apt, mode string, pkgs []string) *dagger.Container {
	if mode != aptAnyVersion {
		ctr = ctr.
			WithNewFile(aptConf+"/sources.list", strings.Join(a.Sources, "\n")+"\n").
			WithNewFile(aptConf+"/bootstrap", strings.Join(a.BootstrapArgs(), "\n")+"\n").
			WithNewFile(aptConf+"/snapshot", a.Snapshot+"\n").
			WithNewFile(aptConf+"/distro", a.Distro+"\n")
	}
	locked := dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}
	return ctr.
		WithMountedCache(aptCache, dag.CacheVolume(key+"-cache"), locked).
		WithMountedCache(aptLists, dag.CacheVolume(key+"-lists"), locked).
		WithExec(append([]string{"bash", "-c", aptScript, "llbuild-apt", mode}, pkgs...))
}

// PinCheck is what apt says of one pinned package at the plan's snapshot.
type PinCheck struct {
	Name, Version string
	// OK is true when the snapshot has Version (any version, for an unpinned package).
	OK bool
	// Available are the versions the snapshot's sources have, sorted as apt-cache printed them.
	Available []string
}

// ParsePinChecks reads the apt script's check-mode output.
func ParsePinChecks(out string) ([]PinCheck, error) {
	var checks []PinCheck
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "llbuild-pin\t") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 || (f[3] != "ok" && f[3] != "missing") {
			return nil, fmt.Errorf("apt check: cannot read %q", line)
		}
		checks = append(checks, PinCheck{Name: f[1], Version: f[2], OK: f[3] == "ok", Available: strings.Fields(f[4])})
	}
	return checks, nil
}

// CheckAptPins asks apt, in the plan's devel image (or the one Options.Devel names), whether
// the plan's snapshot has every version it pins: the bootstrap packages and the packages.
// It needs the engine to reach the snapshot's archive.
func (e *Executor) CheckAptPins(ctx context.Context, p *pipeline.Plan) ([]PinCheck, error) {
	a := p.Apt
	if a == nil || len(a.Packages) == 0 {
		return nil, nil
	}
	if len(a.Sources) == 0 {
		return nil, fmt.Errorf("target %s: the plan names no apt sources, so there is nothing to check against", p.Target)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return nil, err
	}
	s := &state{plan: p, opts: e.opts, dag: c, patchExecs: map[string]string{}}
	if err := develImage(ctx, s); err != nil {
		return nil, fmt.Errorf("target %s: %w", p.Target, err)
	}
	out, err := withApt(c, s.ctr, s.aptCacheKey(), a, aptCheck, a.InstallArgs()).Stdout(ctx)
	if err != nil {
		return nil, fmt.Errorf("target %s: checking apt pins in %s: %w", p.Target, s.develName(), s.engineError(err))
	}
	checks, err := ParsePinChecks(out)
	if err == nil && len(checks) != len(a.Bootstrap)+len(a.Packages) {
		err = fmt.Errorf("apt check printed %d results for %d pins", len(checks), len(a.Bootstrap)+len(a.Packages))
	}
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", p.Target, err)
	}
	return checks, nil
}
