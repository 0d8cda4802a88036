package wheel

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/preflight"
	"github.com/llbuild/llbuild/preflight/fatbin"
	"github.com/llbuild/llbuild/targets"
)

const vecSource = `void scale(float *x, int n, float k) { for (int i = 0; i < n; i++) x[i] *= k; }` + "\n"

// compileLib builds a shared library with gcc and the given ISA flags: real code of the
// extensions preflight looks for.
func compileLib(t *testing.T, flags ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("gcc is required in CI")
		}
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "v.c")
	os.WriteFile(src, []byte(vecSource), 0o644)
	lib := filepath.Join(dir, "lib.so")
	args := append([]string{"-O3", "-shared", "-fPIC", "-o", lib, src}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	b, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// zipWheel writes a wheel of the given members (name to content) with METADATA.
func zipWheel(t *testing.T, version string, members map[string][]byte) (*bytes.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	info := "llama_cpp_python-" + version + ".dist-info/"
	members[info+"METADATA"] = []byte("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: " + version + "\n")
	for n, b := range members {
		w, _ := z.Create(n)
		w.Write(b)
	}
	z.Close()
	return bytes.NewReader(buf.Bytes()), "llama_cpp_python-" + version + "-py3-none-linux_x86_64.whl"
}

func cpuV3(t *testing.T) targets.Host {
	t.Helper()
	tg, err := targets.Load("cpu-v3")
	if err != nil {
		t.Fatal(err)
	}
	return tg.Host
}

func TestCheck(t *testing.T) {
	avx2 := compileLib(t, "-mavx2", "-mfma")
	avx512 := compileLib(t, "-mavx512f", "-mavx512vl", "-mprefer-vector-width=512")
	tests := []struct {
		name    string
		version string
		want    string
		members map[string][]byte
		problem string // "" when the wheel passes
	}{
		{"an AVX2 wheel passes on an AVX2 host", "0.3.99+cpu.avx2", "0.3.99+cpu.avx2", map[string][]byte{"llama_cpp/lib/libggml-cpu.so": avx2}, ""},
		{"an AVX-512 library is refused on an AVX2 host", "0.3.99+cpu.avx512", "0.3.99+cpu.avx512", map[string][]byte{"llama_cpp/lib/libggml-cpu.so": avx512}, "AVX512F"},
		{"the CUDA driver library is never shipped", "0.3.99+cpu.avx2", "0.3.99+cpu.avx2", map[string][]byte{"llama_cpp/lib/libggml-cpu.so": avx2, "llama_cpp/lib/libcuda.so.1": avx2}, "contains the CUDA driver library llama_cpp/lib/libcuda.so.1"},
		{"a version without the expected label", "0.3.99", "0.3.99+cpu.avx2", map[string][]byte{"llama_cpp/lib/libggml-cpu.so": avx2}, "its version is 0.3.99, want 0.3.99+cpu.avx2"},
		{"a wheel with no library", "0.3.99+cpu.avx2", "0.3.99+cpu.avx2", map[string][]byte{"llama_cpp/__init__.py": []byte("")}, "no shared library"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, name := zipWheel(t, tt.version, tt.members)
			res, err := Check(r, r.Size(), name, Expect{Version: tt.want, Host: cpuV3(t), HostName: "cpu-v3"})
			if err != nil {
				t.Fatalf("Check() error = %v", err)
			}
			got := res.Err()
			switch {
			case tt.problem == "" && got != nil:
				t.Errorf("Check() refused: %v", got)
			case tt.problem != "" && (got == nil || !strings.Contains(got.Error(), tt.problem)):
				t.Errorf("Check() = %v, want a refusal containing %q", got, tt.problem)
			}
		})
	}
}

func TestCheckUnreadable(t *testing.T) {
	r := bytes.NewReader([]byte("not a zip"))
	if _, err := Check(r, r.Size(), "llama_cpp_python-1-py3-none-any.whl", Expect{}); err == nil {
		t.Error("Check(not a zip) = nil error")
	}
	r2, _ := zipWheel(t, "1", map[string][]byte{})
	if _, err := Check(r2, r2.Size(), "not-a-wheel.zip", Expect{}); err == nil {
		t.Error("Check(bad file name) = nil error")
	}
}

