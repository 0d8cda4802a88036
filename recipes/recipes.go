package recipes

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/gitref"
	"github.com/llbuild/llbuild/internal/strictyaml"
)

// SchemaVersion is the recipe format this llbuild reads.
const SchemaVersion = 1

//go:embed *.yaml apt/*.yaml
var builtin embed.FS

// Recipe is what to build: a pinned source, how to configure it, what to build and which
// files are its outputs.
type Recipe struct {
	SchemaVersion int    `yaml:"schemaVersion" json:"schemaVersion"`
	Name          string `yaml:"name" json:"name"`
	Description   string `yaml:"description,omitempty" json:"description,omitempty"`
	Source        Source `yaml:"source" json:"source"`
	// Patches says whether the patch series (patches/series) is applied to the source.
	Patches bool `yaml:"patches" json:"patches"`
	// Apt names the packages the build installs into the devel image; their versions and
	// the archive snapshot come from the AptPins of the devel image's distribution.
	Apt          []string `yaml:"apt,omitempty" json:"apt,omitempty"`
	CMake        []string `yaml:"cmake" json:"cmake"`
	BuildTargets []string `yaml:"buildTargets" json:"buildTargets"`
	Outputs      []Output `yaml:"outputs" json:"outputs"`

	source string
}

// Source is a git repository at a full commit.
type Source struct {
	URL    string `yaml:"url" json:"url"`
	Commit string `yaml:"commit" json:"commit"`
	// Epoch is the commit's committer time in Unix seconds: the build's SOURCE_DATE_EPOCH.
	Epoch int64 `yaml:"epoch,omitempty" json:"epoch,omitempty"`
	// BuildNumber is llama.cpp's upstream build number at Commit (git rev-list --count), which
	// names its releases (b10106) and which a build from a tree without history cannot compute.
	BuildNumber int `yaml:"buildNumber,omitempty" json:"buildNumber,omitempty"`
	// Vendor names another recipe whose source and patches replace this one's vendored llama.cpp.
	Vendor string `yaml:"vendor,omitempty" json:"vendor,omitempty"`
	// Ref is the name Commit was resolved from (llbuild build --ref), recorded in the plan.
	Ref string `yaml:"ref,omitempty" json:"ref,omitempty"`
}

// Output is a set of files a build produces, relative to the build directory.
type Output struct {
	Glob string `yaml:"glob" json:"glob"`
	Kind string `yaml:"kind" json:"kind"`
}

// Output kinds.
const (
	KindExecutable = "executable"
	KindLibrary    = "library"
	KindWheel      = "wheel"
)

// Names returns the built-in recipe names, sorted.
func Names() []string {
	return yamlNames(".")
}

func yamlNames(dir string) []string {
	entries, _ := builtin.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Load returns the built-in recipe called name, or, when name ends in .yaml, the recipe in that
// file (one recorded by recipe bump --new-series, say).
func Load(name string) (*Recipe, error) {
	if strings.HasSuffix(name, ".yaml") {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading recipe file: %w", err)
		}
		return Parse(name, data)
	}
	data, err := builtin.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("unknown recipe %q; known recipes: %s", name, strings.Join(Names(), ", "))
	}
	return Parse("builtin:"+name+".yaml", data)
}

