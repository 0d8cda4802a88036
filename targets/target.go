package targets

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llbuild/llbuild/internal/inputerr"
	"github.com/llbuild/llbuild/internal/strictyaml"
	"github.com/llbuild/llbuild/preflight/cudareq"
)

// SchemaVersion is the target file format this llbuild reads and writes.
const SchemaVersion = 1

//go:embed *.yaml
var builtin embed.FS

// Backend is the ggml GPU backend a target builds.
type Backend string

// Backends.
const (
	BackendCPU  Backend = "cpu"
	BackendCUDA Backend = "cuda"
	BackendSYCL Backend = "sycl"
)

// Target is a host together with how llama.cpp must be built to run on it. A target file is
// what `llbuild target detect` writes; the shipped ones live in this package as YAML.
type Target struct {
	SchemaVersion int     `yaml:"schemaVersion" json:"schemaVersion"`
	Name          string  `yaml:"name" json:"name"`
	Description   string  `yaml:"description,omitempty" json:"description,omitempty"`
	Host          Host    `yaml:"host" json:"host"`
	Build         Build   `yaml:"build" json:"build"`
	Runtime       Runtime `yaml:"runtime,omitempty" json:"runtime,omitempty"`

	// Source is where the target was loaded from ("builtin:olares-one.yaml" or a path), for
	// error messages; it is not part of the file.
	Source string `yaml:"-" json:"-"`
}

// Build says how binaries for the target are built.
type Build struct {
	Backend Backend `yaml:"backend" json:"backend"`
	CUDA    *CUDA   `yaml:"cuda,omitempty" json:"cuda,omitempty"`
	SYCL    *SYCL   `yaml:"sycl,omitempty" json:"sycl,omitempty"`
	// ISA holds every ggml ISA option (GGML_AVX2, GGML_AVX512, ...) explicitly on or off: with
	// SOURCE_DATE_EPOCH set ggml turns its ISA defaults off, so nothing is left to defaults.
	ISA    map[string]bool `yaml:"isa" json:"isa"`
	Images Images          `yaml:"images" json:"images"`
	// CMake holds extra -D arguments, appended after the recipe's.
	CMake []string `yaml:"cmake,omitempty" json:"cmake,omitempty"`
	// Compilers overrides the C and C++ compilers (icx/icpx for SYCL).
	Compilers *Compilers `yaml:"compilers,omitempty" json:"compilers,omitempty"`
}

// CUDA is a CUDA build: the toolkit in the devel image and the architectures to compile.
type CUDA struct {
	// Toolkit is the CUDA toolkit version of the devel image, e.g. "13.1.1".
	Toolkit string `yaml:"toolkit" json:"toolkit"`
	// Architectures are CMAKE_CUDA_ARCHITECTURES entries, e.g. ["120"] or ["86"].
	Architectures []string `yaml:"architectures" json:"architectures"`

	// decoded is Toolkit and Architectures parsed, set when the target is loaded.
	decoded *DecodedCUDA
}

// DecodedCUDA is a CUDA build's settings as numbers, decoded once when the target was
// loaded and validated: what plan resolution reads instead of parsing the strings again.
type DecodedCUDA struct {
	// Toolkit is CUDA.Toolkit's numbers, e.g. [13 1 1].
	Toolkit []int
	// Architectures are CUDA.Architectures parsed, in their order.
	Architectures []CUDAArch
	// RequireCUDA is the NVIDIA_REQUIRE_CUDA an image of the toolkit carries (CUDARequirement).
	RequireCUDA string

	// from are the strings decoded, to tell when the target was edited after loading.
	from CUDA
}

// ErrNotDecoded is returned (wrapped) by CUDA.Decoded for settings that were not loaded by
// Parse, Load, LoadFile or ResolveHost, or were edited since.
var ErrNotDecoded = errors.New("build.cuda was not decoded by loading the target")

// Decoded returns the settings as decoded at load. A target built or edited in code has none:
// write it out and load it (Marshal, Parse), or use WithCUDAArchitectures.
func (c *CUDA) Decoded() (*DecodedCUDA, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: there is no build.cuda", ErrNotDecoded)
	}
	d := c.decoded
	if d == nil || d.from.Toolkit != c.Toolkit || !slices.Equal(d.from.Architectures, c.Architectures) {
		return nil, fmt.Errorf("%w (toolkit %q, architectures %v): load it with targets.Parse, or change its architectures with WithCUDAArchitectures", ErrNotDecoded, c.Toolkit, c.Architectures)
	}
	return d, nil
}

