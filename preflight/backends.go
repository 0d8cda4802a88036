package preflight

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/llbuild/llbuild/manifest"
	"github.com/llbuild/llbuild/targets"
)

// gpuBackends are the ggml backends that drive each vendor's GPUs, in the order ggml's
// loader tries them (ggml_backend_load_all).
var gpuBackends = map[targets.Vendor][]string{
	targets.VendorNVIDIA: {"cuda", "vulkan"},
	targets.VendorIntel:  {"sycl", "vulkan", "opencl"},
	"amd":                {"hip", "vulkan"},
}

// gpuRuntimes are libraries only a build for GPUs links: a file that needs one says the input
// was built to drive that vendor's GPUs.
var gpuRuntimes = []string{"libcudart.so", "libcublas.so", "libamdhip64.so", "libhipblas.so", "libsycl.so", "libvulkan.so", "libOpenCL.so"}

// dlGGML returns the libggml.so among bins that is a GGML_BACKEND_DL build: it links no CPU
// backend and dlopens every backend at start. nil when there is none, or ggml links its
// backends (or is linked statically into the server).
func dlGGML(bins []*Binary) *Binary {
	for _, b := range bins {
		if !strings.HasPrefix(path.Base(b.Path), "libggml.so") {
			continue
		}
		links := false
		for _, n := range b.Needed {
			links = links || strings.HasPrefix(n, "libggml-cpu")
		}
		if !links {
			return b
		}
	}
	return nil
}

// backendVerdicts proves, for a GGML_BACKEND_DL build, that ggml loads a backend for each
// device of the host: the CPU variant its loader would pick (choices), or the backend that
// drives each GPU. With no backend for the CPU the server never serves: llama.cpp stops with
// "no backends are loaded". Inputs read from the machine's own files (ReadFiles) are judged by
// libraryVerdicts instead, since there the GGML_BACKEND_DIR compiled into libggml.so may hold
// backends preflight was not given.
func backendVerdicts(host targets.Host, bins []*Binary, choices []GGMLChoice) []Verdict {
	ggml := dlGGML(bins)
	if ggml == nil {
		return nil
	}
	for _, b := range bins {
		if b.Backends != nil {
			return nil
		}
	}
	fs := host.CPU.FeatureSet()
	// Once a search found backends, files elsewhere lie where ggml does not look; with none
	// found by a search, each directory stands for the GGML_BACKEND_DIR compiled into
	// libggml.so, as ggmlChoices scores it.
	anySearch := false
	for _, b := range bins {
		anySearch = anySearch || b.GGMLSearch != ""
	}
	searched := func(label string, forced bool) bool {
		return !anySearch || forced || strings.HasPrefix(label, searchLabel)
	}
	// what ggml would load: the CPU variant of a search, a plain CPU backend, or a GPU backend
	// its search finds or GGML_BACKEND_PATH names (loaded only if it does not score 0)
	var cpu, cpuHow string
	for _, c := range choices {
		if c.Loaded != "" && searched(c.Dir, false) {
			cpu, cpuHow = c.Loaded, "the variant that scores highest on this CPU"
			break
		}
	}
	loaded := map[string][]string{} // backend -> files
	var found []string
	for _, b := range bins {
		name, ok := ggmlBackendFile(path.Base(b.Path))
		if !ok || !searched(b.GGMLSearch, b.GGMLForced) {
			continue
		}
		found = append(found, b.Path)
		if b.GGMLForced {
			if v := b.GGMLVariant(); v != "" {
				flags, known := ggmlVariantFlags[v]
				if !known {
					flags = flagsFromCode(b)
				}
				if s, _ := GGMLScore(flags, fs); s == 0 {
					continue // ggml_backend_load refuses a backend that scores 0
				}
			}
			if name == "cpu" && (cpu == "" || cpu == b.Path) {
				cpu, cpuHow = b.Path, "GGML_BACKEND_PATH names it"
			}
		}
		if name == "cpu" && cpu == "" && b.GGMLVariant() == "" {
			cpu, cpuHow = b.Path, "the plain CPU backend"
		}
		loaded[name] = append(loaded[name], b.Path)
	}
	var out []Verdict
	v := Verdict{Check: CheckGGMLBackends, Subject: "CPU"}
	if host.CPU.Model != "" {
		v.Subject = "CPU (" + host.CPU.Model + ")"
	}
	switch {
	case cpu != "":
		v.Status, v.Reason = OK, fmt.Sprintf("ggml would load %s (%s)", cpu, cpuHow)
	case len(loaded["cpu"]) > 0:
		v.Status = Fail
		v.Reason = fmt.Sprintf("%s dlopens its backends (GGML_BACKEND_DL) and no CPU backend would load: every variant scores 0 on this CPU; llama.cpp stops with \"no backends are loaded\"", ggml.Path)
		v.Evidence = loaded["cpu"]
		v.Fix = "ship a variant the CPU can run (GGML_CPU_ALL_VARIANTS includes x64 and sse42)"
	default:
		v.Status = Fail
		v.Reason = fmt.Sprintf("%s dlopens its backends (GGML_BACKEND_DL) and no CPU backend (libggml-cpu*.so) is where its loader looks (beside the executable, in the working directory, the file GGML_BACKEND_PATH names): llama.cpp stops with \"no backends are loaded\"", ggml.Path)
		v.Fix = "bundle the backends with the server (llbuild bundle --image takes them out of the image), or name them with --binary"
	}
	out = append(out, v)
	gpuBuild := false
	for _, b := range bins {
		if name, ok := ggmlBackendFile(path.Base(b.Path)); ok && name != "cpu" && name != "blas" && name != "rpc" {
			gpuBuild = true
		}
		for _, n := range append(append([]string(nil), b.Needed...), b.SystemLibs...) {
			for _, r := range gpuRuntimes {
				gpuBuild = gpuBuild || strings.HasPrefix(n, r)
			}
		}
	}
	for i, g := range host.GPUs {
		v := Verdict{Check: CheckGGMLBackends, Subject: fmt.Sprintf("GPU %d (%s %s)", i, g.Vendor, g.Name)}
		var files []string
		for _, name := range gpuBackends[g.Vendor] {
			files = append(files, loaded[name]...)
		}
		switch {
		case len(files) > 0:
			v.Status, v.Reason = OK, "ggml would load "+strings.Join(files, " and ")
		case gpuBuild:
			v.Status = Fail
			v.Reason = fmt.Sprintf("the input is built for GPUs but no backend that drives a %s GPU (libggml-%s.so) would load: the server would run on the CPU alone", g.Vendor, strings.Join(gpuBackends[g.Vendor], ".so, libggml-"))
			v.Fix = "bundle the GPU backend with the server (it lies beside llama-server in upstream's images)"
		default:
			v.Status, v.Reason = OK, "a CPU build: no backend drives this GPU, which the server leaves unused"
		}
		out = append(out, v)
	}
	return out
}

