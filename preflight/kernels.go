package preflight

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/preflight/fatbin"
	"github.com/llbuild/llbuild/targets"
)

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

// kernelVerdict judges each fat binary container with kernels on its own: a kernel launched
// from a container without code for the GPU fails (CUDA error 209) however many other
// containers have code, and a library such as ggml-cuda launches its kernels by operation,
// whatever the GPU. A container whose payloads define no kernel needs nothing. NVIDIA's own
// libraries (cuBLAS, cuBLASLt, NCCL, cuDNN ...) are the exception: they ship containers for
// one GPU generation each (cuBLASLt's *_sm80 kernels, NCCL's sm_100f ones) and launch the
// ones of the GPU they run on, and CUDA loads a container's module only when one of its
// kernels is first launched; on the H100, upstream's CUDA image ran with cuBLAS's sm_75-only
// and NCCL's sm_100f-only containers. Those are ok when some container has code for the GPU.
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
		bv.index, bv.kernels, bv.known, bv.archs = i, names, known, fatbinArchs(bl.Entries)
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
	var elsewhere []blobVerdict
	if len(ok) > 0 && picksKernelsByGPU(b.Path) {
		// containers with no code at all for the GPU (read or compressed beyond reading)
		// are the other GPUs'; a PTX the driver cannot JIT still fails
		keep := func(bs []blobVerdict) []blobVerdict {
			var out []blobVerdict
			for _, bv := range bs {
				if bv.lacks {
					elsewhere = append(elsewhere, bv)
				} else {
					out = append(out, bv)
				}
			}
			return out
		}
		fail, unknown = keep(fail), keep(unknown)
		slices.SortFunc(elsewhere, func(a, b blobVerdict) int { return a.index - b.index })
	}
	reasons := func(bs []blobVerdict) string {
		if len(blobs) == 1 {
			return bs[0].reason
		}
		return groupedReasons(bs, len(blobs), len(elsewhere))
	}
	switch {
	case len(fail) > 0:
		v.Status, v.Reason, v.Fix = Fail, reasons(fail), fail[0].fix
	case len(unknown) > 0:
		v.Status, v.Reason = Unknown, reasons(unknown)
	case len(ok) > 0:
		v.Status, v.Reason = OK, reasons(ok)
		if len(elsewhere) > 0 {
			v.Reason += "; " + otherGPUs(b.Path, elsewhere, len(blobs))
		}
	default:
		v.Status, v.Reason = OK, "its fat binaries define no kernels"
	}
	if b.FatbinError != "" && v.Status != Fail {
		v.Status = Unknown
		v.Reason += "; the .nv_fatbin listing stopped early (" + b.FatbinError + "): containers past that point were not read"
	}
	return v
}

// perGPULibraries are NVIDIA's libraries that pick their kernels by the GPU they run on,
// by the name before ".so"; a trailing * names a family (libcudnn_ops, libnppc ...).
var perGPULibraries = []string{"libcublas", "libcublasLt", "libnvblas", "libnccl", "libcudnn*", "libcufft", "libcufftw",
	"libcusparse", "libcusparseLt", "libcurand", "libcusolver", "libcusolverMg", "libcutensor*", "libnvjpeg", "libnpp*", "libcufile"}

func picksKernelsByGPU(file string) bool {
	name, _, _ := strings.Cut(path.Base(file), ".so")
	for _, l := range perGPULibraries {
		if family, ok := strings.CutSuffix(l, "*"); (ok && strings.HasPrefix(name, family)) || name == l {
			return true
		}
	}
	return false
}

// otherGPUs says which containers of one of perGPULibraries hold code only for other GPUs.
func otherGPUs(file string, bs []blobVerdict, n int) string {
	var idx []int
	seen := map[string]bool{}
	var archs []string
	for _, b := range bs {
		idx = append(idx, b.index)
		for _, a := range strings.Fields(b.archs) {
			if !seen[a] {
				seen[a] = true
				archs = append(archs, a)
			}
		}
	}
	slices.Sort(archs)
	what, verb := "containers "+indexRanges(idx), "hold"
	if len(idx) == 1 {
		what, verb = "container "+indexRanges(idx), "holds"
	}
	return fmt.Sprintf("%s of %d %s code only for other GPUs (%s), which %s launches only on those GPUs: not loaded here",
		what, n, verb, strings.Join(archs, " "), path.Base(file))
}

type blobVerdict struct {
	status      Status
	reason, fix string
	archs       string // the container's code, as fatbinArchs names it
	lacks       bool   // it has no code at all for the GPU (no cubin, no PTX)
	// the container: its index, its kernels and whether they could be read
	index   int
	kernels []string
	known   bool
}

// groupedReasons says the verdicts of the containers of a library of n, one clause per
// distinct reason, naming its containers as ranges: a CUDA library has one container per
// translation unit, 141 in ggml-cuda, mostly with the same verdict. bs are the containers
// with kernels (or unread ones); those without kernels need nothing and are left out.
func groupedReasons(bs []blobVerdict, n, others int) string {
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
		case len(order) == 1 && len(g) > 3 && len(g) < n && others > 0:
			// the others with kernels are said apart (otherGPUs)
			which = fmt.Sprintf("%d containers of %d", len(g), n)
			if none := n - len(g) - others; none > 0 {
				what = append(what, plural(none, "other defines", "others define")+" none")
			}
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
		return blobVerdict{status: Unknown, lacks: true, reason: fmt.Sprintf("nothing for compute capability %s among %s, and its payloads are compressed, so whether it defines kernels (and fails with CUDA error 209) was not read", dev, fatbinArchs(bl.Entries))}
	}
	fix := "build with CMAKE_CUDA_ARCHITECTURES=" + strconv.Itoa(dev.SM())
	if dev.Major == 12 {
		fix += " (ggml turns 12X into 12Xa, which runs only on compute capability 12.X)"
	}
	return blobVerdict{status: Fail, lacks: true,
		reason: fmt.Sprintf("no kernel for compute capability %s among %s: CUDA error 209 (no kernel image is available for execution on the device)", dev, fatbinArchs(bl.Entries)),
		fix:    fix}
}
