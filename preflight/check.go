package preflight

import (
	"fmt"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/targets"
)

// Input is what is being checked: ELF files and, for an image, its environment.
type Input struct {
	// Name says where the binaries came from (a bundle directory, an image reference).
	Name     string
	Binaries []*Binary
	// Env is an image's configured environment (NVIDIA_REQUIRE_CUDA, CUDA_VERSION, ...);
	// nil when the input is not an image.
	Env map[string]string
	// Read says what was read of the input where it was not everything (an image's config
	// only), so that the report says which checks were not made.
	Read string
}

// Check runs every check of in against host. It is a pure function of its arguments.
func Check(host targets.Host, hostName string, in Input) *Report {
	bins := append([]*Binary(nil), in.Binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].Path < bins[j].Path })
	r := &Report{Input: in.Name, Host: host, HostName: hostName, Binaries: bins, Read: in.Read}
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
	r.Verdicts = append(r.Verdicts, backendVerdicts(host, bins, r.GGML)...)
	r.Verdicts = append(r.Verdicts, cudaVerdicts(host, in, bins)...)
	r.Verdicts = append(r.Verdicts, kernelVerdicts(host, bins)...)
	r.Verdicts = append(r.Verdicts, syclVerdicts(host, bins)...)
	return r
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
