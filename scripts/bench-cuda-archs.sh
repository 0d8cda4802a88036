#!/usr/bin/env bash
# Measures what a CUDA architecture list costs in compile time: ggml's CUDA objects compiled for
# one architecture (sm_90, what `llbuild plan -t h200` asks for) against ggml's default list for
# the toolkit (CUDA 13: 75-virtual 80-virtual 86-real 89-real 90-virtual 120a-real 121a-real),
# the list a build without CMAKE_CUDA_ARCHITECTURES gets (llama.cpp's and llama-cpp-python's).
#
# The whole default-list build takes too long for some machines' time limits, so the script
# compiles a deterministic sample of the ggml-cuda objects (every SAMPLE_EVERY-th of the sorted
# list, the same objects for both lists) and sums each object's compile time from ninja's log.
# The objects of the sample are compiled in parallel; the per-object times are what is compared.
# Both the server and the wheel compile these same objects, and nothing else of theirs depends
# on the architecture list, so the ratio holds for both builds' CUDA part.
#
#   scripts/bench-cuda-archs.sh /path/to/llama.cpp
#
# Environment: SAMPLE_EVERY (default 8), JOBS (default nproc), ARCH (default 90), OUT (default a
# new temporary directory; the two build directories and the per-object table go there).
# ONE_LOG=FILE takes the one-architecture times from the .ninja_log of a finished one-architecture
# build of the same source on the same machine (a `llbuild build` or `llbuild wheel` build's
# directory, whose objects were compiled with as many jobs as cores) instead of compiling them
# again: only the default list is compiled, in half the time. The sample is then drawn from
# that log's objects.
set -euo pipefail
export LC_ALL=C

if [[ $# -ne 1 ]]; then
	echo "usage: $0 LLAMA_CPP_SOURCE" >&2
	exit 2
fi
src=$(realpath "$1")
every=${SAMPLE_EVERY:-8}
jobs=${JOBS:-$(nproc)}
arch=${ARCH:-90}
out=${OUT:-$(mktemp -d -t llbuild-bench-cuda.XXXXXX)}
mkdir -p "$out"
command -v nvcc >/dev/null 2>&1 || PATH=$PATH:/usr/local/cuda/bin
for tool in nvcc cmake ninja; do
	command -v $tool >/dev/null 2>&1 || {
		echo "$0: $tool not found" >&2
		exit 1
	}
done
[[ -f $src/ggml/src/ggml-cuda/CMakeLists.txt ]] || {
	echo "$0: $src is not a llama.cpp source tree (no ggml/src/ggml-cuda)" >&2
	exit 1
}

# The configure arguments of the h200 plan that matter to ggml-cuda; ISA flags do not reach nvcc's
# device compilation. No compiler cache: every object is compiled.
configure() { # dir, extra args...
	local dir=$1
	shift
	cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_CUDA=ON \
		-DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
		-DCMAKE_CUDA_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= "$@" >"$dir.configure.log" 2>&1 || {
		echo "$0: configure of $dir failed; see $dir.configure.log" >&2
		tail -20 "$dir.configure.log" >&2
		exit 1
	}
}
archs_of() { sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$1/CMakeCache.txt"; }
one_log=${ONE_LOG:-}
if [[ -n $one_log ]]; then
	[[ -f $one_log ]] || {
		echo "$0: ONE_LOG $one_log does not exist" >&2
		exit 1
	}
	echo "one:     times from $one_log"
	# its objects, as paths from the llama.cpp build's top (a wheel build adds vendor/llama.cpp/)
	mapfile -t all < <(cut -f4 "$one_log" | sed -n 's|^.*\(ggml/src/ggml-cuda/CMakeFiles/ggml-cuda\.dir/.*\.cu\.o\)$|\1|p' | sort -u)
else
	configure "$out/one" -DCMAKE_CUDA_ARCHITECTURES="$arch"
	echo "one:     CMAKE_CUDA_ARCHITECTURES=$(archs_of "$out/one")"
	mapfile -t all < <(ninja -C "$out/one" -t targets all | sed -n 's|^\(ggml/src/ggml-cuda/CMakeFiles/[^:]*\.cu\.o\):.*|\1|p' | sort -u)
fi
configure "$out/default"
((${#all[@]} > 0)) && echo "default: $(ninja -C "$out/default" -t commands "${all[0]}" | tail -1 | grep -o 'arch=compute_[0-9a-z]*,code=[^ ]*' | sed 's/arch=compute_//; s/,code=/:/' | tr '\n' ' ')(ggml/src/ggml-cuda/CMakeLists.txt's list; CMAKE_CUDA_ARCHITECTURES unset)"
((${#all[@]} > 0)) || {
	echo "$0: no ggml-cuda objects found" >&2
	exit 1
}
sample=()
for i in "${!all[@]}"; do
	((i % every == 0)) && sample+=("${all[$i]}")
done
echo "sample: ${#sample[@]} of ${#all[@]} ggml-cuda objects (every ${every}th), $jobs jobs, $(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/CUDA \1/p')"

# objects.tsv: object, compile ms, from a ninja log (the last entry of each object; paths may
# carry a prefix such as vendor/llama.cpp/)
times_of() { # ninja log
	for o in "${sample[@]}"; do
		awk -v o="$o" -F'\t' 'substr($4, length($4) - length(o) + 1) == o {d = $2 - $1} END {print o "\t" d}' "$1"
	done
}
declare -A total
variants=(one default)
if [[ -n $one_log ]]; then
	times_of "$one_log" >"$out/one.objects.tsv"
	total[one]=$(awk -F'\t' '{s += $2} END {printf "%.1f", s / 1000}' "$out/one.objects.tsv")
	printf '%-8s %8.1f s summed over the objects of the sample (from ONE_LOG)\n' one "${total[one]}"
	variants=(default)
fi
for variant in "${variants[@]}"; do
	start=$(date +%s%N)
	ninja -C "$out/$variant" -j "$jobs" "${sample[@]}" >"$out/$variant.build.log" 2>&1 || {
		echo "$0: compiling the sample for $variant failed; see $out/$variant.build.log" >&2
		tail -20 "$out/$variant.build.log" >&2
		exit 1
	}
	wall=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}')
	# .ninja_log: start ms, end ms, mtime, output, hash
	times_of "$out/$variant/.ninja_log" >"$out/$variant.objects.tsv"
	total[$variant]=$(awk -F'\t' '{s += $2} END {printf "%.1f", s / 1000}' "$out/$variant.objects.tsv")
	printf '%-8s %8.1f s summed over the objects of the sample, %6.1f s wall\n' "$variant" "${total[$variant]}" "$wall"
done
join -t $'\t' "$out/one.objects.tsv" "$out/default.objects.tsv" |
	awk -F'\t' '{printf "%-90s %7.1f %7.1f %5.2fx\n", $1, $2 / 1000, $3 / 1000, $3 / $2}' >"$out/objects.txt"
echo "per object (one, default, ratio): $out/objects.txt"
awk -v one="${total[one]}" -v def="${total[default]}" -v n="${#all[@]}" -v k="${#sample[@]}" 'BEGIN {
	printf "ratio default/one: %.2f\n", def / one
	printf "estimate for all %d objects: one %.0f s, default %.0f s of compile time\n", n, one * n / k, def * n / k
}'