// SYCL is an Intel SYCL ahead-of-time build.
type SYCL struct {
	// DeviceArch is GGML_SYCL_DEVICE_ARCH, e.g. "bmg-g31".
	DeviceArch string `yaml:"deviceArch" json:"deviceArch"`
}

// Compilers names the C and C++ compilers.
type Compilers struct {
	C   string `yaml:"c" json:"c"`
	CXX string `yaml:"cxx" json:"cxx"`
}

// Images are the build (devel) and run (runtime) base images, each "repo:tag@sha256:...".
type Images struct {
	Devel   string `yaml:"devel" json:"devel"`
	Runtime string `yaml:"runtime" json:"runtime"`
	// DevelDistro is the devel image's distribution (ubuntu-24.04): the apt packages a recipe
	// installs into it are pinned by that distribution's apt pins (recipes/apt/<distro>.yaml).
	// Empty: they are not pinned, and the plan is not reproducible.
	DevelDistro string `yaml:"develDistro,omitempty" json:"develDistro,omitempty"`
}

// Runtime is what the server needs at run time.
type Runtime struct {
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
}

// ISAFlags lists every ggml x86 ISA option a target must set, in CMake's order, with the CPU
// features each one compiles in.
var ISAFlags = []struct {
	Option   string
	Features []Feature
}{
	{"GGML_SSE42", []Feature{SSE42}},
	{"GGML_AVX", []Feature{AVX}},
	{"GGML_AVX_VNNI", []Feature{AVXVNNI}},
	{"GGML_AVX2", []Feature{AVX2}},
	{"GGML_BMI2", []Feature{BMI2}},
	{"GGML_AVX512", AVX512Foundation},
	{"GGML_AVX512_VBMI", []Feature{AVX512VBMI}},
	{"GGML_AVX512_VNNI", []Feature{AVX512VNNI}},
	{"GGML_AVX512_BF16", []Feature{AVX512BF16}},
	{"GGML_FMA", []Feature{FMA}},
	{"GGML_F16C", []Feature{F16C}},
	{"GGML_AMX_TILE", []Feature{AMXTile}},
	{"GGML_AMX_INT8", []Feature{AMXInt8}},
	{"GGML_AMX_BF16", []Feature{AMXBF16}},
}

// ISAFromFeatures returns the ggml ISA options for a CPU with the given features: each option
// is on exactly when the CPU has every feature it compiles in.
func ISAFromFeatures(fs FeatureSet) map[string]bool {
	m := make(map[string]bool, len(ISAFlags))
	for _, f := range ISAFlags {
		m[f.Option] = fs.Has(f.Features...)
	}
	return m
}