// Parse decodes and validates a recipe file's contents.
func Parse(source string, data []byte) (*Recipe, error) {
	var r Recipe
	decodeErr := strictyaml.Decode(source, "recipe", data, &r)
	if decodeErr != nil && !strictyaml.Partial(decodeErr) {
		return nil, decodeErr
	}
	r.source = source
	if err := r.Validate(); err != nil || decodeErr != nil {
		return nil, errors.Join(decodeErr, err)
	}
	return &r, nil
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ValidateCommit checks that c is a full 40-hex commit id.
func ValidateCommit(c string) error {
	if fullCommit.MatchString(c) {
		return nil
	}
	if regexp.MustCompile(`^[0-9a-fA-F]{4,39}$`).MatchString(c) {
		return fmt.Errorf("%q is a short commit id; pin the full 40-hex id (git rev-parse %s)", c, c)
	}
	return fmt.Errorf("%q is not a 40-hex lower-case commit id", c)
}

// Validate reports every problem in the recipe together.
func (r *Recipe) Validate() error {
	var errs []error
	bad := func(field, problem string) { errs = append(errs, fmt.Errorf("%s: %s: %s", r.source, field, problem)) }
	if r.SchemaVersion != SchemaVersion {
		bad("schemaVersion", fmt.Sprintf("is %d, this llbuild reads %d", r.SchemaVersion, SchemaVersion))
	}
	if r.Name == "" {
		bad("name", "is empty")
	}
	// https for upstream and its forges; file:// for a mirror on this machine (an absolute path)
	if !strings.HasPrefix(r.Source.URL, "https://") && !strings.HasPrefix(r.Source.URL, "file:///") {
		bad("source.url", fmt.Sprintf("%q is not an https git URL (or file:///PATH of a local mirror)", r.Source.URL))
	}
	if err := ValidateCommit(r.Source.Commit); err != nil {
		bad("source.commit", err.Error())
	}
	if r.Source.BuildNumber < 0 {
		bad("source.buildNumber", "is negative")
	}
	if r.Source.Epoch < 0 {
		bad("source.epoch", "is negative")
	}
	if r.Source.Epoch == 0 && r.Source.Vendor == "" {
		bad("source.epoch", "is missing: give the commit's committer time (git log -1 --format=%ct <commit>)")
	}
	if len(r.BuildTargets) == 0 {
		bad("buildTargets", "is empty: name the build targets (e.g. llama-server)")
	}
	for i, a := range r.CMake {
		if !strings.HasPrefix(a, "-D") {
			bad(fmt.Sprintf("cmake[%d]", i), fmt.Sprintf("%q is not a -D definition", a))
		}
	}
	for i, n := range r.Apt {
		if !aptName.MatchString(n) {
			bad(fmt.Sprintf("apt[%d]", i), fmt.Sprintf("%q is not a Debian package name (versions are pinned in apt/<distro>.yaml, not here)", n))
		}
	}
	if len(r.Outputs) == 0 {
		bad("outputs", "is empty")
	}
	for i, o := range r.Outputs {
		switch o.Kind {
		case KindExecutable, KindLibrary, KindWheel:
		default:
			bad(fmt.Sprintf("outputs[%d].kind", i), fmt.Sprintf("%q is not one of executable, library, wheel", o.Kind))
		}
		if o.Glob == "" || strings.HasPrefix(o.Glob, "/") || strings.Contains(o.Glob, "..") {
			bad(fmt.Sprintf("outputs[%d].glob", i), fmt.Sprintf("%q must be a relative path inside the build directory", o.Glob))
		}
	}
	return errors.Join(errs...)
}

// AptPinsSchemaVersion is the apt pins format this llbuild reads.
const AptPinsSchemaVersion = 1

// AptPins pin what apt installs in devel images of one distribution: the archive snapshot apt
// reads and a version for each package. They are shared by every recipe, as one snapshot is
// one consistent state of the archive; the built-in ones are apt/<distro>.yaml.
type AptPins struct {
	SchemaVersion int    `yaml:"schemaVersion" json:"schemaVersion"`
	Distro        string `yaml:"distro" json:"distro"`
	// Snapshot is an archive snapshot id, YYYYMMDDTHHMMSSZ (UTC), as apt-get --snapshot takes.
	Snapshot string `yaml:"snapshot" json:"snapshot"`
	// Sources are the only apt sources the pinned install reads, one-line style ("deb [options]
	// URI suite component..."), with @SNAPSHOT@ standing for Snapshot: the snapshot's own
	// archive, never the image's sources.list.d (a third-party repository such as NVIDIA's in
	// nvidia/cuda images, or Intel's in oneAPI images, would be read live and could break it).
	Sources []string `yaml:"sources" json:"sources"`
	// Bootstrap are the packages (name to version) apt installs first, without TLS peer
	// verification, when the image lacks them and a source is https: ubuntu:24.04 has no
	// ca-certificates and snapshot.ubuntu.com is https only. apt still checks every file it fetches
	// against the archive's signed Release file, so the bootstrap is pinned and verified.
	Bootstrap map[string]string `yaml:"bootstrap,omitempty" json:"bootstrap,omitempty"`
	// Packages maps a package name to its version, epoch included (1:2.43.0-1ubuntu7.3).
	Packages map[string]string `yaml:"packages" json:"packages"`

	source string
}

// SnapshotToken stands for the snapshot id in AptPins.Sources.
const SnapshotToken = "@SNAPSHOT@"

// SourceLines are Sources with the snapshot id put in.
func (a *AptPins) SourceLines() []string {
	lines := make([]string, len(a.Sources))
	for i, s := range a.Sources {
		lines[i] = strings.ReplaceAll(s, SnapshotToken, a.Snapshot)
	}
	return lines
}

// AptDistros returns the distributions llbuild has apt pins for, sorted.
func AptDistros() []string { return yamlNames("apt") }

// LoadAptPins returns the built-in apt pins of distro.
func LoadAptPins(distro string) (*AptPins, error) {
	data, err := builtin.ReadFile("apt/" + distro + ".yaml")
	if err != nil || distro == "" || strings.ContainsAny(distro, "/\\") {
		return nil, fmt.Errorf("no apt pins for distribution %q; llbuild pins %s", distro, strings.Join(AptDistros(), ", "))
	}
	return ParseAptPins("builtin:apt/"+distro+".yaml", data)
}

// ParseAptPins decodes and validates an apt pins file's contents.
func ParseAptPins(source string, data []byte) (*AptPins, error) {
	var a AptPins
	decodeErr := strictyaml.Decode(source, "apt pins file", data, &a)
	if decodeErr != nil && !strictyaml.Partial(decodeErr) {
		return nil, decodeErr
	}
	a.source = source
	if err := a.Validate(); err != nil || decodeErr != nil {
		return nil, errors.Join(decodeErr, err)
	}
	return &a, nil
}

var (
	snapshotID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z$`)
	aptName    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	aptVersion = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	distroName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	// aptSource is a one-line apt source: deb, optional [options], an http(s) URI, a suite and
	// at least one component.
	aptSource = regexp.MustCompile(`^deb( \[[^\]\n]+\])? https?://[^\s]+ [^\s/]+( [a-z0-9-]+)+$`)
)

