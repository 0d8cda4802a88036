package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/digest"
	"github.com/llbuild/llbuild/internal/shellquote"

	"github.com/llbuild/llbuild/patches"
	"github.com/llbuild/llbuild/recipes"
	"github.com/llbuild/llbuild/targets"
)

// WheelPlanSchemaVersion is the version of the WheelPlan's JSON form.
const WheelPlanSchemaVersion = 1

// WheelPlan is a build of the llama-cpp-python wheel, derived from the Plan of the wheel recipe:
// the same images, sources, patches and ISA/GPU flags, expressed the way a Python build takes
// them. scikit-build-core reads CMake's arguments from the CMAKE_ARGS environment variable and
// builds every target, so a wheel has no build targets of its own.
type WheelPlan struct {
	SchemaVersion int `json:"schemaVersion"`
	// Plan is the resolved wheel recipe: Source is llama-cpp-python, Vendor the llama.cpp that
	// replaces its vendor/llama.cpp, Patches the series applied to that llama.cpp.
	Plan *Plan `json:"plan"`
	// Host is the target's host, which the built wheel's libraries are checked against.
	Host targets.Host `json:"host"`
	// Python is the interpreter version that runs the build ("3.12"); empty means the
	// build environment's python3.
	Python string `json:"python,omitempty"`
	// CMakeArgs are the arguments that go into CMAKE_ARGS, in order, with SourceDirToken for
	// the package source.
	CMakeArgs []string `json:"cmakeArgs"`
	// Env is the build environment besides CMAKE_ARGS; SOURCE_DATE_EPOCH among it.
	Env map[string]string `json:"env"`
	// VendorDir is where the vendored llama.cpp sits in the package source.
	VendorDir string `json:"vendorDir"`
	// VersionFile holds the package's __version__, to which the local label is added.
	VersionFile string `json:"versionFile"`
	// LocalVersion is the PEP 440 local version label saying what the wheel was built for,
	// e.g. "cu131.sm86.avx2" or "cpu.avx2".
	LocalVersion string `json:"localVersion"`
	// Variant is the index the wheel belongs in (cu131, cpu, sycl): the label's first part.
	Variant string `json:"variant"`
	// Bindings are the package's ctypes binding files checked against the vendored headers.
	Bindings []Binding `json:"bindings"`
	// CUDAArchitectures are the fatbin architectures the wheel must hold, exactly (ggml's
	// names: 86, 90, 120a, 90-virtual); empty for other backends.
	CUDAArchitectures []string `json:"cudaArchitectures,omitempty"`

	// Hash names everything built from this plan: sha256 of its JSON with Hash empty.
	Hash string `json:"hash"`
}

// Binding is a Python file that binds C functions through ctypes and the headers, relative
// to the vendored llama.cpp, that must declare them.
type Binding struct {
	File    string   `json:"file"`
	Headers []string `json:"headers"`
}

// LlamaCppPythonBindings are llama-cpp-python's ctypes bindings and the llama.cpp headers
// that declare what they bind.
var LlamaCppPythonBindings = []Binding{
	{File: "llama_cpp/llama_cpp.py", Headers: []string{"include/llama.h"}},
	{File: "llama_cpp/mtmd_cpp.py", Headers: []string{"tools/mtmd/mtmd.h", "tools/mtmd/mtmd-helper.h"}},
}

// WheelOptions are the choices of a wheel build beyond target and recipe.
type WheelOptions struct {
	Options
	// Python is the interpreter version ("3.12"); empty means python3.
	Python string
	// Commit replaces the recipe's llama-cpp-python commit when set (a full 40-hex id).
	Commit string
}

var pythonVersion = regexp.MustCompile(`^3\.[0-9]{1,2}$`)

