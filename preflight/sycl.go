package preflight

import (
	"fmt"
	"strings"

	"github.com/llbuild/llbuild/targets"
)

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
