package targets

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Feature names a CPU instruction-set extension the way ggml's CMake options and CPU
// variants name them (GGML_<Feature>). Preflight classifies decoded instructions into the
// same names, so a host's feature set and a binary's requirements compare directly.
type Feature string

// The x86-64 features llbuild tracks. AVX512 stands for the AVX-512 foundation set ggml
// groups under GGML_AVX512 (F, CD, VL, DQ, BW); the finer AVX-512 names are what preflight
// reports for single instructions.
const (
	SSE42      Feature = "SSE42"
	AVX        Feature = "AVX"
	AVX2       Feature = "AVX2"
	FMA        Feature = "FMA"
	F16C       Feature = "F16C"
	BMI1       Feature = "BMI1"
	BMI2       Feature = "BMI2"
	AVXVNNI    Feature = "AVX_VNNI"
	AVX512F    Feature = "AVX512F"
	AVX512CD   Feature = "AVX512CD"
	AVX512VL   Feature = "AVX512VL"
	AVX512DQ   Feature = "AVX512DQ"
	AVX512BW   Feature = "AVX512BW"
	AVX512VBMI Feature = "AVX512_VBMI"
	AVX512VNNI Feature = "AVX512_VNNI"
	AVX512BF16 Feature = "AVX512_BF16"
	AMXTile    Feature = "AMX_TILE"
	AMXInt8    Feature = "AMX_INT8"
	AMXBF16    Feature = "AMX_BF16"
)

// Features preflight's instruction classifier also tells apart, so that a host description
// can say exactly what an older or a different CPU has. A host listing SSE42 is taken to
// have SSE3, SSSE3, SSE41, POPCNT and CX16 too (x86-64-v2), one listing BMI1 LZCNT, one
// listing AVX XSAVE.
const (
	SSE3               Feature = "SSE3"
	SSSE3              Feature = "SSSE3"
	SSE41              Feature = "SSE41"
	POPCNT             Feature = "POPCNT"
	LZCNT              Feature = "LZCNT"
	CX16               Feature = "CX16"
	MOVBE              Feature = "MOVBE"
	ADX                Feature = "ADX"
	AES                Feature = "AES"
	PCLMULQDQ          Feature = "PCLMULQDQ"
	SHA                Feature = "SHA"
	GFNI               Feature = "GFNI"
	VAES               Feature = "VAES"
	VPCLMULQDQ         Feature = "VPCLMULQDQ"
	FMA4               Feature = "FMA4"
	XOP                Feature = "XOP"
	SSE4A              Feature = "SSE4A"
	ThreeDNow          Feature = "3DNOW"
	RDRAND             Feature = "RDRAND"
	RDSEED             Feature = "RDSEED"
	RTM                Feature = "RTM"
	XSAVE              Feature = "XSAVE"
	XSAVEOPT           Feature = "XSAVEOPT"
	XSAVEC             Feature = "XSAVEC"
	XSAVES             Feature = "XSAVES"
	PKU                Feature = "PKU"
	RDTSCP             Feature = "RDTSCP"
	RDPID              Feature = "RDPID"
	CLWB               Feature = "CLWB"
	CLFLUSHOPT         Feature = "CLFLUSHOPT"
	CMPCCXADD          Feature = "CMPCCXADD"
	AVXVNNIINT8        Feature = "AVX_VNNI_INT8"
	AVXVNNIINT16       Feature = "AVX_VNNI_INT16"
	AVXIFMA            Feature = "AVX_IFMA"
	AVXNECONVERT       Feature = "AVX_NE_CONVERT"
	AVX512VBMI2        Feature = "AVX512_VBMI2"
	AVX512FP16         Feature = "AVX512_FP16"
	AVX512IFMA         Feature = "AVX512_IFMA"
	AVX512VPOPCNTDQ    Feature = "AVX512_VPOPCNTDQ"
	AVX512BITALG       Feature = "AVX512_BITALG"
	AVX512VP2INTERSECT Feature = "AVX512_VP2INTERSECT"
	AVX5124VNNIW       Feature = "AVX512_4VNNIW"
	AMXFP16            Feature = "AMX_FP16"
)

// KnownFeatures lists every Feature in a stable order.
var KnownFeatures = []Feature{
	SSE3, SSSE3, SSE41, SSE42, POPCNT, LZCNT, CX16, AVX, AVX2, FMA, F16C, BMI1, BMI2, AVXVNNI,
	AVX512F, AVX512CD, AVX512VL, AVX512DQ, AVX512BW, AVX512VBMI, AVX512VNNI, AVX512BF16,
	AMXTile, AMXInt8, AMXBF16,
	MOVBE, ADX, AES, PCLMULQDQ, SHA, GFNI, VAES, VPCLMULQDQ, FMA4, XOP, SSE4A, ThreeDNow,
	RDRAND, RDSEED, RTM, XSAVE, XSAVEOPT, XSAVEC, XSAVES, PKU, RDTSCP, RDPID, CLWB, CLFLUSHOPT,
	CMPCCXADD, AVXVNNIINT8, AVXVNNIINT16, AVXIFMA, AVXNECONVERT, AVX512VBMI2, AVX512FP16,
	AVX512IFMA, AVX512VPOPCNTDQ, AVX512BITALG, AVX512VP2INTERSECT, AVX5124VNNIW, AMXFP16,
}