// ResolveWheel turns a target, the wheel recipe, the patch series and the recipe it vendors
// (server) into a WheelPlan. It reports every problem it finds together.
func ResolveWheel(t *targets.Target, r *recipes.Recipe, series []patches.Patch, vendor *recipes.Recipe, opts WheelOptions) (*WheelPlan, error) {
	var errs []error
	if r.Source.Vendor == "" {
		errs = append(errs, fmt.Errorf("recipe %s vendors no llama.cpp (source.vendor is empty): a wheel is built against the server recipe's llama.cpp; set source.vendor: server", r.Name))
	}
	if opts.Python != "" && !pythonVersion.MatchString(opts.Python) {
		errs = append(errs, fmt.Errorf("python version %q is not of the form 3.N (e.g. 3.12)", opts.Python))
	}
	if opts.Commit != "" {
		if err := recipes.ValidateCommit(opts.Commit); err != nil {
			errs = append(errs, fmt.Errorf("llama-cpp-python commit: %w", err))
		} else {
			rc := *r
			rc.Source.Commit = opts.Commit
			r = &rc
		}
	}
	p, err := Resolve(t, r, series, vendor, opts.Options)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	w := &WheelPlan{
		SchemaVersion: WheelPlanSchemaVersion,
		Plan:          p,
		Host:          t.Host,
		Python:        opts.Python,
		Env:           map[string]string{},
		VendorDir:     "vendor/llama.cpp",
		VersionFile:   "llama_cpp/__init__.py",
		Bindings:      append([]Binding(nil), LlamaCppPythonBindings...),
	}
	for i := 0; i < len(p.Configure); i++ {
		a := p.Configure[i]
		switch {
		case a == "-G" && i+1 < len(p.Configure):
			// scikit-build-core takes the generator from CMAKE_GENERATOR.
			w.Env["CMAKE_GENERATOR"] = p.Configure[i+1]
			i++
			continue
		case strings.HasPrefix(a, "-DCMAKE_BUILD_TYPE"), strings.HasPrefix(a, "-DCMAKE_INSTALL_PREFIX"):
			// scikit-build-core drops these from CMAKE_ARGS; it builds Release and installs into the wheel.
			continue
		}
		w.CMakeArgs = append(w.CMakeArgs, a)
	}
	w.CMakeArgs = append(w.CMakeArgs, wheelLayout...)
	for k, v := range p.Env {
		w.Env[k] = v
	}
	w.Env["SKBUILD_WHEEL_EXCLUDE"] = strings.Join(wheelExclude, ";")
	w.LocalVersion, w.Variant = localVersion(t, p)
	if p.CUDA != nil {
		w.CUDAArchitectures = append([]string(nil), p.CUDA.BuiltAs...)
	}
	h, err := w.computeHash()
	if err != nil {
		return nil, err
	}
	w.Hash = h
	return w, nil
}

// wheelLayout keeps what the build installs inside the package, once. llama.cpp's own install
// rules would put a second copy of every library into the wheel's top-level lib/ (site-packages/lib
// once pip installs it) and its headers into include/, and each library would go in three times
// (libllama.so, .so.0 and .so.0.0.N: a wheel is a zip file, which stores symlinks as copies), so
// a CUDA wheel carried libggml-cuda.so six times (257 MB for sm_90 alone). llama-cpp-python puts
// the install directories inside the package the same way for its Emscripten build. Libraries
// without a version are named by ctypes (libllama.so, libmtmd.so) and by each other alike.
var wheelLayout = []string{
	"-DCMAKE_INSTALL_LIBDIR=llama_cpp/lib",
	"-DCMAKE_INSTALL_BINDIR=llama_cpp/lib",
	"-DCMAKE_INSTALL_INCLUDEDIR=llama_cpp/include",
	"-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON",
}

// wheelExclude (scikit-build-core's wheel.exclude, gitignore patterns) leaves out what llama.cpp's
// own install rules add that the package never loads: headers, CMake and pkg-config files (whose
// paths name the build's temporary install prefix, so no two wheels were alike) and
// libllama-common (llama.cpp's tools library; no binding loads it, and it had no RUNPATH).
var wheelExclude = []string{
	"llama_cpp/include/**",
	"llama_cpp/lib/cmake/**",
	"llama_cpp/lib/pkgconfig/**",
	"llama_cpp/lib/libllama-common.so*",
}

