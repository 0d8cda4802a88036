package targets

import (
	"fmt"
	"strings"
)

// cudaImages are the CUDA base images llbuild knows pinned digests for, newest first. A host
// gets the newest one its driver can run.
var cudaImages = []struct {
	Toolkit, Devel, Runtime string
}{
	{"13.1.1",
		"nvidia/cuda:13.1.1-devel-ubuntu24.04@sha256:9cf8694a27722418a1f175d90f85d5afb5a728fd4a9907d7f0565efecfa14d32",
		"nvidia/cuda:13.1.1-runtime-ubuntu24.04@sha256:12e26235ebe186000d71f8e457a9ad2aed6c0cb743a7935f0443bacef206aa34"},
	{"13.0.2",
		"nvidia/cuda:13.0.2-devel-ubuntu24.04@sha256:5dc1bca23d05bd37b011be68ec470c03b403a5da07ec3a86e41af9470e9d0cc6",
		"nvidia/cuda:13.0.2-runtime-ubuntu24.04@sha256:6a0e31b59e70890446f2c17356d6efc0d54260090a8c63d6ca7c2ad049db95d2"},
}

const (
	ubuntuImage = "ubuntu:24.04@sha256:224a1869083a311ef3f13648a154ba79832fbef6364d31493642ca03082da254"
	// develDistro is the distribution of every devel image above: its apt pins apply.
	develDistro = "ubuntu-24.04"
	// No digest of Intel's oneAPI image could be found: plans for SYCL hosts need --allow-floating.
	oneAPIImage = "intel/deep-learning-essentials:2025.3.3-0-devel-ubuntu24.04"
)

// intelSYCLDevices maps Intel GPU PCI device IDs to the ocloc device names an ahead-of-time
// SYCL build targets. Only IDs checked against public sources are listed. It is the one table:
// detection (FromHost) and preflight's checks of a host both read it.
var intelSYCLDevices = map[string]string{
	"8086:e223": "bmg-g31", // Arc Pro B70 / B65 (BMG-G31)
	"8086:e20b": "bmg-g21", // Arc B580
	"8086:e20c": "bmg-g21", // Arc B570
	"8086:56a0": "acm-g10", // Arc A770
	"8086:56a1": "acm-g10", // Arc A750
	"8086:56a5": "acm-g11", // Arc A380
}

// SYCLDeviceForPCI returns the ocloc device name for an Intel GPU's PCI ID ("8086:e223"), or "".
func SYCLDeviceForPCI(id string) string { return intelSYCLDevices[strings.ToLower(id)] }

// FromHost makes a target for a host as detected: CUDA for the first NVIDIA GPU (its
// architecture only, the newest pinned CUDA image its driver runs), SYCL for a known Intel GPU,
// CPU only otherwise; ggml's ISA options follow the CPU's features exactly. Warnings say what
// could not be decided and needs editing.
func FromHost(name string, h Host) (*Target, []string) {
	t := &Target{SchemaVersion: SchemaVersion, Name: name, Host: h, Source: "detected"}
	t.Build.ISA = ISAFromFeatures(h.CPU.FeatureSet())
	t.Build.Backend = BackendCPU
	t.Build.Images = Images{Devel: ubuntuImage, Runtime: ubuntuImage, DevelDistro: develDistro}
	var warnings []string
	for i := range t.Host.GPUs {
		g := &t.Host.GPUs[i]
		switch {
		case g.Vendor == VendorNVIDIA && g.ComputeCapability != "" && t.Build.Backend == BackendCPU:
			arch := strings.ReplaceAll(g.ComputeCapability, ".", "")
			t.Build.Backend = BackendCUDA
			t.Build.CUDA = &CUDA{Architectures: []string{arch}}
			if _, err := ParseVersion(h.Driver.CUDA); err != nil {
				warnings = append(warnings, "the driver's CUDA version is unknown (nvidia-smi did not say): set host.driver.cuda and build.cuda.toolkit by hand")
			} else {
				for _, im := range cudaImages {
					tk, _ := ParseVersion(im.Toolkit)
					if h.CheckCUDARequirement(CUDARequirement(tk)) == nil {
						t.Build.CUDA.Toolkit = im.Toolkit
						t.Build.Images = Images{Devel: im.Devel, Runtime: im.Runtime, DevelDistro: develDistro}
						break
					}
				}
			}
			if t.Build.CUDA.Toolkit == "" {
				warnings = append(warnings, fmt.Sprintf("no pinned CUDA image runs on a driver with CUDA %s: set build.cuda.toolkit and build.images to a CUDA %s image by digest", h.Driver.CUDA, h.Driver.CUDA))
			}
		case g.Vendor == VendorIntel && t.Build.Backend == BackendCPU:
			dev := g.SYCLDevice
			if dev == "" {
				dev = SYCLDeviceForPCI(g.PCIID)
			}
			if dev == "" {
				warnings = append(warnings, fmt.Sprintf("Intel GPU %s is not one llbuild knows the SYCL device name of: building for the CPU; set build.sycl.deviceArch to build for it", g.PCIID))
				continue
			}
			g.SYCLDevice = dev
			t.Build.Backend = BackendSYCL
			t.Build.SYCL = &SYCL{DeviceArch: dev}
			t.Build.Compilers = &Compilers{C: "icx", CXX: "icpx"}
			t.Build.Images = Images{Devel: oneAPIImage, Runtime: oneAPIImage, DevelDistro: develDistro}
			warnings = append(warnings, "Intel's oneAPI image is not pinned by digest: plans need --allow-floating until build.images are pinned")
		}
	}
	return t, warnings
}
