package targets

import (
	"fmt"

	"github.com/llbuild/llbuild/preflight/cudareq"
)

// CUDARequirement is the NVIDIA_REQUIRE_CUDA an image built with a CUDA toolkit carries: the
// toolkit's major.minor as the lowest CUDA the driver must run. A toolkit given by its major
// alone requires MAJOR.0, as the NVIDIA container toolkit reads CUDA_VERSION.
func CUDARequirement(toolkit []int) string {
	return fmt.Sprintf("cuda>=%d.%d", toolkit[0], at(toolkit, 1))
}

// CheckCUDARequirement says whether the host's driver and NVIDIA GPUs start an image carrying
// require (an NVIDIA_REQUIRE_CUDA value), by nvidia-container-cli's rules as preflight/cudareq
// evaluates them: every GPU must satisfy it, space-separated terms are alternatives, and a
// term's brand, arch and driver conditions count. It returns nil when require holds, when
// require is empty and when the host names no driver CUDA version (nothing to check against);
// otherwise a *cudareq.UnsatisfiedError, an error wrapping cudareq.ErrInvalid, a
// *cudareq.UndecidedError when a GPU's unknown brand or compute capability decides it, or an
// error naming host.driver.cuda when that is not a version.
func (h Host) CheckCUDARequirement(require string) error {
	if h.Driver.CUDA == "" || require == "" {
		return nil
	}
	if _, err := ParseVersion(h.Driver.CUDA); err != nil {
		return fmt.Errorf("host.driver.cuda: %w", err)
	}
	var devs []cudareq.Device
	for _, g := range h.GPUs {
		if g.Vendor == VendorNVIDIA {
			devs = append(devs, cudareq.Device{Arch: g.ComputeCapability, Brand: g.Brand})
		}
	}
	return cudareq.Check([]string{require}, cudareq.Driver{CUDA: h.Driver.CUDA, Version: h.Driver.Version}, devs)
}
