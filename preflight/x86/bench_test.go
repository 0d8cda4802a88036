package x86

import (
	"debug/elf"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/llbuild/llbuild/preflight/internal/debfetch"
)

func benchCode(b *testing.B) []byte {
	path := filepath.Join(debfetch.GGMLBackends(b), "libggml-cpu-sapphirerapids.so")
	var code []byte
	for _, s := range execSections(b, path) {
		d, err := s.Data()
		if err != nil {
			b.Fatal(err)
		}
		code = append(code, d...)
	}
	return code
}

// BenchmarkScan measures decode-and-classify throughput on the executable code of a real
// AVX-512/AMX library; BenchmarkTouchBytes (a loop summing the same bytes) is the baseline
// to compare it with.
func BenchmarkScan(b *testing.B) {
	code := benchCode(b)
	b.SetBytes(int64(len(code)))
	b.ReportAllocs()
	for b.Loop() {
		var s Stats
		s.Scan(code, 0)
	}
}

func BenchmarkTouchBytes(b *testing.B) {
	code := benchCode(b)
	b.SetBytes(int64(len(code)))
	var sum byte
	for b.Loop() {
		for _, c := range code {
			sum += c
		}
	}
	_ = sum
}

// BenchmarkScanVsObjdump measures, in one run on the same file, the CPU time of
// `objdump -d` (its output discarded), the time to open the ELF file, read its executable
// sections and Scan them (wall and thread CPU time), and a loop summing the same code bytes,
// and reports the ratios: objdump-cpu/scan-cpu (how many times less CPU preflight's decoder
// needs than objdump; the figure BENCHMARKS.md records), objdump-cpu/scan (the same against
// preflight's wall time, which a loaded machine inflates) and scan/byteloop (what decoding
// costs over touching each byte). Absolute speeds depend on the machine and its load.
func BenchmarkScanVsObjdump(b *testing.B) {
	if _, err := exec.LookPath("objdump"); err != nil {
		b.Skipf("objdump (binutils) not installed: %v", err)
	}
	path := filepath.Join(debfetch.GGMLBackends(b), "libggml-cpu-sapphirerapids.so")
	var objdumpCPU, scan, scanCPU, loop time.Duration
	var sum byte
	// The thread's own CPU time is the like-for-like measure against objdump's: on a loaded
	// machine wall time counts the waits for a core against preflight.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		cmd := exec.Command("objdump", "-d", "-w", path)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatalf("objdump -d %s: %v", path, err)
		}
		objdumpCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()

		start, startCPU := time.Now(), threadCPU(b)
		f, err := elf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var code []byte
		var s Stats
		for _, sec := range f.Sections {
			if sec.Flags&elf.SHF_EXECINSTR == 0 || sec.Type != elf.SHT_PROGBITS {
				continue
			}
			d, err := sec.Data()
			if err != nil {
				b.Fatal(err)
			}
			s.Scan(d, sec.Addr)
			code = append(code, d...)
		}
		f.Close()
		scan += time.Since(start)
		scanCPU += threadCPU(b) - startCPU
		if s.Insts == 0 {
			b.Fatal("decoded no instructions")
		}

		start = time.Now()
		for _, c := range code {
			sum += c
		}
		loop += time.Since(start)
	}
	_ = sum
	b.ReportMetric(float64(objdumpCPU)/float64(scan), "objdump-cpu/scan")
	b.ReportMetric(float64(objdumpCPU)/float64(scanCPU), "objdump-cpu/scan-cpu")
	b.ReportMetric(float64(scan)/float64(loop), "scan/byteloop")
}

// threadCPU is the calling thread's user+system CPU time (RUSAGE_THREAD).
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // 1: RUSAGE_THREAD
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