// Names returns the names of the built-in targets, sorted.
func Names() []string {
	entries, _ := builtin.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// ErrUnknownTarget is returned (wrapped) for a target name that is not built in.
var ErrUnknownTarget = errors.New("unknown target")

// Load returns the built-in target called name. An unknown name is an error that suggests the
// nearest known name.
func Load(name string) (*Target, error) {
	data, err := builtin.ReadFile(name + ".yaml")
	if err != nil {
		msg := fmt.Sprintf("%q", name)
		if near := Nearest(name, Names()); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return nil, fmt.Errorf("%w %s; known targets: %s; describe your own host with --target-file", ErrUnknownTarget, msg, strings.Join(Names(), ", "))
	}
	return Parse("builtin:"+name+".yaml", data)
}

// ForCUDAArchitectures returns the built-in CUDA target that builds exactly archs, in any
// order. None is an inputerr.Error listing the built-in CUDA targets and their architectures.
func ForCUDAArchitectures(archs []string) (*Target, error) {
	var all []string
	for _, n := range Names() {
		t, err := Load(n)
		if err != nil {
			return nil, err
		}
		if t.Build.CUDA == nil {
			continue
		}
		all = append(all, fmt.Sprintf("%s (%s)", n, strings.Join(t.Build.CUDA.Architectures, ",")))
		if slices.Equal(sortedCopy(t.Build.CUDA.Architectures), sortedCopy(archs)) {
			return t, nil
		}
	}
	return nil, inputerr.Errorf("no built-in target builds CUDA architectures %s (built-in CUDA targets: %s): pass --target T --arch %s to build them for T's toolkit, or describe the host with --target-file", strings.Join(archs, ","), strings.Join(all, ", "), strings.Join(archs, ","))
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// LoadFile reads a target file.
func LoadFile(path string) (*Target, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading target file: %w", err)
	}
	return Parse(path, data)
}

// Resolve loads a target by name, or from file when file is not empty.
func Resolve(name, file string) (*Target, error) {
	switch {
	case file != "" && name != "":
		return nil, errors.New("give --target or --target-file, not both")
	case file != "":
		return LoadFile(file)
	case name != "":
		return Load(name)
	}
	return nil, fmt.Errorf("no target given: use --target (one of %s) or --target-file", strings.Join(Names(), ", "))
}

// ValidName says whether name can name a target: lower-case letters, digits and '-', not
// starting with '-'.
func ValidName(name string) bool { return validName.MatchString(name) }

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Parse decodes, defaults and validates a target file's contents. source names the file in
// errors.
func Parse(source string, data []byte) (*Target, error) {
	var t Target
	decodeErr := strictyaml.Decode(source, "target file", data, &t)
	if decodeErr != nil && !strictyaml.Partial(decodeErr) {
		return nil, decodeErr
	}
	if _, err := t.complete(source); err != nil || decodeErr != nil {
		return nil, errors.Join(decodeErr, err)
	}
	return &t, nil
}

// complete finishes a decoded target file: its source, defaults, validation, and the typed
// values of its validated strings.
func (t *Target) complete(source string) (*Target, error) {
	t.Source = source
	t.setDefaults()
	cuda, err := t.check()
	if err != nil {
		return nil, err
	}
	if t.Build.CUDA != nil {
		t.Build.CUDA.decoded = cuda
	}
	return t, nil
}

// WithCUDAArchitectures returns a copy of a CUDA target that builds archs instead of its own
// architectures, validated and decoded again: an architecture its toolkit cannot compile or
// that does not run on its GPUs is an error.
func (t *Target) WithCUDAArchitectures(archs []string) (*Target, error) {
	if t.Build.CUDA == nil {
		return nil, fmt.Errorf("target %s has no build.cuda", t.Name)
	}
	c := *t
	cuda := *t.Build.CUDA
	cuda.Architectures = slices.Clone(archs)
	cuda.decoded = nil
	c.Build.CUDA = &cuda
	return c.complete(t.Source)
}

func (t *Target) setDefaults() {
	if t.Build.Backend == "" {
		t.Build.Backend = BackendCPU
	}
}

// FieldError is one problem in a file: where, what, and how to fix it.
type FieldError struct {
	File, Field, Problem, Fix string
}

func (e *FieldError) Error() string {
	s := fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Problem)
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	return s
}

