#!/usr/bin/env bash
# Measures how long the llama-cpp-python CUDA wheel takes to build for one architecture (sm_90)
# against llama-cpp-python's default, ggml's default architecture list (75-virtual 80-virtual
# 86-real 89-real 90-virtual 120a-real 121a-real), on the same machine, with the host executor.
# Run it on a machine with an NVIDIA GPU and the CUDA toolkit (nvcc), for example:
#
#   PYTHONPATH=$HOME/.cache/llbuild-test/pybuild/root/usr/lib/python3/dist-packages \
#   scripts/bench-wheel-archs.sh /path/to/llama-cpp-python /path/to/llama.cpp
#
# Arguments: a llama-cpp-python source (a git repository holding COMMIT, or a plain checkout)
# and a llama.cpp source (the server recipe's commit, a repository or a plain tree).
# Environment:
#   PYTHONPATH  where python-build and scikit-build-core are importable from, unless installed
#               (go test ./internal/pybuild fills ~/.cache/llbuild-test/pybuild on a machine
#               that reaches Debian's mirror; copy that directory to a machine that does not)
#   COMMIT      llama-cpp-python commit (default 629bd1b333f6..., 0.3.34, whose bindings match
#               llama.cpp 1425386fd)
#   TOOLKIT     the CUDA toolkit version nvcc reports (default: read from nvcc --version)
#   JOBS        compile jobs (default: nproc)
#   PYTHON      Python version that runs the build (default: python3's)
#   LLBUILD     the llbuild binary (default: go build it from this repository)
#   OUT         where results go (default: a new temporary directory)
# Prints one line per build (seconds, the wheel, its size) and the ratio default/one. Compiler
# caching is off so that both builds compile everything.
set -euo pipefail

if [[ $# -ne 2 ]]; then
	echo "usage: $0 LLAMA_CPP_PYTHON_SOURCE LLAMA_CPP_SOURCE" >&2
	exit 2
fi
pkg=$(realpath "$1")
llama=$(realpath "$2")
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=${COMMIT:-629bd1b333f60d24a01886c5f99019f4c7c3ea6c}
jobs=${JOBS:-$(nproc)}
out=${OUT:-$(mktemp -d -t llbuild-bench-wheel.XXXXXX)}
mkdir -p "$out"

command -v nvcc >/dev/null 2>&1 || PATH=$PATH:/usr/local/cuda/bin
if ! command -v nvcc >/dev/null 2>&1; then
	echo "$0: nvcc not found (install the CUDA toolkit, or add /usr/local/cuda/bin to PATH)" >&2
	exit 1
fi
toolkit=${TOOLKIT:-$(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*V\([0-9.]*\).*/\2/p' | cut -d. -f1-3)}
python=${PYTHON:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
python3 -c 'import build, scikit_build_core' || {
	echo "$0: python3 cannot import build and scikit_build_core: set PYTHONPATH (see the header)" >&2
	exit 1
}

llbuild=${LLBUILD:-}
if [[ -z $llbuild ]]; then
	llbuild=$out/llbuild
	(cd "$repo" && go build -o "$llbuild" .)
fi

# A target for this machine's CPU family (x86-64-v3) with no GPU listed, so that the default
# list (which holds architectures other than the GPU's) passes target validation, and the CUDA
# toolkit nvcc has. The driver is left out: nothing here starts an image.
target() { # name, architectures as a YAML list
	cat >"$out/$1.yaml" <<EOF
schemaVersion: 1
name: $1
description: bench-wheel-archs.sh, CUDA $toolkit
host:
  cpu:
    features: [SSE42, AVX, AVX2, FMA, F16C, BMI1, BMI2]
build:
  backend: cuda
  cuda:
    toolkit: $toolkit
    architectures: $2
  isa:
    GGML_SSE42: true
    GGML_AVX: true
    GGML_AVX_VNNI: false
    GGML_AVX2: true
    GGML_BMI2: true
    GGML_AVX512: false
    GGML_AVX512_VBMI: false
    GGML_AVX512_VNNI: false
    GGML_AVX512_BF16: false
    GGML_FMA: true
    GGML_F16C: true
    GGML_AMX_TILE: false
    GGML_AMX_INT8: false
    GGML_AMX_BF16: false
  images:
    devel: nvidia/cuda:$toolkit-devel-ubuntu24.04
    runtime: nvidia/cuda:$toolkit-runtime-ubuntu24.04
EOF
}
target bench-one '["90"]'
target bench-default '["75-virtual", "80-virtual", "86-real", "89-real", "90-virtual", "120a-real", "121a-real"]'

declare -A secs
for name in bench-one bench-default; do
	start=$(date +%s.%N)
	if ! CCACHE_DISABLE=1 "$llbuild" wheel --executor host --target-file "$out/$name.yaml" --allow-floating \
		--commit "$commit" --python "$python" --source "$pkg" --llama-source "$llama" \
		--build-jobs "$jobs" --out "$out/artifacts" --work-dir "$out/work-$name" \
		>"$out/$name.stdout" 2>"$out/$name.log"; then
		echo "$0: $name failed; log: $out/$name.log" >&2
		tail -n 30 "$out/$name.log" >&2
		exit 1
	fi
	end=$(date +%s.%N)
	secs[$name]=$(echo "$end - $start" | bc)
	whl=$(cat "$out/$name.stdout")
	printf '%s\t%.1f s\t%s\t%s bytes\n' "$name" "${secs[$name]}" "$(basename "$whl")" "$(stat -c %s "$whl")"
done
printf 'default list / one architecture: %.2fx (jobs %s, CUDA %s, %s)\n' \
	"$(echo "${secs[bench-default]} / ${secs[bench-one]}" | bc -l)" "$jobs" "$toolkit" "$(nproc) cores"
echo "results and logs: $out"