func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, _ := z.Create("p-1.dist-info/METADATA")
	w.Write([]byte("Name: p\nVersion: 1\nRequires-Python: >=3\n\nbody\n"))
	z.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		w, _, err := Read(r, r.Size(), "p-1-py3-none-any.whl")
		if err == nil && (w.Name == "" || w.Version == "") {
			t.Errorf("Read() accepted a wheel without name or version: %+v", w)
		}
	})
}

func TestFatbinProblems(t *testing.T) {
	cubin := func(sm int, a bool) fatbin.Entry { return fatbin.Entry{Kind: fatbin.Cubin, SM: sm, ArchSpecific: a} }
	ptx := func(sm int) fatbin.Entry { return fatbin.Entry{Kind: fatbin.PTX, SM: sm} }
	lib := func(es ...fatbin.Entry) []*preflight.Binary {
		return []*preflight.Binary{{Path: "llama_cpp/lib/libggml-cuda.so", Fatbin: es}}
	}
	tests := []struct {
		name  string
		libs  []*preflight.Binary
		archs []string
		want  string // "" for no problem
	}{
		{"exactly the requested cubin and its PTX", lib(cubin(86, false), ptx(86)), []string{"86"}, ""},
		{"an arch-specific cubin as ggml builds 120", lib(cubin(120, true), ptx(120)), []string{"120a"}, "kernels for architectures the plan did not request: libggml-cuda.so compute_120"},
		{"an arch-specific cubin alone", lib(cubin(120, true)), []string{"120a-real"}, ""},
		{"the default architecture list where one was asked for", lib(cubin(86, false), cubin(89, false), cubin(120, true), ptx(75), ptx(80)), []string{"86"}, "did not request"},
		{"a requested architecture missing", lib(cubin(90, false)), []string{"86", "90"}, "no cubin for sm_86"},
		{"PTX only for a -virtual request", lib(ptx(90)), []string{"90-virtual"}, ""},
		{"CUDA kernels in a CPU wheel", lib(cubin(86, false)), nil, "builds no CUDA"},
		{"no kernels in a CPU wheel", []*preflight.Binary{{Path: "libggml-cpu.so"}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(fatbinProblems(tt.libs, tt.archs), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("fatbinProblems(%v) = %q, want %q", tt.archs, got, tt.want)
			}
		})
	}
}

type kernel struct {
	ptx      bool
	sm       int
	specific bool
}

// fatbinBlob is a .nv_fatbin container in the layout nvcc writes (build-facts.md): a 16-byte
// header, then one 64-byte entry header and a small payload per kernel image.
func fatbinBlob(ks ...kernel) []byte {
	var entries []byte
	for _, k := range ks {
		h := make([]byte, 0x40)
		kind := uint16(fatbin.Cubin)
		payload := cubinWithKernel("axpy")
		if k.ptx {
			kind = uint16(fatbin.PTX)
			payload = []byte(fmt.Sprintf(".version 9.0\n.target sm_%d\n.address_size 64\n.visible .entry axpy()\n{\n\tret;\n}\n", k.sm))
		}
		for len(payload)%16 != 0 {
			payload = append(payload, 0)
		}
		binary.LittleEndian.PutUint16(h[0:], kind)
		binary.LittleEndian.PutUint16(h[2:], 0x101)
		binary.LittleEndian.PutUint32(h[4:], 0x40)
		binary.LittleEndian.PutUint64(h[8:], uint64(len(payload)))
		binary.LittleEndian.PutUint32(h[0x10:], 16)
		binary.LittleEndian.PutUint16(h[0x18:], 8)
		binary.LittleEndian.PutUint16(h[0x1a:], 1)
		binary.LittleEndian.PutUint32(h[0x1c:], uint32(k.sm))
		flags := uint64(0x11)
		if k.specific {
			flags |= 0x100000
		}
		binary.LittleEndian.PutUint64(h[0x28:], flags)
		entries = append(append(entries, h...), payload...)
	}
	c := make([]byte, 16)
	binary.LittleEndian.PutUint32(c[0:], fatbin.Magic)
	binary.LittleEndian.PutUint16(c[4:], 1)
	binary.LittleEndian.PutUint16(c[6:], 0x10)
	binary.LittleEndian.PutUint64(c[8:], uint64(len(entries)))
	return append(c, entries...)
}