var digestRef = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$`)

// Validate reports every problem in the target together. It does not change the target.
func (t *Target) Validate() error {
	_, err := t.check()
	return err
}

// check is Validate, returning also the CUDA settings it parsed when they are all valid.
func (t *Target) check() (*DecodedCUDA, error) {
	var cuda *DecodedCUDA
	var errs []error
	bad := func(field, problem, fix string) {
		errs = append(errs, &FieldError{File: t.Source, Field: field, Problem: problem, Fix: fix})
	}
	if t.SchemaVersion != SchemaVersion {
		bad("schemaVersion", fmt.Sprintf("is %d, this llbuild reads %d", t.SchemaVersion, SchemaVersion), fmt.Sprintf("set schemaVersion: %d", SchemaVersion))
	}
	if !ValidName(t.Name) {
		bad("name", fmt.Sprintf("%q is not a valid target name", t.Name), "use lower-case letters, digits and '-'")
	}
	has := t.Host.CPU.FeatureSet()
	for i, f := range t.Host.CPU.Features {
		if _, err := ParseFeature(string(f)); err != nil || f != mustFeature(f) {
			bad(fmt.Sprintf("host.cpu.features[%d]", i), fmt.Sprintf("unknown CPU feature %q", f), "use one of "+joinFeatures(KnownFeatures))
		}
	}
	for _, e := range t.Host.fieldErrors() {
		bad(e.Field, e.Problem, e.Fix)
	}
	for _, f := range ISAFlags {
		on, ok := t.Build.ISA[f.Option]
		if !ok {
			bad("build.isa."+f.Option, "is not set", "set every ggml ISA option explicitly to true or false; with SOURCE_DATE_EPOCH set ggml turns unset ones off")
			continue
		}
		if on && !has.Has(f.Features...) {
			var missing []Feature
			for _, x := range f.Features {
				if !has[x] {
					missing = append(missing, x)
				}
			}
			bad("build.isa."+f.Option, fmt.Sprintf("is on but the host CPU lacks %s: the binaries would die with SIGILL", joinFeatures(missing)), "set it to false, or add the feature to host.cpu.features if the CPU really has it")
		}
	}
	known := map[string]bool{}
	for _, f := range ISAFlags {
		known[f.Option] = true
	}
	for _, k := range slices.Sorted(maps.Keys(t.Build.ISA)) {
		if !known[k] {
			bad("build.isa."+k, "is not a ggml ISA option", "known options: "+isaOptionList())
		}
	}
	for i, a := range t.Build.CMake {
		if !strings.HasPrefix(a, "-D") {
			bad(fmt.Sprintf("build.cmake[%d]", i), fmt.Sprintf("%q is not a -D definition", a), "write extra CMake arguments as -DNAME=VALUE")
			continue
		}
		name, val, _ := strings.Cut(strings.TrimPrefix(a, "-D"), "=")
		name, _, _ = strings.Cut(name, ":")
		if known[name] {
			bad(fmt.Sprintf("build.cmake[%d]", i), name+" is an ISA option", "set it under build.isa instead")
		}
		if name == "GGML_NATIVE" && cmakeTrue(val) {
			bad(fmt.Sprintf("build.cmake[%d]", i), "GGML_NATIVE=ON builds for the build machine's CPU, not the target's", "remove it; llbuild sets GGML_NATIVE=OFF and every ISA option explicitly")
		}
	}
	for _, im := range []struct{ field, ref string }{{"build.images.devel", t.Build.Images.Devel}, {"build.images.runtime", t.Build.Images.Runtime}} {
		if im.ref == "" {
			bad(im.field, "is empty", "give an image reference pinned by digest, repo:tag@sha256:<64 hex>")
		} else if strings.Contains(im.ref, "@") && !digestRef.MatchString(im.ref) {
			bad(im.field, fmt.Sprintf("%q has a malformed digest", im.ref), "write repo:tag@sha256:<64 lower-case hex>")
		}
	}
	if d := t.Build.Images.DevelDistro; d != "" && !regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`).MatchString(d) {
		bad("build.images.develDistro", fmt.Sprintf("%q is not a distribution name", d), "write it as the apt pins name it, e.g. ubuntu-24.04")
	}
	switch t.Build.Backend {
	case BackendCPU:
		if t.Build.CUDA != nil || t.Build.SYCL != nil {
			bad("build.backend", "is cpu but cuda or sycl settings are given", "set backend: cuda or sycl, or remove them")
		}
	case BackendCUDA:
		var cerrs []error
		cuda, cerrs = t.validateCUDA()
		errs = append(errs, cerrs...)
	case BackendSYCL:
		if t.Build.SYCL == nil || t.Build.SYCL.DeviceArch == "" {
			bad("build.sycl.deviceArch", "is empty", "name the ahead-of-time device, e.g. bmg-g31")
		}
	default:
		bad("build.backend", fmt.Sprintf("unknown backend %q", t.Build.Backend), "use cpu, cuda or sycl")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cuda, nil
}

