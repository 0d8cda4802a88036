package preflight

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/klauspost/cpuid/v2"
	"github.com/llbuild/llbuild/targets"
)

// cpuidFeatures maps klauspost/cpuid's feature IDs to host features. cpuid already folds
// in OS support: AVX (and everything VEX-encoded that needs YMM state) only when XCR0
// enables XMM and YMM state, AVX-512 and AMX only when XCR0 enables opmask and ZMM state.
var cpuidFeatures = []struct {
	id cpuid.FeatureID
	f  targets.Feature
}{
	{cpuid.SSE42, targets.SSE42}, {cpuid.AVX, targets.AVX}, {cpuid.AVX2, targets.AVX2},
	{cpuid.FMA3, targets.FMA}, {cpuid.F16C, targets.F16C}, {cpuid.BMI1, targets.BMI1},
	{cpuid.BMI2, targets.BMI2}, {cpuid.AVXVNNI, targets.AVXVNNI},
	{cpuid.AVX512F, targets.AVX512F}, {cpuid.AVX512CD, targets.AVX512CD},
	{cpuid.AVX512VL, targets.AVX512VL}, {cpuid.AVX512DQ, targets.AVX512DQ},
	{cpuid.AVX512BW, targets.AVX512BW}, {cpuid.AVX512VBMI, targets.AVX512VBMI},
	{cpuid.AVX512VNNI, targets.AVX512VNNI}, {cpuid.AVX512BF16, targets.AVX512BF16},
	{cpuid.AMXTILE, targets.AMXTile}, {cpuid.AMXINT8, targets.AMXInt8}, {cpuid.AMXBF16, targets.AMXBF16},
	{cpuid.SSE3, targets.SSE3}, {cpuid.SSSE3, targets.SSSE3}, {cpuid.SSE4, targets.SSE41},
	{cpuid.POPCNT, targets.POPCNT}, {cpuid.LZCNT, targets.LZCNT}, {cpuid.CX16, targets.CX16},
	{cpuid.MOVBE, targets.MOVBE}, {cpuid.ADX, targets.ADX}, {cpuid.AESNI, targets.AES},
	{cpuid.CLMUL, targets.PCLMULQDQ}, {cpuid.SHA, targets.SHA}, {cpuid.GFNI, targets.GFNI},
	{cpuid.VAES, targets.VAES}, {cpuid.VPCLMULQDQ, targets.VPCLMULQDQ}, {cpuid.FMA4, targets.FMA4},
	{cpuid.XOP, targets.XOP}, {cpuid.SSE4A, targets.SSE4A}, {cpuid.AMD3DNOW, targets.ThreeDNow},
	{cpuid.RDRAND, targets.RDRAND}, {cpuid.RDSEED, targets.RDSEED}, {cpuid.RTM, targets.RTM},
	{cpuid.XSAVEOPT, targets.XSAVEOPT}, {cpuid.XSAVEC, targets.XSAVEC}, {cpuid.XSAVES, targets.XSAVES},
	{cpuid.RDTSCP, targets.RDTSCP}, {cpuid.CMPCCXADD, targets.CMPCCXADD},
	{cpuid.AVXVNNIINT8, targets.AVXVNNIINT8}, {cpuid.AVXVNNIINT16, targets.AVXVNNIINT16},
	{cpuid.AVXIFMA, targets.AVXIFMA}, {cpuid.AVXNECONVERT, targets.AVXNECONVERT},
	{cpuid.AVX512VBMI2, targets.AVX512VBMI2}, {cpuid.AVX512FP16, targets.AVX512FP16},
	{cpuid.AVX512IFMA, targets.AVX512IFMA}, {cpuid.AVX512VPOPCNTDQ, targets.AVX512VPOPCNTDQ},
	{cpuid.AVX512BITALG, targets.AVX512BITALG}, {cpuid.AVX512VP2INTERSECT, targets.AVX512VP2INTERSECT},
	{cpuid.AMXFP16, targets.AMXFP16},
	// PKU, RDPID, CLWB, CLFLUSHOPT and AVX512_4VNNIW have no cpuid feature ID: name them in
	// a host file by hand.
}

