// Package enginetest gives tests the real Dagger engine, the stand-in base images and the pinned
// llama.cpp source that scripts/test.sh provides (from ../shared, when it is beside the
// repository). Without them a test skips and says how to get them; in CI (CI=true) a missing
// one fails the test instead, so nothing CI is meant to prove is skipped silently.
package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The environment scripts/test.sh exports.
const (
	// RunnerHostEnv is the Go SDK's variable for the engine's address (set by
	// ../shared/dagger/start-engine.sh, with CLIBinEnv).
	RunnerHostEnv = "_EXPERIMENTAL_DAGGER_RUNNER_HOST"
	CLIBinEnv     = "_EXPERIMENTAL_DAGGER_CLI_BIN"
	// DevelImageEnv and RuntimeImageEnv are OCI archives of the stand-in base images
	// (../shared/dagger/mk-image.sh): devel is Debian bookworm with build-essential, cmake,
	// ninja, git, ccache, patch, python3, python3-venv, python3-pip and python3-build;
	// runtime is bookworm minbase with libgomp1 and ca-certificates.
	DevelImageEnv   = "LLBUILD_TEST_DEVEL_IMAGE"
	RuntimeImageEnv = "LLBUILD_TEST_RUNTIME_IMAGE"
	// CUDADevelImageEnv and CUDARuntimeImageEnv are OCI archives of the CUDA stand-ins
	// (scripts/mk-cuda-standin.sh): Debian trixie's CUDA 12.4.1 toolkit without a driver, and
	// cudart and cuBLAS without libcuda or a compiler.
	CUDADevelImageEnv   = "LLBUILD_TEST_CUDA_DEVEL_IMAGE"
	CUDARuntimeImageEnv = "LLBUILD_TEST_CUDA_RUNTIME_IMAGE"
	// LlamaSourceEnv is the recipe's pinned llama.cpp (../shared/llama.cpp unpacked), a plain
	// directory without .git.
	LlamaSourceEnv = "LLBUILD_TEST_LLAMA_SOURCE"
	// PatchedServerEnv and UnpatchedServerEnv are llama-server of the pinned commit built for
	// cpu-v3 through the engine, with the patch series and with patch 0001 alone (provision.sh).
	PatchedServerEnv   = "LLBUILD_PATCHED_LLAMA_SERVER"
	UnpatchedServerEnv = "LLBUILD_UNPATCHED_LLAMA_SERVER"
)

const how = "run the suite with scripts/test.sh as root with ../shared beside the repository (it installs and starts the engine from ../shared/dagger, makes the stand-in images and unpacks ../shared/llama.cpp), or set the variable yourself"

// SkipUnlessCI skips the test for the reason why, or fails it under CI=true, where
// scripts/test.sh provides everything these tests need and none of them may be skipped.
func SkipUnlessCI(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true, and CI must run this test: " + why)
	}
	t.Skip(why)
}

// unavailable skips the test, or fails it in CI, saying how to get what is missing.
func unavailable(t testing.TB, what string) {
	t.Helper()
	SkipUnlessCI(t, what+": "+how)
}

// Engine makes sure a real Dagger engine is reachable through the environment, or skips.
func Engine(t testing.TB) {
	t.Helper()
	if os.Getenv(RunnerHostEnv) == "" {
		unavailable(t, "no Dagger engine: "+RunnerHostEnv+" is not set")
		return
	}
	bin := os.Getenv(CLIBinEnv)
	if bin == "" {
		bin = "dagger"
	}
	if _, err := exec.LookPath(bin); err != nil {
		unavailable(t, "the dagger CLI "+bin+" is not an executable ("+CLIBinEnv+")")
	}
}

func file(t testing.TB, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		unavailable(t, env+" is not set")
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		unavailable(t, env+"="+p+": "+err.Error())
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// DevelImage is the stand-in devel image's OCI archive (for --base devel=oci-archive:PATH).
func DevelImage(t testing.TB) string { t.Helper(); return file(t, DevelImageEnv) }

// RuntimeImage is the stand-in runtime image's OCI archive.
func RuntimeImage(t testing.TB) string { t.Helper(); return file(t, RuntimeImageEnv) }

// LlamaSource is the pinned llama.cpp source tree.
func LlamaSource(t testing.TB) string { t.Helper(); return file(t, LlamaSourceEnv) }

// CUDADevelImage is the CUDA stand-in devel image's OCI archive.
func CUDADevelImage(t testing.TB) string { t.Helper(); return file(t, CUDADevelImageEnv) }

// CUDARuntimeImage is the CUDA stand-in runtime image's OCI archive.
func CUDARuntimeImage(t testing.TB) string { t.Helper(); return file(t, CUDARuntimeImageEnv) }

// PatchedServer is llama-server of the pinned commit built with the patch series; its
// directory is the build's artifacts.
func PatchedServer(t testing.TB) string { t.Helper(); return file(t, PatchedServerEnv) }

// UnpatchedServer is llama-server of the pinned commit built with patch 0001 alone.
func UnpatchedServer(t testing.TB) string { t.Helper(); return file(t, UnpatchedServerEnv) }