// validateCUDA checks build.cuda and returns its values parsed, nil with any error.
func (t *Target) validateCUDA() (*DecodedCUDA, []error) {
	var errs []error
	bad := func(field, problem, fix string) {
		errs = append(errs, &FieldError{File: t.Source, Field: field, Problem: problem, Fix: fix})
	}
	c := t.Build.CUDA
	if c == nil {
		bad("build.cuda", "is missing for a cuda target", "give build.cuda.toolkit and build.cuda.architectures")
		return nil, errs
	}
	tk, err := ParseVersion(c.Toolkit)
	if err != nil {
		bad("build.cuda.toolkit", err.Error(), `write the devel image's CUDA version, e.g. "13.1.1"`)
	}
	if len(c.Architectures) == 0 {
		bad("build.cuda.architectures", "is empty", `name the GPU's architecture, e.g. ["86"]; building one is several times faster than the default list`)
	}
	if t.Host.Driver.CUDA != "" && err == nil {
		if _, derr := ParseVersion(t.Host.Driver.CUDA); derr != nil {
			bad("host.driver.cuda", derr.Error(), `write the driver's CUDA cap as major.minor, e.g. "13.1"`)
		} else if rerr := t.Host.CheckCUDARequirement(CUDARequirement(tk)); rerr != nil {
			bad("build.cuda.toolkit", fmt.Sprintf("CUDA %s is newer than the driver's cap %s: the image would not start (%s)", c.Toolkit, t.Host.Driver.CUDA, cudareq.CLIMessage(rerr)),
				fmt.Sprintf("use a devel and runtime image of CUDA %s or older, or upgrade the driver", t.Host.Driver.CUDA))
		}
	}
	archs := make([]CUDAArch, 0, len(c.Architectures))
	for i, a := range c.Architectures {
		if j := slices.Index(c.Architectures, a); j < i {
			bad(fmt.Sprintf("build.cuda.architectures[%d]", i), fmt.Sprintf("%q is given twice (also [%d])", a, j), "list each architecture once: a repeat builds nothing more, but changes the plan's hash")
			continue
		}
		arch, aerr := ParseCUDAArch(a)
		archs = append(archs, arch)
		if aerr != nil {
			bad(fmt.Sprintf("build.cuda.architectures[%d]", i), aerr.Error(), `write the compute capability without the dot, e.g. "86", "90", "120"`)
			continue
		}
		if err == nil {
			if lo, hi := ToolkitArchRange(tk); arch.SM < lo || arch.SM > hi {
				bad(fmt.Sprintf("build.cuda.architectures[%d]", i), fmt.Sprintf("sm_%d cannot be compiled by CUDA %s (it builds sm_%d to sm_%d)", arch.SM, c.Toolkit, lo, hi), "choose an architecture the toolkit supports, or a toolkit that supports it")
			}
		}
		for j, g := range t.Host.GPUs {
			if g.Vendor != VendorNVIDIA || g.ComputeCapability == "" {
				continue
			}
			if !arch.RunsOn(g.ComputeCapability) {
				bad(fmt.Sprintf("build.cuda.architectures[%d]", i), fmt.Sprintf("%s does not run on host.gpus[%d] (compute capability %s): CUDA error 209, no kernel image is available", arch.CMakeName(), j, g.ComputeCapability),
					fmt.Sprintf("use %q", strings.ReplaceAll(g.ComputeCapability, ".", "")))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &DecodedCUDA{
		Toolkit:       tk,
		Architectures: archs,
		RequireCUDA:   CUDARequirement(tk),
		from:          CUDA{Toolkit: c.Toolkit, Architectures: slices.Clone(c.Architectures)},
	}, nil
}

// CUDAArch is one CMAKE_CUDA_ARCHITECTURES entry.
type CUDAArch struct {
	SM       int  // e.g. 86, 120
	Specific bool // the 'a' suffix: runs only on exactly this compute capability
	Virtual  bool // -virtual: PTX only
}

// ggml rewrites any 12X architecture to 12Xa (ggml/src/ggml-cuda/CMakeLists.txt: "12X is
// forwards-compatible, 12Xa is not"), so such a build runs only on exactly that capability.
func ggmlRewritesToSpecific(sm int) bool { return sm >= 120 && sm < 130 }

// ParseCUDAArch parses "86", "120a", "90-virtual", "86-real".
func ParseCUDAArch(s string) (CUDAArch, error) {
	var a CUDAArch
	rest := s
	if v, ok := strings.CutSuffix(rest, "-virtual"); ok {
		a.Virtual, rest = true, v
	} else if v, ok := strings.CutSuffix(rest, "-real"); ok {
		rest = v
	}
	if v, ok := strings.CutSuffix(rest, "a"); ok {
		a.Specific, rest = true, v
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 30 || n > 199 {
		return a, fmt.Errorf("%q is not a CUDA architecture", s)
	}
	a.SM = n
	if ggmlRewritesToSpecific(n) {
		a.Specific = true
	}
	return a, nil
}

// CMakeName is the architecture as ggml builds it, e.g. "120a" for "120".
func (a CUDAArch) CMakeName() string {
	s := strconv.Itoa(a.SM)
	if a.Specific {
		s += "a"
	}
	if a.Virtual {
		s += "-virtual"
	}
	return s
}

// RunsOn reports whether code for a runs on a GPU of compute capability cc ("12.0"): a cubin
// runs on the same major with an equal or higher minor, an 'a' cubin only on exactly its
// capability, and PTX on any equal or higher capability.
func (a CUDAArch) RunsOn(cc string) bool {
	v, err := ParseVersion(cc)
	if err != nil || len(v) != 2 {
		return false
	}
	dev := v[0]*10 + v[1]
	switch {
	case a.Virtual:
		return dev >= a.SM
	case a.Specific:
		return dev == a.SM
	default:
		return v[0] == a.SM/10 && v[1] >= a.SM%10
	}
}

// ToolkitArchRange returns the lowest and highest sm a CUDA toolkit compiles. CUDA 13 dropped
// everything below Turing (sm_75).
func ToolkitArchRange(toolkit []int) (lo, hi int) {
	switch {
	case toolkit[0] >= 13:
		return 75, 121
	case toolkit[0] == 12 && at(toolkit, 1) >= 9:
		return 50, 121
	case toolkit[0] == 12 && at(toolkit, 1) >= 8:
		return 50, 120
	case toolkit[0] == 12:
		return 50, 90
	default:
		return 35, 90
	}
}

// ParseVersion parses a dotted version like "13.1" or "590.44.01" into its numbers.
func ParseVersion(s string) ([]int, error) {
	if s == "" {
		return nil, errors.New("empty version")
	}
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a dotted version", s)
		}
		out[i] = n
	}
	return out, nil
}

// Compare compares two versions component by component, missing components counting as 0.
func Compare(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := at(a, i), at(b, i)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func at(v []int, i int) int {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func mustFeature(f Feature) Feature {
	p, _ := ParseFeature(string(f))
	return p
}

func cmakeTrue(v string) bool {
	switch strings.ToUpper(v) {
	case "ON", "1", "TRUE", "YES", "Y":
		return true
	}
	return false
}

func isaOptionList() string {
	var s []string
	for _, f := range ISAFlags {
		s = append(s, f.Option)
	}
	return strings.Join(s, ", ")
}

// Nearest returns the candidate closest to s by edit distance, or "" when none is close.
func Nearest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		d := editDistance(s, c)
		// a misspelt first part of a longer name ("olres" for olares-one) is near it too
		if i := strings.Index(c, "-"); i > 0 {
			d = min(d, editDistance(s, c[:i]))
		}
		if d < bestD || (strings.HasPrefix(c, s) && s != "") {
			best, bestD = c, min(d, bestD)
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Marshal renders the target as YAML (what `llbuild target detect` writes).
func (t *Target) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// ResolveHost loads the host a check runs against: a built-in target by name, or a file. A file
// may describe only the host (schemaVersion, name and host, no build section): preflight needs
// nothing else. A file with a build section is validated in full.
func ResolveHost(name, file string) (*Target, error) {
	if file == "" || name != "" {
		return Resolve(name, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading target file: %w", err)
	}
	var t Target
	decodeErr := strictyaml.Decode(file, "target file", data, &t)
	if decodeErr != nil && !strictyaml.Partial(decodeErr) {
		return nil, decodeErr
	}
	if t.Build.Backend != "" || t.Build.ISA != nil || t.Build.Images != (Images{}) || len(t.Build.CMake) > 0 {
		if _, err := t.complete(file); err != nil || decodeErr != nil {
			return nil, errors.Join(decodeErr, err)
		}
		return &t, nil
	}
	t.Source = file
	errs := []error{decodeErr}
	if t.SchemaVersion != SchemaVersion {
		errs = append(errs, &FieldError{File: file, Field: "schemaVersion", Problem: fmt.Sprintf("is %d, this llbuild reads %d", t.SchemaVersion, SchemaVersion), Fix: fmt.Sprintf("set schemaVersion: %d", SchemaVersion)})
	}
	for i, f := range t.Host.CPU.Features {
		if p, err := ParseFeature(string(f)); err != nil || p != f {
			errs = append(errs, &FieldError{File: file, Field: fmt.Sprintf("host.cpu.features[%d]", i), Problem: fmt.Sprintf("unknown CPU feature %q", f), Fix: "use one of " + joinFeatures(KnownFeatures)})
		}
	}
	for _, e := range t.Host.fieldErrors() {
		e.File = file
		errs = append(errs, e)
	}
	if t.Host.CPU.Features == nil {
		errs = append(errs, &FieldError{File: file, Field: "host.cpu.features", Problem: "is missing", Fix: "list the CPU's features (llbuild target detect writes them), or write [] for a CPU with nothing beyond baseline x86-64"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &t, nil
}