// localVersion names what a build is for, as a PEP 440 local version label (normalized:
// lower-case alphanumerics separated by dots), and the variant index it belongs in.
func localVersion(t *targets.Target, p *Plan) (label, variant string) {
	var parts []string
	switch {
	case p.CUDA != nil:
		// Resolve made p.CUDA only from a decoded build.cuda.
		d, _ := t.Build.CUDA.Decoded()
		variant = "cu"
		for _, n := range d.Toolkit[:min(2, len(d.Toolkit))] {
			variant += fmt.Sprint(n)
		}
		parts = append(parts, variant)
		for _, a := range p.CUDA.BuiltAs {
			if v, ok := strings.CutSuffix(a, "-virtual"); ok {
				parts = append(parts, "compute"+v)
			} else {
				parts = append(parts, "sm"+a)
			}
		}
	case p.SYCL != nil:
		variant = "sycl"
		parts = append(parts, variant, alnum(p.SYCL.DeviceArch))
	default:
		variant = "cpu"
		parts = append(parts, variant)
	}
	parts = append(parts, isaLabel(t.Build.ISA)...)
	return strings.Join(parts, "."), variant
}

// isaLabel is the highest x86 level the build compiles in, then the extensions beyond it that
// set builds of one level apart.
func isaLabel(isa map[string]bool) []string {
	var out []string
	switch {
	case isa["GGML_AVX512"]:
		out = append(out, "avx512")
	case isa["GGML_AVX2"]:
		out = append(out, "avx2")
	case isa["GGML_AVX"]:
		out = append(out, "avx")
	case isa["GGML_SSE42"]:
		out = append(out, "sse42")
	default:
		out = append(out, "x64")
	}
	if isa["GGML_AVX_VNNI"] || isa["GGML_AVX512_VNNI"] {
		out = append(out, "vnni")
	}
	if isa["GGML_AVX512_VBMI"] {
		out = append(out, "vbmi")
	}
	if isa["GGML_AVX512_BF16"] {
		out = append(out, "bf16")
	}
	if isa["GGML_AMX_TILE"] || isa["GGML_AMX_INT8"] || isa["GGML_AMX_BF16"] {
		out = append(out, "amx")
	}
	return out
}

