package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/llbuild/llbuild/internal/digest"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/preflight/cudareq"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// PlanSchemaVersion is the version of the Plan's JSON form. Version 3 names apt's sources
// (Apt.Sources, Apt.Bootstrap) instead of apt-get --snapshot. Version 2 pins apt: Apt became an
// object with a snapshot and package versions (version 1's list of names still decodes).
const PlanSchemaVersion = 3

// SourceDirToken stands for the source directory in configure arguments and environment; each
// executor replaces it with where it put the source (/src in a container).
const SourceDirToken = "@SRC@"

// Plan is everything a build does, resolved from a target and a recipe. It is a pure value:
// the same inputs give the same Plan and the same Hash.
type Plan struct {
	SchemaVersion int    `json:"schemaVersion"`
	Target        string `json:"target"`
	Recipe        string `json:"recipe"`
	Backend       string `json:"backend"`
	// Reproducible is false when an input is not pinned (a floating image tag, an apt package
	// without a version, no apt snapshot).
	Reproducible bool     `json:"reproducible"`
	Warnings     []string `json:"warnings,omitempty"`
	Notes        []string `json:"notes,omitempty"`

	Images  ImagePair `json:"images"`
	Source  Source    `json:"source"`
	Vendor  *Source   `json:"vendor,omitempty"`
	Patches []Patch   `json:"patches"`
	// Series names what Patches are (scoring, plain, none, custom; patches.NameOf). It follows
	// from Patches, so it is left out of the plan's hash, as Source.Ref is.
	Series string `json:"series,omitempty"`
	Apt    *Apt   `json:"apt,omitempty"`

	// Configure are CMake's arguments after -S and -B, in order.
	Configure []string `json:"configure"`
	// Env is the build environment. SOURCE_DATE_EPOCH among it.
	Env map[string]string `json:"env"`
	// EnvScript is sourced before configuring (oneAPI's setvars.sh), when set.
	EnvScript    string           `json:"envScript,omitempty"`
	BuildTargets []string         `json:"buildTargets"`
	Outputs      []recipes.Output `json:"outputs"`
	CUDA         *CUDAPlan        `json:"cuda,omitempty"`
	SYCL         *targets.SYCL    `json:"sycl,omitempty"`
	Runtime      RuntimePlan      `json:"runtime"`

	// Hash names everything built from this plan: sha256 of the plan's JSON with Hash empty.
	Hash string `json:"hash"`
}

// ImagePair are the build and run base images.
type ImagePair struct {
	Devel   Image `json:"devel"`
	Runtime Image `json:"runtime"`
}

