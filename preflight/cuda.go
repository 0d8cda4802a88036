package preflight

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/llbuild/llbuild/preflight/cudareq"
	"github.com/llbuild/llbuild/targets"
)

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
		case len(reqs) == 0 && in.Read != "":
			// only the driver question was asked: answer it
			v.Status, v.Reason = OK, "the image sets no NVIDIA_REQUIRE_CUDA: it asks nothing of the driver"
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