func alnum(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// WithArchitectures returns a copy of a CUDA target that builds archs instead of its own
// architectures, validated again: an architecture the target's toolkit cannot compile or that
// does not run on the target's GPUs is an error.
func WithArchitectures(t *targets.Target, archs []string) (*targets.Target, error) {
	if t.Build.Backend != targets.BackendCUDA || t.Build.CUDA == nil {
		return nil, fmt.Errorf("target %s builds for %s, not CUDA: --arch applies to CUDA targets only", t.Name, t.Build.Backend)
	}
	c, err := t.WithCUDAArchitectures(archs)
	if err != nil {
		return nil, fmt.Errorf("--arch %s for target %s: %w", strings.Join(archs, ","), t.Name, err)
	}
	return c, nil
}

// CMakeArgsEnv renders CMakeArgs as the CMAKE_ARGS value for a package source at src: each
// argument shell-quoted, as scikit-build-core splits the variable with shlex.
func (w *WheelPlan) CMakeArgsEnv(src string) string {
	q := make([]string, len(w.CMakeArgs))
	for i, a := range w.CMakeArgs {
		q[i] = shellquote.Quote(strings.ReplaceAll(a, SourceDirToken, src))
	}
	return strings.Join(q, " ")
}

// Interpreter is the Python program that runs the build: python3.N, or python3.
func (w *WheelPlan) Interpreter() string {
	if w.Python == "" {
		return "python3"
	}
	return "python" + w.Python
}

// ShortHash is the first 12 hex digits of the plan hash.
func (w *WheelPlan) ShortHash() string { return w.Hash[:12] }

// JSON renders the plan as indented JSON with a trailing newline.
func (w *WheelPlan) JSON() []byte {
	b, _ := json.MarshalIndent(w, "", "  ")
	return append(b, '\n')
}

func (w *WheelPlan) computeHash() (string, error) {
	c := *w
	c.Hash = ""
	if w.Plan != nil {
		// as in the plan's own hash: the series name follows from the patches
		inner := *w.Plan
		inner.Series = ""
		c.Plan = &inner
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	return digest.SHA256Hex(b), nil
}

var (
	ctypesBinding = regexp.MustCompile(`@ctypes_function\(\s*["'](\w+)["']`)
	// Older llama-cpp-python set each function's types on the library object.
	libAttribute = regexp.MustCompile(`\b_lib\.(\w+)\.(?:argtypes|restype)\b`)
	cDeclaration = regexp.MustCompile(`\b([A-Za-z_]\w*)\s*\(`)
)

// BoundFunctions returns the C functions a ctypes binding file binds
// (@ctypes_function("name", ...), or _lib.name.argtypes = ... in older files), sorted and
// without repeats.
func BoundFunctions(py string) []string {
	seen := map[string]bool{}
	var out []string
	for _, re := range []*regexp.Regexp{ctypesBinding, libAttribute} {
		for _, m := range re.FindAllStringSubmatch(py, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	sort.Strings(out)
	return out
}

// MissingFunctions returns the functions of bound that none of the headers declares. It
// reads names, not signatures: a function whose parameters changed passes.
func MissingFunctions(bound []string, headers ...string) []string {
	declared := map[string]bool{}
	for _, h := range headers {
		for _, m := range cDeclaration.FindAllStringSubmatch(stripComments(h), -1) {
			declared[m[1]] = true
		}
	}
	var missing []string
	for _, b := range bound {
		if !declared[b] {
			missing = append(missing, b)
		}
	}
	return missing
}

var cComment = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)

// stripComments drops C comments, where removed functions are often still named.
func stripComments(s string) string { return cComment.ReplaceAllString(s, "") }

// BindingError says that the package binds functions the vendored llama.cpp does not declare:
// the pinned llama-cpp-python was made for another llama.cpp.
type BindingError struct {
	Package, Vendor string
	// Missing maps each binding file to the functions its headers lack.
	Missing map[string][]string
}

func (e *BindingError) Error() string {
	files := make([]string, 0, len(e.Missing))
	for f := range e.Missing {
		files = append(files, f)
	}
	sort.Strings(files)
	var parts []string
	n := 0
	for _, f := range files {
		n += len(e.Missing[f])
		names := e.Missing[f]
		if len(names) > 12 {
			names = append(append([]string(nil), names[:12]...), fmt.Sprintf("and %d more", len(names)-12))
		}
		parts = append(parts, f+": "+strings.Join(names, ", "))
	}
	return fmt.Sprintf("llama-cpp-python %s cannot be built against llama.cpp %s: it binds %d functions the vendored headers do not declare (%s); pin a llama-cpp-python commit whose vendor/llama.cpp is close to %s, or move the server recipe to the llama.cpp this one was made for",
		short12(e.Package), short12(e.Vendor), n, strings.Join(parts, "; "), short12(e.Vendor))
}

func short12(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

var versionAssign = regexp.MustCompile(`(?m)^(__version__\s*=\s*)(["'])([^"'+]+)(\+[^"']*)?(["'])`)

// StampVersion adds the local version label to the __version__ assignment of a version file
// (replacing any label already there) and returns the new file and the full version.
func StampVersion(src, label string) (string, string, error) {
	m := versionAssign.FindStringSubmatchIndex(src)
	if m == nil {
		return "", "", errors.New(`no __version__ = "..." assignment to add the local version label to`)
	}
	public := src[m[6]:m[7]]
	version := public
	if label != "" {
		version += "+" + label
	}
	out := src[:m[0]] + src[m[2]:m[3]] + src[m[4]:m[5]] + version + src[m[10]:m[11]] + src[m[1]:]
	return out, version, nil
}
