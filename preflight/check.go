package preflight

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/preflight/cudareq"
	"github.com/llbuild/llbuild/preflight/fatbin"
	"github.com/llbuild/llbuild/preflight/x86"
	"github.com/llbuild/llbuild/targets"
)

// Status is a check's outcome.
type Status string

// Outcomes.
const (
	OK      Status = "ok"
	Fail    Status = "would fail"
	Unknown Status = "unknown"
	// Dispatched is a CPU verdict: the instructions the CPU lacks lie only in functions an
	// ifunc resolver chooses at run time by CPUID (glibc's string functions, gcc's
	// target_clones), so they run only if the file's own CPU check picks them.
	Dispatched Status = "dispatched at run time"
)

// Check names.
const (
	CheckCPU         = "cpu"
	CheckGGMLVariant = "ggml-cpu-variant"
	CheckCUDADriver  = "cuda-driver"
	CheckCUDARuntime = "cuda-runtime"
	CheckGPUKernels  = "gpu-kernels"
	CheckSYCL        = "sycl-device"
	CheckLibraries   = "libraries"
)

// Verdict is one check's outcome for one subject (a file, a directory or an image).
type Verdict struct {
	Check    string   `json:"check"`
	Subject  string   `json:"subject"`
	Status   Status   `json:"status"`
	Reason   string   `json:"reason"`
	Fix      string   `json:"fix,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
}

// Input is what is being checked: ELF files and, for an image, its environment.
type Input struct {
	// Name says where the binaries came from (a bundle directory, an image reference).
	Name     string
	Binaries []*Binary
	// Env is an image's configured environment (NVIDIA_REQUIRE_CUDA, CUDA_VERSION, ...);
	// nil when the input is not an image.
	Env map[string]string
}

// Report is every verdict for one input against one host.
type Report struct {
	Input    string       `json:"input"`
	Host     targets.Host `json:"host"`
	HostName string       `json:"hostName"`
	GGML     []GGMLChoice `json:"ggml,omitempty"`
	Verdicts []Verdict    `json:"verdicts"`
	Binaries []*Binary    `json:"binaries"`
}

// ExitCode is 0 when every check passed (ok, or dispatched at run time), 1 when something
// would fail, 2 when nothing would fail but something could not be checked, or when there
// was nothing to check (no ELF file in the input).
func (r *Report) ExitCode() int {
	if len(r.Verdicts) == 0 {
		return 2
	}
	code := 0
	for _, v := range r.Verdicts {
		switch v.Status {
		case Fail:
			return 1
		case Unknown:
			code = 2
		}
	}
	return code
}

// Check runs every check of in against host. It is a pure function of its arguments.
func Check(host targets.Host, hostName string, in Input) *Report {
	bins := append([]*Binary(nil), in.Binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].Path < bins[j].Path })
	r := &Report{Input: in.Name, Host: host, HostName: hostName, Binaries: bins}
	fs := host.CPU.FeatureSet()
	ch := newCPUHost(fs)

	// ggml's loader picks one CPU variant per directory; the others never run.
	r.GGML = ggmlChoices(bins, fs)
	notLoaded := map[string]GGMLVariant{}
	for _, c := range r.GGML {
		for _, s := range c.Scores {
			// With nothing loadable every variant gets the instruction check: it says what
			// each one lacks.
			if c.Loaded != "" && s.File != c.Loaded {
				notLoaded[s.File] = s
			}
		}
		r.Verdicts = append(r.Verdicts, ggmlVerdict(c))
	}
	for _, b := range bins {
		if b.Code == nil && b.Machine == "x86-64" {
			continue // scanned for libraries and kernels only
		}
		if s, ok := notLoaded[b.Path]; ok && !b.GGMLForced {
			if v, judged := loadVerdict(b, ch, s); judged {
				r.Verdicts = append(r.Verdicts, v)
				continue
			}
			v := Verdict{Check: CheckCPU, Subject: b.Path, Status: OK}
			switch {
			case s.Variant == "(fallback)":
				v.Reason = "not loaded: ggml loads the plain libggml-cpu.so only when every variant scores 0"
			case s.Score == 0:
				v.Reason = fmt.Sprintf("not loaded: ggml scores the %s variant 0 here (the CPU lacks %s)", s.Variant, strings.Join(s.Missing, " "))
			default:
				v.Reason = fmt.Sprintf("not loaded: the %s variant scores %d, below the variant ggml picks", s.Variant, s.Score)
			}
			if s.Variant != "(fallback)" {
				v.Reason += "; what runs when ggml dlopens it to read that score (its constructors, ifunc resolvers and ggml_backend_score) needs nothing the CPU lacks"
			}
			r.Verdicts = append(r.Verdicts, v)
			continue
		}
		v := cpuVerdict(b, ch)
		if b.GGMLForced {
			v.Reason += "; GGML_BACKEND_PATH names it, so ggml loads it whatever it scores"
		}
		r.Verdicts = append(r.Verdicts, v)
	}
	r.Verdicts = append(r.Verdicts, libraryVerdicts(bins)...)
	r.Verdicts = append(r.Verdicts, cudaVerdicts(host, in, bins)...)
	r.Verdicts = append(r.Verdicts, kernelVerdicts(host, bins)...)
	r.Verdicts = append(r.Verdicts, syclVerdicts(host, bins)...)
	return r
}

// loadVerdict judges the code of a variant ggml does not pick that still runs: its loader
// dlopens every variant to call its ggml_backend_score, which runs the variant's
// constructors and ifunc resolvers as well (the plain libggml-cpu.so is only dlopened when
// it loads). judged is false when that code needs nothing the host lacks.
func loadVerdict(b *Binary, h cpuHost, s GGMLVariant) (v Verdict, judged bool) {
	if s.Variant == "(fallback)" || b.Code == nil {
		return v, false
	}
	c := b.Code
	v = Verdict{Check: CheckCPU, Subject: b.Path}
	need := c.LoadUses &^ x86.Unclassified
	missing := need & h.known &^ h.has
	var exts []string
	for _, in := range c.LoadExamples {
		exts = append(exts, fmt.Sprintf("%s %s+%#x in %s: %s  %s  needs %s", path.Base(b.Path), in.Section, in.Addr, in.Function, in.Bytes, in.Encoding, in.Needs))
	}
	const loads = "ggml's loader picks another variant, but it dlopens every variant to call its ggml_backend_score, which runs the variant's constructors and ifunc resolvers too"
	switch {
	case missing != 0:
		v.Status = Fail
		v.Reason = fmt.Sprintf("%s, and that code uses %s, which the CPU lacks: SIGILL while ggml loads its backends", loads, featureList(missing))
		v.Evidence = exts
		v.Fix = "build the variants' constructors (static initializers) and cpu-feats.cpp without the variant's ISA flags, as ggml's CMake does for cpu-feats.cpp"
	case c.LoadError != "":
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code could not be followed (%s)", loads, c.LoadError)
	case c.LoadIndirect > 0:
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code makes %d calls through function pointers, which preflight does not follow, so what they run is not known", loads, c.LoadIndirect)
	case c.LoadUses&x86.Unclassified != 0 || need&^h.known != 0:
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code has instructions whose needs are not known", loads)
		v.Evidence = exts
	default:
		return v, false
	}
	return v, true
}

// libraryVerdicts reports what the loader would not find: a DT_NEEDED library missing from
// every directory it searches, and an executable whose ggml is built to dlopen its CPU
// backend where none was found.
func libraryVerdicts(bins []*Binary) []Verdict {
	var out []Verdict
	for _, b := range bins {
		for _, lib := range b.NotFound {
			runpath := "no RUNPATH"
			if len(b.Runpath) > 0 {
				runpath = "RUNPATH " + strings.Join(b.Runpath, ":")
			}
			out = append(out, Verdict{Check: CheckLibraries, Subject: lib + " (needed by " + b.Path + ")", Status: Unknown,
				Reason: fmt.Sprintf("%s not found (%s, LD_LIBRARY_PATH, the system library directories), not checked", lib, runpath),
				Fix:    "name it with --binary, or check the directory it is installed in"})
		}
		if bs := b.Backends; bs != nil && bs.DL && !bs.CPUFound {
			out = append(out, Verdict{Check: CheckGGMLVariant, Subject: b.Path, Status: Unknown,
				Reason: fmt.Sprintf("its libggml.so is built with GGML_BACKEND_DL and no libggml-cpu*.so is in %s: the CPU backend comes from the GGML_BACKEND_DIR compiled into libggml.so, which preflight cannot read, so its instructions were not checked", strings.Join(bs.Dirs, " or ")),
				Fix:    "name the CPU backends with --binary (e.g. --binary /usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-cpu-*.so)"})
		}
	}
	return out
}

func ggmlVerdict(c GGMLChoice) Verdict {
	v := Verdict{Check: CheckGGMLVariant, Subject: c.Dir}
	var parts []string
	for _, s := range c.Scores {
		est := ""
		if s.Estimated {
			est = "~"
		}
		parts = append(parts, fmt.Sprintf("%s=%s%d", s.Variant, est, s.Score))
	}
	v.Evidence = []string{"scores: " + strings.Join(parts, " ")}
	if c.Loaded == "" {
		v.Status = Fail
		v.Reason = fmt.Sprintf("all %d libggml-cpu variants here score 0 on this CPU: ggml would load no CPU backend", len(c.Scores))
		v.Fix = "ship a variant the CPU can run (GGML_CPU_ALL_VARIANTS includes x64 and sse42)"
		return v
	}
	for _, s := range c.Scores {
		switch {
		case s.File != c.Loaded:
		case s.Variant == "(fallback)":
			v.Status = OK
			v.Reason = fmt.Sprintf("every variant scores 0 on this CPU, so ggml would load the plain %s", c.Loaded)
		default:
			v.Status = OK
			v.Reason = fmt.Sprintf("ggml would load %s (score %d)", path.Base(c.Loaded), s.Score)
		}
	}
	return v
}

// minDriverBranch is the first driver branch for each CUDA release (build-facts.md).
var minDriverBranch = map[string]int{
	"11.0": 450, "11.8": 520, "12.0": 525, "12.1": 530, "12.2": 535, "12.3": 545, "12.4": 550,
	"12.5": 555, "12.6": 560, "12.8": 570, "12.9": 575, "13.0": 580, "13.1": 590, "13.2": 595, "13.3": 610,
}

func nvidiaGPUs(h targets.Host) []targets.GPU {
	var out []targets.GPU
	for _, g := range h.GPUs {
		if g.Vendor == targets.VendorNVIDIA {
			out = append(out, g)
		}
	}
	return out
}

func cudaVerdicts(host targets.Host, in Input, bins []*Binary) []Verdict {
	var out []Verdict
	gpus := nvidiaGPUs(host)
	drv := cudareq.Driver{CUDA: host.Driver.CUDA, Version: host.Driver.Version}
	if in.Env != nil {
		reqs, err := cudareq.Requirements(in.Env)
		v := Verdict{Check: CheckCUDADriver, Subject: in.Name}
		switch {
		case err != nil:
			v.Status, v.Reason = Unknown, "reading the image's CUDA requirement: "+err.Error()
		case len(reqs) == 0:
			v = Verdict{}
		case len(gpus) == 0:
			v.Status, v.Reason = Unknown, "the image requires "+firstTerms(reqs)+" but the host has no NVIDIA GPU"
		case drv.CUDA == "" || drv.Version == "":
			v.Status, v.Reason = Unknown, "the image requires "+firstTerms(reqs)+" but the host's driver version or CUDA cap is unknown"
		default:
			var devs []cudareq.Device
			for _, g := range gpus {
				devs = append(devs, cudareq.Device{Arch: g.ComputeCapability, Brand: g.Brand})
			}
			var undecided *cudareq.UndecidedError
			err := cudareq.Check(reqs, drv, devs)
			switch {
			case errors.As(err, &undecided):
				v.Status = Unknown
				v.Reason = fmt.Sprintf("the image requires %s; with driver %s (CUDA %s) the outcome depends on GPU %d's %s, which the host description does not give: %s",
					firstTerms(reqs), drv.Version, drv.CUDA, undecided.Device, undecided.Field, missingGPUField(undecided.Device, undecided.Field))
			case err != nil:
				v.Status, v.Reason = Fail, cudareq.CLIMessage(err)
				v.Fix = driverFix(reqs, drv)
			default:
				v.Status = OK
				v.Reason = fmt.Sprintf("driver %s (CUDA %s) meets %s", drv.Version, drv.CUDA, firstTerms(reqs))
			}
		}
		if v.Check != "" {
			out = append(out, v)
		}
	}
	for _, b := range bins {
		major := b.CUDARuntimeMajor()
		if major == 0 {
			continue
		}
		v := Verdict{Check: CheckCUDARuntime, Subject: b.Path}
		dmaj, _, ok := splitVersion(drv.CUDA)
		switch {
		case len(gpus) == 0:
			v.Status, v.Reason = Unknown, fmt.Sprintf("needs CUDA %d runtime libraries but the host has no NVIDIA GPU", major)
		case !ok:
			v.Status, v.Reason = Unknown, fmt.Sprintf("needs a driver for CUDA %d.x; the host's driver CUDA cap is unknown", major)
		case dmaj < major:
			v.Status = Fail
			v.Reason = fmt.Sprintf("links CUDA %d (%s) but driver %s runs CUDA %s: cudaErrorInsufficientDriver (CUDA error 35)", major, cudaNeed(b), host.Driver.Version, drv.CUDA)
			v.Fix = fmt.Sprintf("install a driver of branch %d or newer, or build against CUDA %d", minDriverBranch[fmt.Sprintf("%d.0", major)], dmaj)
		default:
			v.Status = OK
			v.Reason = fmt.Sprintf("links CUDA %d (%s); driver CUDA %s", major, cudaNeed(b), drv.CUDA)
		}
		out = append(out, v)
	}
	return out
}

// missingGPUField says which host-description field to add for a GPU fact.
func missingGPUField(idx int, field string) string {
	if field == "brand" {
		return fmt.Sprintf("add gpus[%d].brand (nvidia-container-cli's name for nvidia-smi -q's Product Brand: geforce, nvidia, tesla, quadro, nvidiartx, ...; llbuild target detect fills it in)", idx)
	}
	return fmt.Sprintf("add gpus[%d].computeCapability (nvidia-smi --query-gpu=compute_cap)", idx)
}

func cudaNeed(b *Binary) string {
	for _, n := range b.Needed {
		if strings.HasPrefix(n, "libcudart.so.") || strings.HasPrefix(n, "libcublas") {
			return n
		}
	}
	return ""
}

func firstTerms(reqs []string) string {
	var out []string
	for _, r := range reqs {
		first, rest, _ := strings.Cut(r, " ")
		if rest != "" {
			first += " (or its driver-branch terms)"
		}
		out = append(out, first)
	}
	return strings.Join(out, " and ")
}

func driverFix(reqs []string, drv cudareq.Driver) string {
	for _, r := range reqs {
		first, _, _ := strings.Cut(r, " ")
		if v, ok := strings.CutPrefix(first, "cuda>="); ok {
			fix := fmt.Sprintf("use an image built on CUDA %s or older (e.g. nvidia/cuda:%s.x-runtime), or NVIDIA_DISABLE_REQUIRE=1 with the image's forward-compatibility libraries on a datacenter GPU", drv.CUDA, drv.CUDA)
			if b, ok := minDriverBranch[v]; ok {
				fix = fmt.Sprintf("install driver branch R%d or newer (CUDA %s), or %s", b, v, fix)
			} else {
				fix = fmt.Sprintf("install a driver that runs CUDA %s, or %s", v, fix)
			}
			return fix
		}
	}
	return "use an image whose NVIDIA_REQUIRE_CUDA this host meets"
}

func splitVersion(s string) (major, minor int, ok bool) {
	a, b, _ := strings.Cut(s, ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ma, mi, true
}

func kernelVerdicts(host targets.Host, bins []*Binary) []Verdict {
	var out []Verdict
	gpus := nvidiaGPUs(host)
	for _, b := range bins {
		if len(b.Fatbin) == 0 {
			if b.FatbinError != "" {
				out = append(out, Verdict{Check: CheckGPUKernels, Subject: b.Path, Status: Unknown,
					Reason: "could not list the .nv_fatbin section: " + b.FatbinError})
			}
			continue
		}
		if len(gpus) == 0 {
			out = append(out, Verdict{Check: CheckGPUKernels, Subject: b.Path, Status: Unknown,
				Reason: "has CUDA code (" + fatbinArchs(b.Fatbin) + ") but the host has no NVIDIA GPU"})
			continue
		}
		for i, g := range gpus {
			out = append(out, kernelVerdict(b, i, g, host.Driver.CUDA))
		}
	}
	return out
}

func fatbinArchs(es []fatbin.Entry) string {
	seen := map[string]bool{}
	var names []string
	for _, e := range es {
		if n := e.Arch(); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return strings.Join(names, " ")
}

// kernelVerdict judges each fat binary container with kernels on its own: the driver loads
// every container as a module, and a module without code for the GPU fails however many
// other modules have it. A container whose payloads define no kernel needs nothing.
func kernelVerdict(b *Binary, idx int, g targets.GPU, driverCUDA string) Verdict {
	v := Verdict{Check: CheckGPUKernels, Subject: fmt.Sprintf("%s on GPU %d", b.Path, idx)}
	dev, err := fatbin.ParseCC(g.ComputeCapability)
	if err != nil {
		v.Status, v.Reason = Unknown, fmt.Sprintf("GPU %d (%s): compute capability unknown", idx, g.Name)
		return v
	}
	blobs := fatbin.Blobs(b.Fatbin)
	var ok, unknown, fail []blobVerdict
	for i, bl := range blobs {
		names, known := bl.Kernels()
		if known && len(names) == 0 {
			continue
		}
		bv := judgeBlob(bl, names, known, dev, driverCUDA)
		bv.index, bv.kernels, bv.known = i, names, known
		if b.FatbinError != "" && i == len(blobs)-1 && bv.status == Fail {
			// The listing stopped inside or after this container: its missing entries may
			// hold the code.
			bv.status = Unknown
		}
		switch bv.status {
		case OK:
			ok = append(ok, bv)
		case Fail:
			fail = append(fail, bv)
		default:
			unknown = append(unknown, bv)
		}
	}
	reasons := func(bs []blobVerdict) string {
		if len(blobs) == 1 {
			return bs[0].reason
		}
		return groupedReasons(bs, len(blobs))
	}
	switch {
	case len(fail) > 0:
		v.Status, v.Reason, v.Fix = Fail, reasons(fail), fail[0].fix
	case len(unknown) > 0:
		v.Status, v.Reason = Unknown, reasons(unknown)
	case len(ok) > 0:
		v.Status, v.Reason = OK, reasons(ok)
	default:
		v.Status, v.Reason = OK, "its fat binaries define no kernels"
	}
	if b.FatbinError != "" && v.Status != Fail {
		v.Status = Unknown
		v.Reason += "; the .nv_fatbin listing stopped early (" + b.FatbinError + "): containers past that point were not read"
	}
	return v
}

type blobVerdict struct {
	status      Status
	reason, fix string
	// the container: its index, its kernels and whether they could be read
	index   int
	kernels []string
	known   bool
}

// groupedReasons says the verdicts of the containers of a library of n, one clause per
// distinct reason, naming its containers as ranges: a CUDA library has one container per
// translation unit, 141 in ggml-cuda, mostly with the same verdict. bs are the containers
// with kernels (or unread ones); those without kernels need nothing and are left out.
func groupedReasons(bs []blobVerdict, n int) string {
	var order []string
	groups := map[string][]blobVerdict{}
	for _, b := range bs {
		if _, seen := groups[b.reason]; !seen {
			order = append(order, b.reason)
		}
		groups[b.reason] = append(groups[b.reason], b)
	}
	var out []string
	for _, r := range order {
		g := groups[r]
		var idx []int
		var names []string
		unread := 0
		for _, b := range g {
			idx = append(idx, b.index)
			if !b.known {
				unread++
			}
			names = append(names, b.kernels...)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		var what []string
		switch {
		case len(names) == 0:
		case len(names) <= 3:
			what = append(what, kernelList(names, true))
		default:
			what = append(what, plural(len(names), "kernel", "kernels"))
		}
		switch {
		case unread == len(g):
			what = append(what, "kernels unknown: compressed")
		case unread > 0:
			what = append(what, fmt.Sprintf("%d compressed, kernels unknown", unread))
		}
		var which string
		switch {
		case len(order) == 1 && len(g) > 3 && len(g) < n:
			which = fmt.Sprintf("all %d containers with kernels, of %d", len(g), n)
			what = append(what, "the other "+plural(n-len(g), "defines", "define")+" none")
		case len(order) == 1 && len(g) == n:
			which = fmt.Sprintf("all %d containers", n)
		case len(g) == 1:
			which = fmt.Sprintf("container %s of %d", indexRanges(idx), n)
		default:
			which = fmt.Sprintf("containers %s of %d", indexRanges(idx), n)
		}
		out = append(out, fmt.Sprintf("%s (%s): %s", which, strings.Join(what, "; "), r))
	}
	return strings.Join(out, "; ")
}

// plural is "1 one" or "N many".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// indexRanges writes ascending 0-based indices as 1-based ranges: "1-3, 7, 9-12".
func indexRanges(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]+1))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i]+1, idx[j]+1))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func kernelList(names []string, known bool) string {
	switch {
	case !known:
		return "kernels unknown: compressed"
	case len(names) > 3:
		return fmt.Sprintf("%s and %d more kernels", strings.Join(names[:3], ", "), len(names)-3)
	}
	return strings.Join(names, ", ")
}

func judgeBlob(bl fatbin.Blob, names []string, known bool, dev fatbin.CC, driverCUDA string) blobVerdict {
	e, found := bl.Select(dev)
	switch {
	case found && e.Kind == fatbin.Cubin:
		return blobVerdict{status: OK, reason: fmt.Sprintf("%s cubin runs on compute capability %s", e.Arch(), dev)}
	case found:
		maj, min, ok := e.MinDriverCUDA()
		dmaj, dmin, dok := splitVersion(driverCUDA)
		switch {
		case !ok || !dok:
			return blobVerdict{status: Unknown, reason: fmt.Sprintf("no cubin for %s; the driver would JIT %s PTX, and whether driver CUDA %q can JIT PTX ISA %d.%d is unknown", dev, e.Arch(), driverCUDA, e.VersionMajor, e.VersionMinor)}
		case dmaj > maj || (dmaj == maj && dmin >= min):
			return blobVerdict{status: OK, reason: fmt.Sprintf("no cubin for %s; the driver JIT-compiles %s PTX (ISA %d.%d) at first start", dev, e.Arch(), e.VersionMajor, e.VersionMinor)}
		}
		return blobVerdict{status: Fail,
			reason: fmt.Sprintf("no cubin for compute capability %s, and the PTX the driver would JIT, %s (PTX ISA %d.%d needs CUDA %d.%d), is newer than driver CUDA %s: CUDA error 222 (the provided PTX was compiled with an unsupported toolchain)", dev, e.Arch(), e.VersionMajor, e.VersionMinor, maj, min, driverCUDA),
			fix:    "add a cubin for this GPU (CMAKE_CUDA_ARCHITECTURES=" + strconv.Itoa(dev.SM()) + "), build with an older toolkit, or update the driver"}
	case !known:
		return blobVerdict{status: Unknown, reason: fmt.Sprintf("nothing for compute capability %s among %s, and its payloads are compressed, so whether it defines kernels (and fails with CUDA error 209) was not read", dev, fatbinArchs(bl.Entries))}
	}
	fix := "build with CMAKE_CUDA_ARCHITECTURES=" + strconv.Itoa(dev.SM())
	if dev.Major == 12 {
		fix += " (ggml turns 12X into 12Xa, which runs only on compute capability 12.X)"
	}
	return blobVerdict{status: Fail,
		reason: fmt.Sprintf("no kernel for compute capability %s among %s: CUDA error 209 (no kernel image is available for execution on the device)", dev, fatbinArchs(bl.Entries)),
		fix:    fix}
}

func syclVerdicts(host targets.Host, bins []*Binary) []Verdict {
	var out []Verdict
	var intel []targets.GPU
	for _, g := range host.GPUs {
		if g.Vendor == targets.VendorIntel {
			intel = append(intel, g)
		}
	}
	for _, b := range bins {
		if !b.SYCL && len(b.SYCLDevices) == 0 {
			continue
		}
		if len(b.SYCLDevices) == 0 {
			out = append(out, Verdict{Check: CheckSYCL, Subject: b.Path, Status: Unknown,
				Reason: "has SYCL device code, but no ahead-of-time device name was found in it"})
			continue
		}
		devs := strings.Join(b.SYCLDevices, " ")
		if len(intel) == 0 {
			out = append(out, Verdict{Check: CheckSYCL, Subject: b.Path, Status: Unknown,
				Reason: "has SYCL code compiled ahead of time for " + devs + " but the host has no Intel GPU"})
			continue
		}
		for i, g := range intel {
			v := Verdict{Check: CheckSYCL, Subject: fmt.Sprintf("%s on Intel GPU %d", b.Path, i)}
			want := g.SYCLDevice
			if want == "" {
				want = targets.SYCLDeviceForPCI(g.PCIID)
			}
			switch {
			case want == "":
				v.Status, v.Reason = Unknown, fmt.Sprintf("AOT devices %s; the GPU's device name (PCI %s) is unknown", devs, g.PCIID)
			case contains(b.SYCLDevices, want):
				v.Status, v.Reason = OK, fmt.Sprintf("compiled ahead of time for %s, the GPU's device", want)
			default:
				v.Status = Fail
				v.Reason = fmt.Sprintf("compiled ahead of time for %s, not this GPU's %s (PCI %s)", devs, want, g.PCIID)
				v.Fix = "build with -DGGML_SYCL_DEVICE_ARCH=" + want
			}
			out = append(out, v)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
