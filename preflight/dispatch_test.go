package preflight

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llbuild/llbuild/internal/llamatest"
	"github.com/llbuild/llbuild/preflight/x86"
	"github.com/llbuild/llbuild/targets"
)

// gccBuild compiles src with gcc and the given flags into dir/out.
func gccBuild(t *testing.T, dir, out, src string, flags ...string) string {
	t.Helper()
	return compileSrc(t, "gcc", ".c", dir, out, src, flags...)
}

// compileSrc writes src to dir/out+ext and compiles it with cc (-O3 and flags) into dir/out.
func compileSrc(t *testing.T, cc, ext, dir, out, src string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		llamatest.Unavailable(t, "no "+cc+" to build the test files")
	}
	c := filepath.Join(dir, out+ext)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, append(append([]string{"-O3"}, flags...), "-o", filepath.Join(dir, out), c)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, flags, err, b)
	}
	return filepath.Join(dir, out)
}

const (
	clonesSrc = `__attribute__((target_clones("avx512f","default")))
void scale(float *a, int n) { for (int i = 0; i < n; i++) a[i] *= 3.0f; }
`
	ifuncSrc = `__attribute__((target("avx512f"))) static void add_avx512(float *a, int n) { for (int i = 0; i < n; i++) a[i] += 1.0f; }
static void add_plain(float *a, int n) { for (int i = 0; i < n; i++) a[i] += 1.0f; }
static void *resolve_add(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx512f") ? (void *)add_avx512 : (void *)add_plain; }
void add(float *a, int n) __attribute__((ifunc("resolve_add")));
`
)

// TestIFuncTargetsAreDispatched: code that only an ifunc resolver can hand out runs only
// when the resolver's CPUID test picks it, so an AVX-512 clone on an AVX2 host is
// "dispatched at run time", not a SIGILL; the same code reached any other way (a direct
// call, a pointer in data) still would fail.
func TestIFuncTargetsAreDispatched(t *testing.T) {
	dir := t.TempDir()
	v3 := loadTarget(t, "cpu-v3")
	avx512 := targets.Host{CPU: targets.CPU{Features: targets.KnownFeatures}}
	so := []string{"-shared", "-fPIC"}
	for _, c := range []struct {
		name, src string
		flags     []string
		host      targets.Host
		want      Status
		function  string // named in the evidence
	}{
		{"target_clones in a library", clonesSrc, so, v3, Dispatched, "scale.avx512f"},
		{"target_clones in an executable", clonesSrc + "int main(int c, char **v) { float a[64] = {0}; scale(a, c); return (int)a[0]; }\n", nil, v3, Dispatched, "scale.avx512f"},
		{"ifunc attribute with its own resolver", ifuncSrc, so, v3, Dispatched, "add_avx512"},
		{"an implementation also called directly", ifuncSrc + "void add_fast(float *a, int n) { add_avx512(a, n); }\n", so, v3, Fail, "add_avx512"},
		{"an implementation whose address is stored in data", ifuncSrc + "void (*add_ptr)(float *, int) = add_avx512;\n", so, v3, Fail, "add_avx512"},
		{"target_clones on a host that has AVX-512", clonesSrc, so, avx512, OK, ""},
		// the function laid before the implementation ends in a call of abort: nothing runs on
		// into add_avx512 (before, that read as a direct way in: "would fail")
		{"an implementation after a function that ends in abort", "#include <stdlib.h>\nint checked(int x) { if (x) return 0; abort(); }\n" + ifuncSrc,
			append([]string{"-fno-reorder-blocks-and-partition", "-fno-toplevel-reorder"}, so...), v3, Dispatched, "add_avx512"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(strings.ReplaceAll(c.name, " ", "-"), "libt.so")
			os.MkdirAll(filepath.Join(dir, filepath.Dir(out)), 0o755)
			p := gccBuild(t, dir, out, c.src, c.flags...)
			bins, err := ReadFiles(context.Background(), []string{p})
			if err != nil {
				t.Fatal(err)
			}
			r := Check(c.host, "host", Input{Name: p, Binaries: bins})
			v := verdictFor(r, CheckCPU, p)
			if v == nil {
				t.Fatalf("no cpu verdict in %+v", r.Verdicts)
			}
			if v.Status != c.want || (c.want != OK && !strings.Contains(v.Reason, "AVX512F")) {
				t.Errorf("cpu verdict = %s %q, want %s naming AVX512F", v.Status, v.Reason, c.want)
			}
			if c.function != "" && !strings.Contains(strings.Join(v.Evidence, "\n"), " in "+c.function) {
				t.Errorf("evidence = %q, want the instructions attributed to %s", v.Evidence, c.function)
			}
			if want := map[Status]int{Dispatched: 0, Fail: 1, OK: 0}[c.want]; r.ExitCode() != want {
				t.Errorf("ExitCode = %d, want %d", r.ExitCode(), want)
			}
		})
	}
}