// ValidSnapshot checks that id is an apt snapshot id, YYYYMMDDTHHMMSSZ.
func ValidSnapshot(id string) error {
	if !snapshotID.MatchString(id) {
		return fmt.Errorf("%q is not a snapshot id: write YYYYMMDDTHHMMSSZ in UTC, e.g. 20260723T000000Z", id)
	}
	return nil
}

// Validate reports every problem in the pins together.
func (a *AptPins) Validate() error {
	var errs []error
	bad := func(field, problem string) { errs = append(errs, fmt.Errorf("%s: %s: %s", a.source, field, problem)) }
	if a.SchemaVersion != AptPinsSchemaVersion {
		bad("schemaVersion", fmt.Sprintf("is %d, this llbuild reads %d", a.SchemaVersion, AptPinsSchemaVersion))
	}
	if !distroName.MatchString(a.Distro) {
		bad("distro", fmt.Sprintf("%q is not a distribution name like ubuntu-24.04", a.Distro))
	}
	if err := ValidSnapshot(a.Snapshot); err != nil {
		bad("snapshot", err.Error())
	}
	if len(a.Sources) == 0 {
		bad("sources", "is empty: name the snapshot's archive, e.g. deb https://snapshot.ubuntu.com/ubuntu/@SNAPSHOT@ noble main universe")
	}
	for i, src := range a.Sources {
		if !aptSource.MatchString(src) {
			bad(fmt.Sprintf("sources[%d]", i), fmt.Sprintf("%q is not a one-line apt source like deb https://snapshot.ubuntu.com/ubuntu/@SNAPSHOT@ noble main universe", src))
		} else if !strings.Contains(src, SnapshotToken) {
			bad(fmt.Sprintf("sources[%d]", i), fmt.Sprintf("%q does not name the snapshot: write %s where its id goes", src, SnapshotToken))
		}
	}
	if len(a.Packages) == 0 {
		bad("packages", "is empty")
	}
	for _, set := range []struct {
		field string
		pkgs  map[string]string
	}{{"bootstrap", a.Bootstrap}, {"packages", a.Packages}} {
		names := make([]string, 0, len(set.pkgs))
		for n := range set.pkgs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !aptName.MatchString(n) {
				bad(set.field+"."+n, "is not a Debian package name")
			}
			if !aptVersion.MatchString(set.pkgs[n]) {
				bad(set.field+"."+n, fmt.Sprintf("%q is not a Debian version (apt-cache policy %s shows it)", set.pkgs[n], n))
			}
		}
	}
	return errors.Join(errs...)
}

// Raw is the built-in recipe file of that name, as it is written (comments and all).
func Raw(name string) ([]byte, error) { return builtin.ReadFile(name + ".yaml") }

// At is the recipe moved to commit c of the history in repo (a mirror holding the recipe's own
// commit): c's hash and committer time, and its build number counted from the recipe's, the one
// anchor every such move shares (build --ref, publish --ref and each bisect probe). ref, when
// not "", is the name c was resolved from, recorded in the plan.
func (r Recipe) At(ctx context.Context, repo string, c gitref.Commit, ref string) (*Recipe, error) {
	bn, err := gitref.BuildNumber(ctx, repo, c.Hash, &gitref.Anchor{Commit: r.Source.Commit, BuildNumber: r.Source.BuildNumber})
	if err != nil {
		return nil, err
	}
	r.Source.Commit, r.Source.Epoch, r.Source.BuildNumber, r.Source.Ref = c.Hash, c.Time, bn, ref
	return &r, nil
}