// BackendsLoad checks, before the server of the bundle at dir starts on this machine, that
// ggml would load a backend for each of its devices (the ggml-backends verdicts of Check): a
// server whose ggml finds none stops with "no backends are loaded", which a supervisor would
// only restart. It reads ggml's files' facts alone, no code, so it takes a moment; a CPU variant
// whose name ggml's list does not know is scored as baseline x86-64 then. The error names
// every device without a backend and why.
//
// It also warns when the GGML_BACKEND_DIR compiled into the bundle's libggml.so (the image's
// directory, server.ggml.compiledDir) holds backends on this machine: ggml searches it before
// the bundle's own, and of two variants that score the same it loads the first it met, so the
// server would run this machine's backend rather than the bundle's.
func BackendsLoad(ctx context.Context, dir string, log *slog.Logger) error {
	// ggml's own files say all this needs (the GPU runtimes a GPU backend links are in its
	// DT_NEEDED), and a CUDA bundle's other libraries are gigabytes of kernels
	ggmlFiles := func(f manifest.File) bool {
		return f.Kind == manifest.KindExecutable || strings.HasPrefix(path.Base(f.Path), "libggml")
	}
	bins, err := readBundle(ctx, dir, func(string) bool { return false }, ggmlFiles)
	if err != nil {
		return err
	}
	if m, err := manifest.Load(dir); err == nil && m.Server.GGML != nil && m.Server.GGML.CompiledDir != "" {
		var here []string
		entries, _ := os.ReadDir(m.Server.GGML.CompiledDir)
		for _, e := range entries {
			if _, ok := ggmlBackendFile(e.Name()); ok {
				here = append(here, e.Name())
			}
		}
		if len(here) > 0 {
			log.Warn("this machine has ggml backends in the directory compiled into the bundle's libggml.so: ggml searches it first, and of two variants that score the same it loads this machine's, not the bundle's",
				"dir", m.Server.GGML.CompiledDir, "backends", strings.Join(here, " "))
		}
	}
	if dlGGML(bins) == nil {
		return nil
	}
	host, err := DetectHost(ctx)
	if err != nil {
		// the CPU is read through CPUID all the same; a GPU tool that fails must not keep the
		// server from starting
		log.Warn("reading this machine's GPUs for the ggml backend check: only its CPU is checked", "err", err)
		host.GPUs = nil
	}
	var bad []string
	for _, v := range Check(host, "this machine", Input{Name: dir, Binaries: bins}).Verdicts {
		if v.Check == CheckGGMLBackends && v.Status == Fail {
			bad = append(bad, v.Subject+": "+v.Reason+"; "+v.Fix)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("bundle %s would not run here: %s", dir, strings.Join(bad, "\n  "))
	}
	return nil
}
