package pipeline

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/llbuild/llbuild/targets"
)

// CUDAStubsToken stands for the directory of the CUDA driver stub (libcuda.so) in a CUDA plan's
// configure arguments and environment. Where the stub is depends on how the toolkit was
// installed: /usr/local/cuda/lib64/stubs in NVIDIA's images, /usr/lib/x86_64-linux-gnu/stubs in
// Debian's packages. Each executor runs CUDAProbeScript where the build runs (in the devel
// image, or on the host) and replaces the token with the directory it found.
const CUDAStubsToken = "@CUDA_STUBS@"

// CUDAProbeScript finds, where the build runs, the CUDA compiler (nvcc on PATH, else
// $CUDACXX, else /usr/local/cuda/bin/nvcc), its version, the driver stub's directory, and any
// real driver library (libcuda.so.1) in the library directories. It prints key=value lines
// (nvcc, version, stubs, driver) for ParseCUDAProbe and exits 0 whatever it finds: what is
// missing is the parser's error, which can say what to do.
const CUDAProbeScript = `nvcc=$(command -v nvcc 2>/dev/null || true)
[ -z "$nvcc" ] && [ -n "${CUDACXX:-}" ] && [ -x "$CUDACXX" ] && nvcc=$CUDACXX
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
echo "nvcc=$nvcc"
[ -n "$nvcc" ] && echo "version=$("$nvcc" --version 2>/dev/null | grep -m1 'release' || true)"
home=
[ -n "$nvcc" ] && home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64/stubs"} ${CUDA_PATH:+"$CUDA_PATH/lib64/stubs"} ${home:+"$home/lib64/stubs"} \
	/usr/local/cuda/lib64/stubs /usr/local/cuda/targets/*-linux/lib/stubs /usr/lib/*-linux-gnu/stubs /usr/lib64/stubs; do
	if [ -e "$d/libcuda.so" ]; then echo "stubs=$d"; break; fi
done
for d in /usr/lib/*-linux-gnu /lib/*-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/compat; do
	if [ -e "$d/libcuda.so.1" ]; then echo "driver=$d/libcuda.so.1"; break; fi
done
exit 0
`

// CUDAToolchain is what CUDAProbeScript found where a build ran.
type CUDAToolchain struct {
	// NVCC is the compiler's path; Release is its version as nvcc prints it ("12.4.131").
	NVCC    string
	Release string
	// VersionLine is nvcc --version's release line.
	VersionLine string
	// Stubs is the directory holding the driver stub libcuda.so.
	Stubs string
	// Driver is a real libcuda.so.1 found in the library directories, "" when there is none.
	Driver string
}

var nvccRelease = regexp.MustCompile(`release [0-9.]+, V([0-9]+\.[0-9]+\.[0-9]+)`)

// ParseCUDAProbe reads CUDAProbeScript's output. where names the place it ran ("the devel
// image oci-archive:x.tar", "this machine") for the errors. The toolchain is returned with
// what was found also when something is missing.
func ParseCUDAProbe(out, where string) (*CUDAToolchain, error) {
	tc := &CUDAToolchain{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "nvcc":
			tc.NVCC = v
		case "version":
			tc.VersionLine = v
			if m := nvccRelease.FindStringSubmatch(v); m != nil {
				tc.Release = m[1]
			}
		case "stubs":
			tc.Stubs = v
		case "driver":
			tc.Driver = v
		}
	}
	var errs []error
	if tc.NVCC == "" {
		errs = append(errs, fmt.Errorf("no nvcc in %s (not on PATH, no $CUDACXX, no /usr/local/cuda/bin/nvcc): a CUDA build needs a CUDA devel image or toolkit", where))
	} else if tc.Release == "" {
		errs = append(errs, fmt.Errorf("%s --version in %s printed no release line (%q)", tc.NVCC, where, tc.VersionLine))
	}
	if tc.Stubs == "" {
		errs = append(errs, fmt.Errorf("no CUDA driver stub (stubs/libcuda.so) in %s: looked under $CUDA_HOME, the toolkit of %s, /usr/local/cuda/lib64/stubs, /usr/local/cuda/targets/*/lib/stubs and /usr/lib/*-linux-gnu/stubs; a build without a driver links against the stub", where, orNone(tc.NVCC)))
	}
	return tc, errors.Join(errs...)
}

