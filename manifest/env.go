package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Run-time knobs a manifest may set in server.env besides llama.cpp's own options: the
// variables GPU runtimes, ggml and OpenMP read to pick devices and tune kernels. Tuning sets
// many of them, so whole families are allowed by prefix; a value that is a path must still
// stay inside the bundle.
var knobPrefixes = []string{
	"GGML_",                         // ggml and its backends (GGML_CUDA_*, GGML_SYCL_*, GGML_VK_*, ...)
	"CUDA_",                         // CUDA runtime: CUDA_VISIBLE_DEVICES, CUDA_MODULE_LOADING, ...
	"NVIDIA_",                       // NVIDIA container runtime: NVIDIA_VISIBLE_DEVICES, NVIDIA_REQUIRE_CUDA
	"HIP_", "ROCR_", "HSA_", "AMD_", // ROCm
	"SYCL_", "ZE_", "ZES_", "UR_", // SYCL runtime, Level Zero, Unified Runtime
	"OMP_", "GOMP_", "KMP_", "MKL_", // OpenMP and oneMKL threading
}

var knobNames = names(
	"ONEAPI_DEVICE_SELECTOR",
	"NEOReadDebugKeys", // Intel compute runtime's switch for its debug keys
	// llama.cpp's own debugging switches (getenv in src/ and tools/server/).
	"LLAMA_TRACE", "LLAMA_SERVER_SLOTS_DEBUG", "LLAMA_KV_CACHE_DEBUG", "LLAMA_GRAPH_REUSE_DISABLE",
	"LLAMA_ATTN_ROT_DISABLE", "LLAMA_GRAPH_INPUT_DEBUG", "LLAMA_GRAPH_RESULT_DEBUG",
)

// Knobs whose value is a library to load: it must be a library of the bundle, as
// LD_PRELOAD's would have to be.
var knobLibraries = names("GGML_BACKEND_PATH")

// isExperimentSwitch says whether name is a llama.cpp switch read with getenv that is not one
// of llama-server's options: a patched worktree's experiment switches
// (LLAMA_MTP_DRAFT_DIRECT_ARGMAX_UNROLL=7, LLAMA_GEMMA4_MTP_QONLY_ATTN_INPUTS=1) change what the
// server computes, so a bundle carries them, and a record's identity with them.
func isExperimentSwitch(name string) bool {
	return strings.HasPrefix(name, "LLAMA_") && !strings.HasPrefix(name, "LLAMA_ARG_")
}

// isKnob says whether name is an allowed run-time knob.
func isKnob(name string) bool {
	if knobNames[name] {
		return true
	}
	for _, p := range knobPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkEnv applies to server.env the rules checkArgs applies to server.args: a variable
// llama-server reads as an option (LLAMA_ARG_*, HF_TOKEN, LLAMA_API_KEY; common/arg.cpp)
// is checked as the flag it stands for, a run-time knob may not name a path outside the
// bundle, and anything else is refused. It returns problems by field.
func checkEnv(env map[string]string, kinds map[string]string) map[string][]string {
	errs := map[string][]string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		field := "server.env." + k
		bad := func(format string, a ...any) { errs[field] = append(errs[field], fmt.Sprintf(format, a...)) }
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs["server.env"] = append(errs["server.env"], fmt.Sprintf("%q is not an environment variable name", k))
			continue
		}
		if f, ok := llamaEnv[k]; ok {
			args := []string{f.flag}
			if f.value {
				args = append(args, v)
			}
			for _, e := range checkArgs(args, kinds) {
				bad("stands for %s: %s", f.flag, e)
			}
			continue
		}
		switch {
		case strings.HasPrefix(k, "LD_"):
			bad("is not allowed: libraries come from server.libraryPath, inside the bundle")
		case knobLibraries[k]:
			if err := CheckPath(v); err != nil {
				bad("%v: it names a library to load, which must be a file of the bundle", err)
			} else if kinds[v] != KindLibrary {
				bad("%s is not a library of the bundle", v)
			}
		case isKnob(k), isExperimentSwitch(k):
			for _, part := range strings.Split(v, ":") {
				if escapes(part) {
					bad("%q names a path outside the bundle; set it in the environment of llbuild serve instead, where the host decides", v)
					break
				}
			}
		case strings.HasPrefix(k, "LLAMA_ARG_"):
			bad("is not an option of llama-server at the pinned llama.cpp commit (common/arg.cpp): check the spelling, or give the flag as bundle --server-arg (server.args in manifest.json)")
		default:
			bad("is neither a llama-server option (LLAMA_ARG_*) nor a known run-time knob (%s*, LLAMA_* switches, ONEAPI_DEVICE_SELECTOR): give llama-server options as bundle --server-arg (server.args in manifest.json), and set other variables in the environment of llbuild serve",
				strings.Join(knobPrefixes, "*, "))
		}
	}
	return errs
}