// cubinWithKernel is the smallest ELF cubin preflight reads a kernel from: section headers
// (null, .shstrtab, .text.NAME) and nothing else, as nvcc puts each kernel in .text.NAME.
func cubinWithKernel(name string) []byte {
	le := binary.LittleEndian
	strtab := []byte("\x00.shstrtab\x00.text." + name + "\x00")
	elf := make([]byte, 64)
	copy(elf, "\x7fELF\x02\x01\x01")
	strOff := uint64(len(elf))
	elf = append(elf, strtab...)
	for len(elf)%8 != 0 {
		elf = append(elf, 0)
	}
	shoff := uint64(len(elf))
	le.PutUint64(elf[0x28:], shoff)
	le.PutUint16(elf[0x3a:], 64) // e_shentsize
	le.PutUint16(elf[0x3c:], 3)  // e_shnum
	le.PutUint16(elf[0x3e:], 1)  // e_shstrndx
	sh := func(nameOff uint32, typ uint32, off, size uint64) []byte {
		b := make([]byte, 64)
		le.PutUint32(b[0:], nameOff)
		le.PutUint32(b[4:], typ)
		le.PutUint64(b[0x18:], off)
		le.PutUint64(b[0x20:], size)
		return b
	}
	elf = append(elf, make([]byte, 64)...)                      // null
	elf = append(elf, sh(1, 3, strOff, uint64(len(strtab)))...) // .shstrtab
	elf = append(elf, sh(11, 1, strOff, 0)...)                  // .text.NAME
	return elf
}

// withFatbin adds a .nv_fatbin section to a shared library with objcopy, as a CUDA backend
// carries its kernels.
func withFatbin(t *testing.T, lib []byte, blob []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("objcopy"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("objcopy (binutils) is required in CI")
		}
		t.Skip("objcopy not found")
	}
	dir := t.TempDir()
	in, sec, out := filepath.Join(dir, "in.so"), filepath.Join(dir, "fatbin"), filepath.Join(dir, "out.so")
	os.WriteFile(in, lib, 0o644)
	os.WriteFile(sec, blob, 0o644)
	if o, err := exec.Command("objcopy", "--add-section", ".nv_fatbin="+sec, "--set-section-flags", ".nv_fatbin=alloc,readonly", in, out).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, o)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckCUDAKernels checks wheels whose CUDA library carries real .nv_fatbin sections
// against the rtx3090 target (compute capability 8.6) built for sm_86.
func TestCheckCUDAKernels(t *testing.T) {
	tg, err := targets.Load("rtx3090")
	if err != nil {
		t.Fatal(err)
	}
	lib := compileLib(t, "-mavx2", "-mfma")
	tests := []struct {
		name    string
		kernels []kernel
		problem string
	}{
		{"sm_86 and its PTX, as CMake builds 86", []kernel{{sm: 86}, {ptx: true, sm: 86}}, ""},
		{"the default architecture list", []kernel{{ptx: true, sm: 75}, {ptx: true, sm: 80}, {sm: 86}, {sm: 89}, {ptx: true, sm: 90}, {sm: 120, specific: true}}, "architectures the plan did not request: libggml-cuda.so compute_75, libggml-cuda.so compute_80, libggml-cuda.so compute_90, libggml-cuda.so sm_120a, libggml-cuda.so sm_89"},
		{"an sm_90 build for an sm_86 GPU", []kernel{{sm: 90}}, "no kernel for compute capability 8.6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cuda := withFatbin(t, lib, fatbinBlob(tt.kernels...))
			r, name := zipWheel(t, "0.3.99+cu131.sm86.avx2", map[string][]byte{
				"llama_cpp/lib/libggml-cuda.so": cuda,
				"llama_cpp/lib/libggml-cpu.so":  lib,
			})
			res, err := Check(r, r.Size(), name, Expect{Version: "0.3.99+cu131.sm86.avx2", Host: tg.Host, HostName: tg.Name, CUDAArchitectures: []string{"86"}})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Err()
			switch {
			case tt.problem == "" && got != nil:
				t.Errorf("Check() refused: %v", got)
			case tt.problem != "" && (got == nil || !strings.Contains(got.Error(), tt.problem)):
				t.Errorf("Check() = %v, want a refusal containing %q", got, tt.problem)
			}
		})
	}
}