// Image is a base image reference split into its parts.
type Image struct {
	Ref        string `json:"ref"`
	Repository string `json:"repository"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

// Source is a git source at a full commit.
type Source struct {
	URL    string `json:"url"`
	Commit string `json:"commit"`
	Epoch  int64  `json:"epoch,omitempty"`
	// Ref is the name the commit was asked for by (a tag, a branch, a PR head), when it was
	// named rather than pinned. It is left out of the plan's hash: two names of one commit
	// build the same thing.
	Ref string `json:"ref,omitempty"`
	// Tree is the content hash of a plain directory built instead of a checkout of Commit
	// (Options.SourceTree): the plan builds those bytes, whatever Commit says. Part of the hash.
	Tree string `json:"tree,omitempty"`
}

// Patch is one applied patch and its digest.
type Patch struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// CUDAPlan says what CUDA code the build contains and what driver it needs.
type CUDAPlan struct {
	Toolkit string `json:"toolkit"`
	// Architectures are passed to CMAKE_CUDA_ARCHITECTURES as given.
	Architectures []string `json:"architectures"`
	// BuiltAs is what ggml compiles them as (ggml turns 120 into 120a).
	BuiltAs []string `json:"builtAs"`
	// RequireCUDA is the NVIDIA_REQUIRE_CUDA the image carries.
	RequireCUDA string `json:"requireCUDA"`
}

// RuntimePlan is how the runtime image runs the server.
type RuntimePlan struct {
	Entrypoint  []string          `json:"entrypoint"`
	Env         map[string]string `json:"env"`
	Labels      map[string]string `json:"labels"`
	Healthcheck []string          `json:"healthcheck"`
	// AppDir is where the server and its libraries go in the runtime image.
	AppDir string `json:"appDir"`
}

// Apt is what the devel step installs with apt-get, and from which state of the archive.
type Apt struct {
	// Distro is the devel image's distribution, whose apt pins gave Snapshot and the versions.
	Distro string `json:"distro,omitempty"`
	// Snapshot is the archive snapshot apt reads, YYYYMMDDTHHMMSSZ.
	Snapshot string `json:"snapshot,omitempty"`
	// Sources are the only apt sources the install reads, one-line style, the snapshot's id
	// put in. Empty for a plan of schema version 2, which used apt-get --snapshot with the
	// image's own sources.
	Sources []string `json:"sources,omitempty"`
	// Bootstrap are installed first, without TLS peer verification, when the image lacks them
	// and a source is https (see recipes.AptPins.Bootstrap).
	Bootstrap []AptPackage `json:"bootstrap,omitempty"`
	Packages  []AptPackage `json:"packages"`
}

// AptPackage is one package apt installs; Version is empty when it is not pinned.
type AptPackage struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// UnmarshalJSON reads an Apt, or a plan of schema version 1's list of package names.
func (a *Apt) UnmarshalJSON(b []byte) error {
	var names []string
	if json.Unmarshal(b, &names) == nil {
		*a = Apt{Packages: []AptPackage{}}
		for _, n := range names {
			a.Packages = append(a.Packages, AptPackage{Name: n})
		}
		return nil
	}
	type plain Apt
	return json.Unmarshal(b, (*plain)(a))
}

// InstallArgs are apt-get install's package arguments: name=version, or the name alone for
// a package the plan does not pin.
func (a *Apt) InstallArgs() []string { return installArgs(a.Packages) }

// BootstrapArgs are InstallArgs for the bootstrap packages.
func (a *Apt) BootstrapArgs() []string { return installArgs(a.Bootstrap) }

func installArgs(pkgs []AptPackage) []string {
	args := make([]string, len(pkgs))
	for i, p := range pkgs {
		args[i] = p.Name
		if p.Version != "" {
			args[i] += "=" + p.Version
		}
	}
	return args
}

// Unpinned names what the apt step leaves to the day it runs: packages without a version and
// a missing snapshot.
func (a *Apt) Unpinned() []string {
	var u []string
	for _, p := range a.Packages {
		if p.Version == "" {
			u = append(u, p.Name)
		}
	}
	if a.Snapshot == "" {
		u = append(u, "the archive snapshot")
	}
	return u
}

// Options are the choices a user makes beyond target and recipe.
type Options struct {
	// AllowFloating accepts unpinned inputs: base images given by tag without a digest and apt
	// packages without pinned versions or snapshot. The plan is then marked not reproducible.
	AllowFloating bool
	// SourceTree, when set, is the content hash (TreeHash) of the plain directory the build will
	// read instead of a checkout of the recipe's commit: it is part of the plan, so that two
	// different trees never share a plan hash or an artifact directory.
	SourceTree string
}

// Resolve turns a target, a recipe and the patch series into a Plan. It reports every problem
// it finds together.
func Resolve(t *targets.Target, r *recipes.Recipe, series []patches.Patch, vendor *recipes.Recipe, opts Options) (*Plan, error) {
	p := &Plan{
		SchemaVersion: PlanSchemaVersion,
		Target:        t.Name,
		Recipe:        r.Name,
		Backend:       string(t.Build.Backend),
		Reproducible:  true,
		BuildTargets:  append([]string(nil), r.BuildTargets...),
		Outputs:       append([]recipes.Output(nil), r.Outputs...),
		Env:           map[string]string{},
	}
	var errs []error
	for _, im := range []struct {
		role string
		ref  string
		dst  *Image
	}{{"devel", t.Build.Images.Devel, &p.Images.Devel}, {"runtime", t.Build.Images.Runtime, &p.Images.Runtime}} {
		img, err := ParseImage(im.ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("target %s: build.images.%s: %w", t.Name, im.role, err))
			continue
		}
		if img.Digest == "" {
			if !opts.AllowFloating {
				errs = append(errs, floatingError{fmt.Errorf("target %s: build.images.%s: %q is a tag without a digest, so the build is not reproducible; pin it as %s@sha256:<digest> or pass --allow-floating", t.Name, im.role, im.ref, im.ref)})
				continue
			}
			p.Reproducible = false
			p.Warnings = append(p.Warnings, fmt.Sprintf("build.images.%s %q is not pinned by digest: this build is not reproducible", im.role, im.ref))
		}
		*im.dst = img
	}

	if len(r.Apt) > 0 {
		apt, err := resolveApt(t, r)
		p.Apt = apt
		if err != nil {
			if !opts.AllowFloating {
				errs = append(errs, floatingError{fmt.Errorf("%w, or pass --allow-floating", err)})
			} else {
				p.Reproducible = false
				p.Warnings = append(p.Warnings, err.Error())
			}
		}
	}

	src := r.Source
	p.Source = Source{URL: src.URL, Commit: src.Commit, Epoch: src.Epoch, Ref: src.Ref}
	if src.Vendor == "" {
		p.Source.Tree = opts.SourceTree
	}
	epoch := src.Epoch
	if src.Vendor != "" {
		if vendor == nil || vendor.Name != src.Vendor {
			errs = append(errs, fmt.Errorf("recipe %s vendors recipe %q, which was not given", r.Name, src.Vendor))
		} else {
			p.Vendor = &Source{URL: vendor.Source.URL, Commit: vendor.Source.Commit, Epoch: vendor.Source.Epoch}
			epoch = max(epoch, vendor.Source.Epoch)
		}
	}
	if r.Patches {
		for _, s := range series {
			p.Patches = append(p.Patches, Patch{Name: s.Name, SHA256: s.SHA256})
		}
	}
	p.Series = seriesOf(p.Patches)
	p.Env["SOURCE_DATE_EPOCH"] = fmt.Sprint(epoch)
	p.Env["CCACHE_BASEDIR"] = SourceDirToken
	p.Env["CCACHE_NOHASHDIR"] = "1"

	prefixMap := "-ffile-prefix-map=" + SourceDirToken + "=."
	cfg := []string{"-G", "Ninja"}
	cfg = append(cfg, r.CMake...)
	// llama.cpp takes its version from git, which a source without history lacks ("0 (unknown)"):
	// the plan says which upstream build this is.
	llama := src
	if vendor != nil && src.Vendor != "" {
		llama = vendor.Source
	}
	if llama.BuildNumber > 0 {
		cfg = append(cfg, "-DLLAMA_BUILD_COMMIT="+llama.Commit[:9], fmt.Sprintf("-DLLAMA_BUILD_NUMBER=%d", llama.BuildNumber))
	}
	cfg = append(cfg,
		"-DCMAKE_C_FLAGS="+prefixMap,
		"-DCMAKE_CXX_FLAGS="+prefixMap,
		"-DCMAKE_C_COMPILER_LAUNCHER=ccache",
		"-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
	)
	for _, f := range targets.ISAFlags {
		cfg = append(cfg, fmt.Sprintf("-D%s=%s", f.Option, onOff(t.Build.ISA[f.Option])))
	}
	for _, a := range r.CMake {
		if strings.HasPrefix(a, "-DGGML_NATIVE=") && onOff(cmakeTrue(strings.TrimPrefix(a, "-DGGML_NATIVE="))) == "ON" && hasDef(r.CMake, "GGML_BACKEND_DL", true) {
			errs = append(errs, fmt.Errorf("recipe %s: GGML_NATIVE=ON with GGML_BACKEND_DL=ON is a fatal CMake error in ggml; set GGML_NATIVE=OFF", r.Name))
		}
	}
	if hasDef(r.CMake, "GGML_NATIVE", true) {
		errs = append(errs, fmt.Errorf("recipe %s: GGML_NATIVE=ON builds for the build machine's CPU, not the target's; set GGML_NATIVE=OFF", r.Name))
	}

	switch t.Build.Backend {
	case targets.BackendCUDA:
		c := t.Build.CUDA
		d, err := c.Decoded()
		if err != nil {
			errs = append(errs, fmt.Errorf("target %s: %w", t.Name, err))
			break
		}
		cp := &CUDAPlan{Toolkit: c.Toolkit, Architectures: append([]string(nil), c.Architectures...), RequireCUDA: d.RequireCUDA}
		for i, arch := range d.Architectures {
			cp.BuiltAs = append(cp.BuiltAs, arch.CMakeName())
			if a := c.Architectures[i]; arch.Specific && !strings.HasSuffix(a, "a") {
				p.Notes = append(p.Notes, fmt.Sprintf("CUDA architecture %s is built by ggml as sm_%s (arch-specific): it runs only on GPUs of compute capability %d.%d", a, arch.CMakeName(), arch.SM/10, arch.SM%10))
			}
		}
		// The requirement names no brand or arch, so no GPU fact leaves it undecided.
		if err := checkDriverSatisfies(t, cp.RequireCUDA); err != nil {
			errs = append(errs, err)
		}
		p.CUDA = cp
		stubs := "-L" + CUDAStubsToken
		cfg = append(cfg,
			"-DGGML_CUDA=ON",
			"-DCMAKE_CUDA_ARCHITECTURES="+strings.Join(c.Architectures, ";"),
			// ggml caches CUDA compiles only when no C/C++ launcher is set, and the plan sets
			// them: without this a rebuild after a patch change compiles every CUDA object again
			"-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
			"-DCMAKE_CUDA_FLAGS=-Xcompiler="+prefixMap,
			"-DCMAKE_EXE_LINKER_FLAGS="+stubs,
			"-DCMAKE_SHARED_LINKER_FLAGS="+stubs,
		)
		p.Env["LIBRARY_PATH"] = CUDAStubsToken
		// ccache leaves -ffile-prefix-map out of a C/C++ compile's hash but not nvcc's
		// -Xcompiler=-ffile-prefix-map=SRC=.: with it hashed, every CUDA object's key held the
		// work directory, and a build in another one (each plan has its own: every bisect probe)
		// compiled all of them again (scripts/ccache-nvcc.sh shows both)
		p.Env["CCACHE_IGNOREOPTIONS"] = "-Xcompiler=-ffile-prefix-map=*"
		p.Notes = append(p.Notes, "links against the CUDA driver stub (libcuda.so in the toolkit's stubs directory, "+CUDAStubsToken+", which the executor finds where it builds: /usr/local/cuda/lib64/stubs in NVIDIA's images, /usr/lib/x86_64-linux-gnu/stubs in Debian's packages); the real libcuda.so.1 comes from the host driver at run time and is never shipped")
	case targets.BackendSYCL:
		p.SYCL = &targets.SYCL{DeviceArch: t.Build.SYCL.DeviceArch}
		cfg = append(cfg, "-DGGML_SYCL=ON", "-DGGML_SYCL_TARGET=INTEL", "-DGGML_SYCL_DEVICE_ARCH="+t.Build.SYCL.DeviceArch)
		p.EnvScript = "/opt/intel/oneapi/setvars.sh"
	}
	if c := t.Build.Compilers; c != nil {
		cfg = append(cfg, "-DCMAKE_C_COMPILER="+c.C, "-DCMAKE_CXX_COMPILER="+c.CXX)
	}
	cfg = append(cfg, t.Build.CMake...)
	p.Configure = cfg

	p.Runtime = runtimePlan(t, p)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h, err := p.computeHash()
	if err != nil {
		return nil, err
	}
	p.Hash = h
	return p, nil
}

// resolveApt pins the recipe's apt packages with the apt pins of the target's devel image's
// distribution. The error says what is left unpinned and how to pin it; the Apt is complete
// either way, with the unpinned packages given by name alone.
func resolveApt(t *targets.Target, r *recipes.Recipe) (*Apt, error) {
	a := &Apt{Distro: t.Build.Images.DevelDistro}
	var pins *recipes.AptPins
	var why string
	if a.Distro == "" {
		why = fmt.Sprintf("target %s: build.images.develDistro is not set, so recipe %s's apt packages are not pinned and this build is not reproducible; set it to the devel image's distribution (llbuild pins %s)",
			t.Name, r.Name, strings.Join(recipes.AptDistros(), ", "))
	} else if p, err := recipes.LoadAptPins(a.Distro); err != nil {
		why = fmt.Sprintf("target %s: build.images.develDistro: %v, so recipe %s's apt packages are not pinned and this build is not reproducible; pin them in recipes/apt/%s.yaml", t.Name, err, r.Name, a.Distro)
	} else {
		pins = p
		a.Snapshot = p.Snapshot
		a.Sources = p.SourceLines()
		names := make([]string, 0, len(p.Bootstrap))
		for n := range p.Bootstrap {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a.Bootstrap = append(a.Bootstrap, AptPackage{Name: n, Version: p.Bootstrap[n]})
		}
	}
	for _, n := range r.Apt {
		v := ""
		if pins != nil {
			v = pins.Packages[n]
		}
		a.Packages = append(a.Packages, AptPackage{Name: n, Version: v})
	}
	if why != "" {
		return a, errors.New(why)
	}
	if u := a.Unpinned(); len(u) > 0 {
		return a, fmt.Errorf("recipe %s's apt packages %s have no version in the %s apt pins, so this build is not reproducible; add them to recipes/apt/%s.yaml (apt-cache policy shows the versions at snapshot %s)",
			r.Name, strings.Join(u, ", "), a.Distro, a.Distro, a.Snapshot)
	}
	return a, nil
}

func runtimePlan(t *targets.Target, p *Plan) RuntimePlan {
	const app = "/app"
	rt := RuntimePlan{
		AppDir:     app,
		Entrypoint: []string{app + "/llama-server"},
		Env: map[string]string{
			"LD_LIBRARY_PATH": app,
			"LLAMA_ARG_HOST":  "0.0.0.0",
			"LLAMA_ARG_PORT":  "8080",
		},
		Labels: map[string]string{
			"org.opencontainers.image.source":   p.Source.URL,
			"org.opencontainers.image.revision": p.Source.Commit,
			"org.opencontainers.image.created":  sourceEpoch(p).Format(time.RFC3339),
			"io.llbuild.target":                 t.Name,
			"io.llbuild.recipe":                 p.Recipe,
			"io.llbuild.llama-cpp.commit":       p.Source.Commit,
			"io.llbuild.patches":                patchList(p.Patches),
		},
		// bash's /dev/tcp needs no curl, which the runtime base images lack.
		Healthcheck: []string{"CMD-SHELL", `exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && head -n1 <&3 | grep -q ' 200 '`},
	}
	if p.Vendor != nil {
		rt.Labels["io.llbuild.llama-cpp.commit"] = p.Vendor.Commit
	}
	for k, v := range t.Runtime.Env {
		rt.Env[k] = v
	}
	if p.CUDA != nil {
		rt.Env["NVIDIA_REQUIRE_CUDA"] = p.CUDA.RequireCUDA
		rt.Labels["io.llbuild.cuda.require"] = p.CUDA.RequireCUDA
		rt.Labels["io.llbuild.cuda.architectures"] = strings.Join(p.CUDA.BuiltAs, ",")
		rt.Env["NVIDIA_VISIBLE_DEVICES"] = "all"
		rt.Env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
	}
	if p.SYCL != nil {
		rt.Labels["io.llbuild.sycl.device"] = p.SYCL.DeviceArch
	}
	return rt
}

// ParseSourceDateEpoch reads a SOURCE_DATE_EPOCH value: decimal seconds since the Unix epoch,
// without a sign or leading zeros, at most 2^33 (the year 2242). It is the one reader of the
// variable: plans, images and bundles all take their time stamps through it.
func ParseSourceDateEpoch(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<33 || strconv.FormatInt(n, 10) != s {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a non-negative integer number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// sourceEpoch is the plan's SOURCE_DATE_EPOCH, which Resolve set from the recipes' epochs.
func sourceEpoch(p *Plan) time.Time {
	t, err := ParseSourceDateEpoch(p.Env["SOURCE_DATE_EPOCH"])
	if err != nil {
		panic("pipeline: " + err.Error()) // Resolve writes it from an int64
	}
	return t
}

func patchList(ps []Patch) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name+"@sha256:"+p.SHA256)
	}
	return strings.Join(s, ",")
}

// checkDriverSatisfies checks that the target's own driver and GPUs meet the requirement an
// image carries, as nvidia-container-cli evaluates it (targets.Host.CheckCUDARequirement): a
// plan whose image the target host could not start is refused. An outcome that depends on a
// GPU fact the target does not give is returned as the *cudareq.UndecidedError it is.
func checkDriverSatisfies(t *targets.Target, require string) error {
	err := t.Host.CheckCUDARequirement(require)
	var undecided *cudareq.UndecidedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &undecided):
		return err
	case errors.Is(err, cudareq.ErrInvalid):
		return fmt.Errorf("target %s: the image's requirement %q cannot be evaluated (%s): %w", t.Name, require, cudareq.CLIMessage(err), err)
	case errors.As(err, new(*cudareq.UnsatisfiedError)):
		return fmt.Errorf("target %s: the image would need %s but driver %s runs CUDA %s: use a CUDA %s image or a newer driver", t.Name, require, t.Host.Driver.Version, t.Host.Driver.CUDA, t.Host.Driver.CUDA)
	}
	return fmt.Errorf("target %s: %w", t.Name, err)
}

func (p *Plan) computeHash() (string, error) {
	c := *p
	c.Hash = ""
	c.Source.Ref = ""
	c.Series = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	return digest.SHA256Hex(b), nil
}

// ShortHash is the first 12 hex digits of the plan hash.
func (p *Plan) ShortHash() string { return p.Hash[:12] }

// JSON renders the plan as indented JSON with sorted keys and a trailing newline.
func (p *Plan) JSON() []byte {
	b, _ := json.MarshalIndent(p, "", "  ")
	return append(b, '\n')
}

// ParseImage splits "repo[:tag][@sha256:hex]".
func ParseImage(ref string) (Image, error) {
	img := Image{Ref: ref}
	name := ref
	if i := strings.Index(ref, "@"); i >= 0 {
		name, img.Digest = ref[:i], ref[i+1:]
		d := strings.TrimPrefix(img.Digest, "sha256:")
		if !strings.HasPrefix(img.Digest, "sha256:") || len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
			return img, fmt.Errorf("%q: digest must be sha256:<64 lower-case hex>", ref)
		}
	}
	slash := strings.LastIndex(name, "/")
	if i := strings.LastIndex(name, ":"); i > slash {
		name, img.Tag = name[:i], name[i+1:]
	}
	if name == "" {
		return img, fmt.Errorf("%q: no repository", ref)
	}
	img.Repository = name
	return img, nil
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func cmakeTrue(v string) bool {
	switch strings.ToUpper(v) {
	case "ON", "1", "TRUE", "YES", "Y":
		return true
	}
	return false
}

// hasDef reports whether args define name, and with on, whether it is defined true.
func hasDef(args []string, name string, on bool) bool {
	for _, a := range args {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "-D"), "=")
		k, _, _ = strings.Cut(k, ":")
		if ok && k == name && (!on || cmakeTrue(v)) {
			return true
		}
	}
	return false
}

// SortedEnv returns env as KEY=VALUE strings in key order.
func SortedEnv(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// ErrFloating matches (errors.Is) the error of an input that is not pinned while
// Options.AllowFloating is off: nothing is wrong with the input but the flag it needs, so the
// CLI treats it as a usage error.
var ErrFloating = errors.New("unpinned input without AllowFloating")

// floatingError keeps its message and matches ErrFloating.
type floatingError struct{ err error }

func (e floatingError) Error() string        { return e.err.Error() }
func (e floatingError) Unwrap() error        { return e.err }
func (e floatingError) Is(target error) bool { return target == ErrFloating }