// DetectHost describes this machine: CPU features through CPUID, NVIDIA GPUs and the
// driver through nvidia-smi (falling back to /proc/driver/nvidia/version for the driver
// version), Intel GPUs through sysfs PCI IDs. A missing nvidia-smi is not an error: the
// host simply has no NVIDIA GPU that can be seen.
func DetectHost(ctx context.Context) (targets.Host, error) {
	var h targets.Host
	h.CPU.Model = strings.TrimSpace(cpuid.CPU.BrandName)
	for _, c := range cpuidFeatures {
		if cpuid.CPU.Supports(c.id) {
			h.CPU.Features = append(h.CPU.Features, c.f)
		}
	}
	// xsave, xrstor and xgetbv need the OS to have set CR4.OSXSAVE.
	if cpuid.CPU.Supports(cpuid.XSAVE, cpuid.OSXSAVE) {
		h.CPU.Features = append(h.CPU.Features, targets.XSAVE)
	}
	h.CPU.Features = targets.CPU{Features: h.CPU.Features}.FeatureSet().Sorted()
	if h.CPU.Features == nil {
		h.CPU.Features = []targets.Feature{} // a baseline CPU: [], which a target file accepts
	}

	nv, err := detectNVIDIA(ctx)
	if err != nil {
		return h, err
	}
	h.GPUs = append(h.GPUs, nv.gpus...)
	h.Driver = nv.driver
	intel, err := IntelGPUsFromSysfs("/sys/bus/pci/devices")
	if err != nil {
		return h, err
	}
	h.GPUs = append(h.GPUs, intel...)
	return h, nil
}

type nvidiaFacts struct {
	gpus   []targets.GPU
	driver targets.Driver
}

func detectNVIDIA(ctx context.Context) (nvidiaFacts, error) {
	var nf nvidiaFacts
	if proc, err := os.ReadFile("/proc/driver/nvidia/version"); err == nil {
		nf.driver.Version = ParseProcDriverVersion(string(proc))
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nf, nil
	}
	query, err := exec.CommandContext(ctx, smi, "--query-gpu=driver_version,compute_cap,name,pci.device_id", "--format=csv,noheader").Output()
	if err != nil {
		if nf.driver.Version != "" {
			return nf, fmt.Errorf("running nvidia-smi --query-gpu (the kernel module %s is loaded): %w", nf.driver.Version, err)
		}
		return nf, nil // nvidia-smi without a driver: no GPU to see
	}
	rows, err := ParseNvidiaSMIQuery(string(query))
	if err != nil {
		return nf, err
	}
	full, err := exec.CommandContext(ctx, smi, "-q").Output()
	if err != nil {
		return nf, fmt.Errorf("running nvidia-smi -q: %w", err)
	}
	cuda, brands := ParseNvidiaSMIQ(string(full))
	nf.driver.CUDA = cuda
	for i, r := range rows {
		if nf.driver.Version == "" {
			nf.driver.Version = r.Driver
		}
		g := targets.GPU{Vendor: targets.VendorNVIDIA, Name: r.Name, ComputeCapability: r.ComputeCap, PCIID: r.PCIID}
		if i < len(brands) {
			g.Brand = brands[i]
		}
		nf.gpus = append(nf.gpus, g)
	}
	return nf, nil
}

// NvidiaSMIRow is one line of `nvidia-smi --query-gpu=driver_version,compute_cap,name,pci.device_id --format=csv,noheader`.
type NvidiaSMIRow struct {
	Driver, ComputeCap, Name string
	PCIID                    string // vendor:device, lower-case hex
}