// AVX512Foundation is the set GGML_AVX512 compiles for and ggml's loader requires together.
var AVX512Foundation = []Feature{AVX512F, AVX512CD, AVX512VL, AVX512DQ, AVX512BW}

// ParseFeature returns the Feature spelled s (case-insensitive, '-' or '_' between words).
func ParseFeature(s string) (Feature, error) {
	norm := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for _, f := range KnownFeatures {
		if string(f) == norm || strings.ReplaceAll(string(f), "_", "") == strings.ReplaceAll(norm, "_", "") {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown CPU feature %q (known: %s)", s, joinFeatures(KnownFeatures))
}

// FeatureSet is a set of CPU features.
type FeatureSet map[Feature]bool

// Has reports whether every one of fs is in the set.
func (s FeatureSet) Has(fs ...Feature) bool {
	for _, f := range fs {
		if !s[f] {
			return false
		}
	}
	return true
}

// Sorted returns the features in KnownFeatures order.
func (s FeatureSet) Sorted() []Feature {
	var out []Feature
	for _, f := range KnownFeatures {
		if s[f] {
			out = append(out, f)
		}
	}
	return out
}

func joinFeatures(fs []Feature) string {
	ss := make([]string, len(fs))
	for i, f := range fs {
		ss[i] = string(f)
	}
	sort.Strings(ss)
	return strings.Join(ss, ", ")
}

// Host describes a machine that runs llama.cpp: its CPU, its GPUs and its GPU driver. It is
// what `llbuild target detect` reads off a machine and what preflight checks binaries against.
type Host struct {
	CPU    CPU    `yaml:"cpu" json:"cpu"`
	GPUs   []GPU  `yaml:"gpus,omitempty" json:"gpus,omitempty"`
	Driver Driver `yaml:"driver,omitempty" json:"driver,omitempty"`
}

// CPU is the host processor: a model name for people and the features binaries may use.
type CPU struct {
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// Features are the extensions the CPU has and the OS has enabled (for AVX and AVX-512,
	// XCR0 must enable the register state; a CPU with AVX-512 under an OS that does not save
	// ZMM state does not have it here).
	Features []Feature `yaml:"features" json:"features"`
}

// FeatureSet returns the CPU's features as a set.
func (c CPU) FeatureSet() FeatureSet {
	s := FeatureSet{}
	for _, f := range c.Features {
		s[f] = true
	}
	return s
}

// Vendor is a GPU vendor.
type Vendor string

// GPU vendors llbuild builds for.
const (
	VendorNone   Vendor = "none"
	VendorNVIDIA Vendor = "nvidia"
	VendorIntel  Vendor = "intel"
)

// GPU is one GPU of the host.
type GPU struct {
	Vendor Vendor `yaml:"vendor" json:"vendor"`
	Name   string `yaml:"name,omitempty" json:"name,omitempty"`
	// PCIID is vendor:device in lower-case hex, e.g. "8086:e223".
	PCIID string `yaml:"pciID,omitempty" json:"pciID,omitempty"`
	// ComputeCapability is an NVIDIA GPU's major.minor, e.g. "12.0".
	ComputeCapability string `yaml:"computeCapability,omitempty" json:"computeCapability,omitempty"`
	// Brand is what nvidia-container-cli calls the product brand (geforce, nvidia, tesla, quadro, nvidiartx, ...).
	Brand string `yaml:"brand,omitempty" json:"brand,omitempty"`
	// SYCLDevice is the ahead-of-time device name an Intel GPU needs (e.g. "bmg-g31").
	SYCLDevice string `yaml:"syclDevice,omitempty" json:"syclDevice,omitempty"`
}

// Driver is the host's GPU driver.
type Driver struct {
	// Version is the kernel module version, e.g. "590.44.01".
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// CUDA is the highest CUDA version the driver runs (cuDriverGetVersion as major.minor), e.g. "13.1".
	CUDA string `yaml:"cuda,omitempty" json:"cuda,omitempty"`
}

var (
	computeCapabilityForm = regexp.MustCompile(`^[1-9][0-9]?\.[0-9]$`)
	driverVersionForm     = regexp.MustCompile(`^[0-9]+(\.[0-9]+){1,2}$`)
)

// fieldErrors are the host's values that are not of their form: a GPU's compute capability
// (major.minor, "8.6", "12.0") and the driver's version (what nvidia-smi says, "590.44.01").
// The file is the caller's to set.
func (h Host) fieldErrors() []*FieldError {
	var errs []*FieldError
	for i, g := range h.GPUs {
		if g.ComputeCapability != "" && !computeCapabilityForm.MatchString(g.ComputeCapability) {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("host.gpus[%d].computeCapability", i), Problem: fmt.Sprintf("%q is not a compute capability", g.ComputeCapability),
				Fix: `write it as major.minor, as nvidia-smi --query-gpu=compute_cap says it, e.g. "8.6", "12.0"`})
		}
	}
	if v := h.Driver.Version; v != "" && !driverVersionForm.MatchString(v) {
		errs = append(errs, &FieldError{Field: "host.driver.version", Problem: fmt.Sprintf("%q is not a driver version", v),
			Fix: `write it as nvidia-smi --query-gpu=driver_version says it, e.g. "590.44.01"`})
	}
	return errs
}
