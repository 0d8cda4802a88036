package ggmlload

import (
	"bytes"
	"sort"
	"strings"
)

// BackendNames are the backends ggml_backend_load_all tries, each as libggml-<name>-*.so
// (scored) or libggml-<name>.so: the pinned llama.cpp's list (ggml-backend-reg.cpp) and the
// names other releases used (zdnn, webgpu), so that a file any of them would load is known.
var BackendNames = []string{"blas", "zendnn", "zdnn", "cann", "cuda", "hip", "metal", "rpc", "sycl", "vulkan",
	"virtgpu", "opencl", "hexagon", "musa", "openvino", "webgpu", "cpu"}

// BackendFile reports whether a file name is one ggml's loader would dlopen, and the backend
// it is: the extension must be exactly ".so" (ggml compares fs::path::extension), so
// libggml-cpu-haswell.so.0 is not one.
func BackendFile(name string) (backend string, ok bool) {
	if !strings.HasSuffix(name, ".so") || strings.Count(name, ".") != 1 {
		return "", false
	}
	stem := strings.TrimSuffix(name, ".so")
	for _, b := range BackendNames {
		if stem == "libggml-"+b || strings.HasPrefix(stem, "libggml-"+b+"-") {
			return b, true
		}
	}
	return "", false
}

// Variant is the variant part of a backend file's name: haswell for libggml-cpu-haswell.so,
// "" for the plain libggml-cpu.so or a name BackendFile does not take.
func Variant(name string) string {
	b, ok := BackendFile(name)
	if !ok {
		return ""
	}
	v, _ := strings.CutPrefix(strings.TrimSuffix(name, ".so"), "libggml-"+b+"-")
	if v == strings.TrimSuffix(name, ".so") {
		return ""
	}
	return v
}

// CompiledDir returns the one of candidates (directories, as absolute paths) that the library
// lib holds as a string: the GGML_BACKEND_DIR a distribution compiles into libggml.so (Debian's
// /usr/lib/x86_64-linux-gnu/ggml/backends0), which ggml's loader searches before the
// executable's directory. "" when none is there.
//
// A compiler need not keep such a literal whole: GCC builds the std::string of a 40-byte path
// from two 16-byte vector loads out of .rodata and an 8-byte immediate, so the path is found
// when it is made of pieces the library holds, the first at least 16 bytes (or the whole path)
// and every other at least 4 (or the rest). Among several candidates the longest wins.
func CompiledDir(lib []byte, candidates []string) string {
	sorted := append([]string(nil), candidates...)
	sort.Slice(sorted, func(i, j int) bool {
		if len(sorted[i]) != len(sorted[j]) {
			return len(sorted[i]) > len(sorted[j])
		}
		return sorted[i] < sorted[j]
	})
	for _, c := range sorted {
		if strings.HasPrefix(c, "/") && embedded(lib, []byte(c)) {
			return c
		}
	}
	return ""
}

// embedded reports whether s is made of pieces data holds (see CompiledDir).
func embedded(data, s []byte) bool {
	for i, first := 0, true; i < len(s); first = false {
		rest := len(s) - i
		// the longest prefix of s[i:] that data holds: holding one means holding every shorter
		lo, hi := 0, rest
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if bytes.Contains(data, s[i:i+mid]) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		min := 4
		if first {
			min = 16
		}
		if lo < min && lo < rest {
			return false
		}
		if lo == 0 {
			return false
		}
		i += lo
	}
	return true
}