// ParseNvidiaSMIQuery parses nvidia-smi's CSV query output, one GPU per line.
func ParseNvidiaSMIQuery(out string) ([]NvidiaSMIRow, error) {
	var rows []NvidiaSMIRow
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 {
			return nil, fmt.Errorf("nvidia-smi query line %q: want driver_version, compute_cap, name", line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		r := NvidiaSMIRow{Driver: f[0], ComputeCap: f[1], Name: f[2]}
		if len(f) > 3 {
			r.PCIID = pciIDFromSMI(f[3])
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// pciIDFromSMI turns nvidia-smi's pci.device_id ("0x233510DE": device 2335, vendor 10DE)
// into "10de:2335".
func pciIDFromSMI(s string) string {
	s = strings.ToLower(strings.TrimPrefix(strings.ToLower(s), "0x"))
	if len(s) != 8 {
		return ""
	}
	return s[4:] + ":" + s[:4]
}

var (
	smiCUDA  = regexp.MustCompile(`CUDA Version\s*:\s*([0-9]+\.[0-9]+)`)
	smiBrand = regexp.MustCompile(`(?m)^\s*Product Brand\s*:\s*(.+?)\s*$`)
	procNVRM = regexp.MustCompile(`Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)
)

// ParseNvidiaSMIQ reads the driver's CUDA version and each GPU's brand (as
// nvidia-container-cli names brands) from `nvidia-smi -q` or the plain `nvidia-smi` table
// (which has the CUDA version only).
func ParseNvidiaSMIQ(out string) (cuda string, brands []string) {
	if m := smiCUDA.FindStringSubmatch(out); m != nil {
		cuda = m[1]
	}
	for _, m := range smiBrand.FindAllStringSubmatch(out, -1) {
		brands = append(brands, ContainerBrand(m[1]))
	}
	return cuda, brands
}

// ContainerBrand maps NVML's product brand as nvidia-smi prints it ("GeForce",
// "NVIDIA RTX", "Tesla") to the name NVIDIA_REQUIRE_CUDA's brand= terms use.
func ContainerBrand(smi string) string {
	switch strings.ToLower(strings.TrimSpace(smi)) {
	case "geforce":
		return "geforce"
	case "geforce rtx":
		return "geforcertx"
	case "quadro":
		return "quadro"
	case "quadro rtx":
		return "quadrortx"
	case "nvidia rtx":
		return "nvidiartx"
	case "nvidia":
		return "nvidia"
	case "tesla":
		return "tesla"
	case "titan":
		return "titan"
	case "titan rtx":
		return "titanrtx"
	case "grid":
		return "grid"
	case "nvs":
		return "nvs"
	case "nvidia virtual applications", "vapps":
		return "vapps"
	case "nvidia virtual pc", "vpc":
		return "vpc"
	case "nvidia virtual compute server", "vcs":
		return "vcs"
	case "nvidia rtx virtual workstation", "vws":
		return "vws"
	case "nvidia cloud gaming", "cloud gaming":
		return "cloudgaming"
	}
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(smi), " ", ""))
}

// ParseProcDriverVersion returns the kernel module version from /proc/driver/nvidia/version.
func ParseProcDriverVersion(s string) string {
	if m := procNVRM.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// IntelGPUsFromSysfs lists Intel display controllers under a sysfs PCI devices directory
// (/sys/bus/pci/devices). A missing directory yields no GPUs.
func IntelGPUsFromSysfs(dir string) ([]targets.GPU, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing PCI devices: %w", err)
	}
	var out []targets.GPU
	for _, e := range entries {
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name(), name))
			return strings.ToLower(strings.TrimSpace(string(b)))
		}
		g, ok := IntelGPUFromPCI(read("vendor"), read("device"), read("class"))
		if ok {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].PCIID < out[j].PCIID })
	return out, nil
}

// IntelGPUFromPCI builds a GPU from sysfs vendor, device and class values ("0x8086",
// "0xe223", "0x030000"); ok is false for anything but an Intel display controller.
func IntelGPUFromPCI(vendor, device, class string) (targets.GPU, bool) {
	if vendor != "0x8086" || !strings.HasPrefix(class, "0x03") {
		return targets.GPU{}, false
	}
	id := "8086:" + strings.TrimPrefix(device, "0x")
	return targets.GPU{Vendor: targets.VendorIntel, PCIID: id, SYCLDevice: targets.SYCLDeviceForPCI(id)}, true
}