func orNone(s string) string {
	if s == "" {
		return "nvcc (none found)"
	}
	return s
}

// CheckToolkit fails when the compiler that will build is another CUDA release than the plan's
// toolkit: the image's NVIDIA_REQUIRE_CUDA and preflight's driver check are the plan's, so a
// newer compiler would ship binaries that need a newer driver than the image says.
func (p *Plan) CheckToolkit(tc *CUDAToolchain, where string) error {
	if p.CUDA == nil {
		return nil
	}
	want, err := targets.ParseVersion(p.CUDA.Toolkit)
	if err != nil || len(want) < 2 {
		return fmt.Errorf("plan's CUDA toolkit %q is not a version", p.CUDA.Toolkit)
	}
	have, err := targets.ParseVersion(tc.Release)
	if err != nil || len(have) < 2 {
		return fmt.Errorf("nvcc in %s says release %q, not a version", where, tc.Release)
	}
	if want[0] != have[0] || want[1] != have[1] {
		return fmt.Errorf("the plan builds with CUDA %s (its image will require %s) but nvcc in %s is %s (%s): use a devel image of CUDA %d.%d, or a target whose build.cuda.toolkit is %d.%d",
			p.CUDA.Toolkit, p.CUDA.RequireCUDA, where, tc.Release, tc.VersionLine, want[0], want[1], have[0], have[1])
	}
	return nil
}

// Expand replaces a plan's tokens in s with where the executor put things: SourceDirToken
// with src, and CUDAStubsToken with the stub directory found (tc nil: no CUDA toolchain).
func Expand(s, src string, tc *CUDAToolchain) string {
	s = strings.ReplaceAll(s, SourceDirToken, src)
	if tc == nil {
		return s
	}
	return strings.ReplaceAll(s, CUDAStubsToken, tc.Stubs)
}

// nvccTempName is the name of the host-side file nvcc hands the C++ compiler,
// tmpxft_<process id>_<counter>-<n>_<source>.cudafe1.cpp, which the compiler records as the
// object's file symbol (STT_FILE) and in the names of its static initializers
// (_GLOBAL__sub_I_tmpxft_<pid>_<counter>_<n>_…): the process id makes two builds of one plan
// differ there.
var nvccTempName = regexp.MustCompile(`tmpxft_[0-9a-f]{8}_[0-9a-f]{8}([-_])`)

// normalizeStrtab rewrites, in the symbol string table (.strtab) of the ELF file path, nvcc's
// process-id temporary file names to tmpxft_00000000_00000000-, in place and at the same
// length: the only part of a CUDA build that depends on the build's process ids. Nothing loads
// or links by these names, and the linker's build ID (--build-id, as Ubuntu's toolchain links)
// does not cover .strtab (checked with binutils 2.40), so it is the same for both builds
// already. It reports whether it changed the file; a file that is not ELF is left alone.
func normalizeStrtab(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return false, nil // not an ELF file
	}
	s := ef.Section(".strtab")
	if s == nil || s.Type != elf.SHT_STRTAB {
		return false, nil
	}
	data := make([]byte, s.Size)
	if _, err := f.ReadAt(data, int64(s.Offset)); err != nil {
		return false, err
	}
	out := nvccTempName.ReplaceAll(data, []byte("tmpxft_00000000_00000000${1}"))
	if bytes.Equal(out, data) {
		return false, nil
	}
	if _, err := f.WriteAt(out, int64(s.Offset)); err != nil {
		return false, err
	}
	return true, f.Close()
}