// TestSystemLibcIsNotAFailure: glibc reaches its AVX-512, AVX2 and RTM string functions
// only through ifunc resolvers, and its remaining RTM (lock elision) and PKU (pkey_get)
// instructions behind CPUID tests of its own: named with --binary it must not read as a
// SIGILL, neither on this machine nor on hosts without those extensions.
func TestSystemLibcIsNotAFailure(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		llamatest.Unavailable(t, "no "+libc)
	}
	bins, err := ReadFiles(context.Background(), []string{libc})
	if err != nil {
		t.Fatal(err)
	}
	b := bins[0]
	if !b.System || b.Code == nil || b.Code.IFuncResolvers == 0 {
		t.Fatalf("libc read as system=%v, decoded=%v, with ifunc resolvers=%v; want a decoded system library with resolvers", b.System, b.Code != nil, b.Code != nil && b.Code.IFuncResolvers > 0)
	}
	if b.Code.Uses&x86.AVX512F != 0 || b.Code.Dispatched&x86.AVX512F == 0 {
		t.Errorf("AVX-512 code: direct %v, dispatched %v; want all of it dispatched", b.Code.Uses&x86.AVX512F != 0, b.Code.Dispatched&x86.AVX512F != 0)
	}
	here, err := DetectHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k8 := targets.Host{CPU: targets.CPU{Features: []targets.Feature{}}}
	for name, h := range map[string]targets.Host{"this machine": here, "cpu-v3": loadTarget(t, "cpu-v3"), "baseline x86-64": k8} {
		r := Check(h, name, Input{Name: libc, Binaries: bins})
		v := verdictFor(r, CheckCPU, libc)
		if v == nil || v.Status == Fail || (v.Status == OK && !h.CPU.FeatureSet().Has(targets.AVX512F)) {
			t.Errorf("%s: cpu verdict = %+v, want no failure (and not ok without AVX-512)", name, v)
		}
		if r.ExitCode() == 1 {
			t.Errorf("%s: ExitCode = 1, want 0 or 2", name)
		}
	}
}

// FuzzEHFrame: .eh_frame comes from outside; reading it never panics and every range it
// returns is non-empty.
func FuzzEHFrame(f *testing.F) {
	if data, err := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		if ef, err := elf.NewFile(bytes.NewReader(data)); err == nil {
			if s := ef.Section(".eh_frame"); s != nil {
				if d, err := s.Data(); err == nil && len(d) > 4096 {
					f.Add(d[:4096], s.Addr)
				}
			}
		}
	}
	f.Add([]byte{0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0}, uint64(0x1000))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		fns, _ := ehFrameFunctions(data, addr)
		for _, fn := range fns {
			if fn.end == fn.start {
				t.Fatalf("empty range %+v", fn)
			}
		}
	})
}

// TestSystemLibraryDirectories: a library outside llama.cpp counts as a system library (one
// that may test CPUID itself) in the system library directories and below them, where
// Debian installs OpenBLAS; a build directory is not one.
func TestSystemLibraryDirectories(t *testing.T) {
	dirs := map[string]bool{"/lib/x86_64-linux-gnu": true, "/usr/lib/x86_64-linux-gnu": true, "/usr/lib": true}
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/lib/x86_64-linux-gnu/libc.so.6", true},
		{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", true},
		{"/usr/lib/x86_64-linux-gnu/libavcodec.so.59", true},
		{"/home/me/llama.cpp/build/bin/libwide.so", false},
		{"lib/libopenblas.so.0", false},
	} {
		if got := underDir(c.path, dirs); got != c.want {
			t.Errorf("underDir(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}
