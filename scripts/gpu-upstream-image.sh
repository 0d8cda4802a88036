#!/bin/bash
# gpu-upstream-image.sh: issue 55 item 3 on the GPU machine (no Go, no docker, no network):
# upstream's CUDA server image, as ghcr.io/ggml-org/llama.cpp:server-cuda is built, bundled by
# llbuild bundle --image, preflighted, served and benched against llbuild's own h200 build. Runs
# the root test TestBundleImageUpstreamCUDA (cmd_bundle_upstream_cuda_test.go).
#
# Carry (a folder git ignores, .carry/; 64 MiB in all), made here with Go:
#   CGO_ENABLED=0 go build -o .carry/llbuild . && xz -9 -f .carry/llbuild
#   CGO_ENABLED=0 go test -tags gpu -c -o .carry/root.test . && xz -9 -f .carry/root.test
#   cp ../shared/llama.cpp/llama.cpp-PIN.tar.xz .carry/   (PIN: recipes/server.yaml's commit, 9 hex)
#     or, instead of the tarball, upstream's history as scripts/h200-carry.sh carries it
#     (.carry/llama.cpp-history.git.tar, which holds the pin)
#   optional: .carry/ccache.txz as scripts/h200-carry.sh makes it
# With scripts/h200-carry.sh's folder plus root.test.xz, one lease runs this and then
# scripts/h200-pin-ab.sh: the own build is that script's build-new (/tmp/pins/new), made once.
# (only the .xz files: about 33 MB with the tarball; .carry must be ignored by git, and named in
# run's carry: [".carry"])
# and run, from the repository root, with the longest timeout (600 s):
#   bash scripts/gpu-upstream-image.sh .carry
# Each step leaves its result under /tmp and is skipped when run again, so that a call cut off
# at 10 minutes (both builds together take about 9) is finished by the same command on the same
# warm machine: a build cut off goes on where ninja stopped. The steps (STAGE, the
# second argument, runs one; default all):
#   upstream  the pin built as .devops/cuda.Dockerfile builds it, with its cmake flags
#               -DGGML_NATIVE=OFF -DGGML_CUDA=ON -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON
#               -DLLAMA_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=${CUDA_DOCKER_ARCH}
#               -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
#             (CUDA_DOCKER_ARCH=90: sm_90; ARCH overrides) and, since this machine has no network
#             and no libssl-dev for certain, -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF (the
#             Dockerfile's node stage builds the web UI); only llama-server's target (ggml
#             depends on every backend module), about 4-5 min with -j16; then laid out as the
#             Dockerfile lays out /app: `find build -name "*.so*" -exec cp -P {} /app/lib` and
#             the server, into /tmp/app
#   own       llbuild build --executor host -t h200 of the same pin with the series, into
#             /tmp/pins/new (about 4 min), where scripts/h200-pin-ab.sh's build-new puts it
#   test      the root test with LLBUILD_UPSTREAM_CUDA_APP=/tmp/app, LLBUILD_UPSTREAM_CUDA_TARGET
#             (TARGET, default h200) and LLBUILD_PATCHED_LLAMA_SERVER the own build's llama-server
#             (its directory holds the artifacts the test bundles and benches against); the log
#             in $OUT/test.log, the bench campaign in $OUT/bench.tgz (ROUNDS: its --rounds,
#             default 1; the model is the test's tiny one, so it proves the bench runs, not a speed)
set -uo pipefail
D=$(cd "${1:?usage: gpu-upstream-image.sh CARRY_DIR [upstream|own|test|all]}" && pwd); stage=${2:-all}
OUT=${OUT:-/tmp/gpu-upstream-out}; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v ccache >/dev/null && [ -f "$D"/ccache.txz ]; then
	[ -x /tmp/cc/ccache/bin/ccache ] || { mkdir -p /tmp/cc && tar -xJf "$D"/ccache.txz -C /tmp/cc; }
	export PATH=/tmp/cc/ccache/bin:$PATH
fi
for f in "$D"/llbuild.xz "$D"/root.test.xz; do # carried compressed
	[ -e "$f" ] && [ ! -e "${f%.xz}" ] && xz -dk "$f" && chmod +x "${f%.xz}"
done
pin=$(awk '/^  commit:/{print substr($2, 1, 9); exit}' recipes/server.yaml)
tarball=$D/llama.cpp-$pin.tar.xz
jobs=$(nproc)

source_tree() { # source_tree DIR: the pin's source, from the tarball or from the carried history
	[ -f "$1"/CMakeLists.txt ] && return 0 # kept for a step cut off and run again
	rm -rf "$1" && mkdir -p "$1" || return 1
	if [ -f "$tarball" ]; then
		tar -xJf "$tarball" -C "$1"
	elif [ -f "$D"/llama.cpp-history.git.tar ]; then
		[ -d /tmp/hist/llrange.git ] || { mkdir -p /tmp/hist && tar -xf "$D"/llama.cpp-history.git.tar -C /tmp/hist; } || return 1
		# the history leaves out models/'s blobs (vocabularies, not needed to build): checked out
		# through an index without them, since git archive stops at the first missing blob
		local g=/tmp/hist/llrange.git idx=/tmp/index-$$
		GIT_INDEX_FILE=$idx git --git-dir="$g" --work-tree="$1" read-tree "$pin" &&
			GIT_INDEX_FILE=$idx git --git-dir="$g" --work-tree="$1" rm --cached -r -q models &&
			GIT_INDEX_FILE=$idx git --git-dir="$g" --work-tree="$1" checkout-index -a
		[ -d "$1"/src ] || { rm -rf "$1"; return 1; }
		rm -f "$idx"
	else
		echo "no $tarball nor $D/llama.cpp-history.git.tar carried" >&2
		return 1
	fi
}

upstream() {
	[ -x /tmp/app/llama-server ] && { echo "upstream: /tmp/app already built"; return 0; }
	local t0=$SECONDS src=/tmp/src-upstream launcher=()
	source_tree "$src" || return 1
	grep -n 'cmake -B build' "$src"/.devops/cuda.Dockerfile | tee "$OUT"/dockerfile-cmake.txt
	command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
	cmake -S "$src" -B "$src"/build -G Ninja -DGGML_NATIVE=OFF -DGGML_CUDA=ON -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
		-DLLAMA_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF "${launcher[@]}" >"$OUT"/upstream-cmake.log 2>&1 ||
		{ tail -40 "$OUT"/upstream-cmake.log; return 1; }
	cmake --build "$src"/build --config Release -j"$jobs" --target llama-server >"$OUT"/upstream-build.log 2>&1 ||
		{ tail -40 "$OUT"/upstream-build.log; return 1; }
	rm -rf /tmp/app.new && mkdir -p /tmp/app.new &&
		(cd "$src" && find build -name "*.so*" -exec cp -P {} /tmp/app.new \;) &&
		cp "$src"/build/bin/llama-server /tmp/app.new/ || return 1
	[ -f /tmp/app.new/libggml-cuda.so ] || { echo "upstream: the build made no libggml-cuda.so" >&2; return 1; }
	rm -rf /tmp/app && mv /tmp/app.new /tmp/app
	readelf -d /tmp/app/llama-server | grep -E 'NEEDED|RUNPATH|RPATH' >"$OUT"/upstream-dynamic.txt
	find /tmp/app -mindepth 1 -printf '%M %10s %f %l\n' | sort -k3 | tee "$OUT"/upstream-app.txt
	echo "upstream ($pin): /tmp/app built in $((SECONDS - t0)) s"
}

own() {
	[ -n "$(find /tmp/pins/new -name artifacts.json 2>/dev/null | head -1)" ] && { echo "own: /tmp/pins/new already built"; return 0; }
	local t0=$SECONDS src=/tmp/src-own dir
	source_tree "$src" || return 1
	dir=$("$D"/llbuild build --executor host -t h200 --source "$src" --out /tmp/pins/new --work-dir /tmp/work-new 2>"$OUT"/own-build.log) ||
		{ tail -40 "$OUT"/own-build.log; return 1; }
	echo "own ($pin): built $dir in $((SECONDS - t0)) s"
}

run_test() {
	local art t0=$SECONDS rc
	art=$(dirname "$(find /tmp/pins/new -name artifacts.json 2>/dev/null | head -1)")
	if [ ! -x /tmp/app/llama-server ] || [ ! -x "$art"/llama-server ]; then
		echo "test: build upstream and own first" >&2
		return 1
	fi
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT"/gpu.txt 2>&1
	rm -rf /tmp/upstream-bench
	LLBUILD_UPSTREAM_CUDA_APP=/tmp/app LLBUILD_UPSTREAM_CUDA_TARGET=${TARGET:-h200} LLBUILD_PATCHED_LLAMA_SERVER=$art/llama-server \
		LLBUILD_UPSTREAM_CUDA_BENCH_DIR=/tmp/upstream-bench LLBUILD_UPSTREAM_CUDA_ROUNDS=${ROUNDS:-1} \
		"$D"/root.test -test.run 'TestBundleImageUpstreamCUDA$' -test.v -test.count=1 -test.timeout 9m >"$OUT"/test.log 2>&1
	rc=$?
	[ -d /tmp/upstream-bench ] && tar -C /tmp -czf "$OUT"/bench.tgz upstream-bench
	tail -60 "$OUT"/test.log
	echo "test: exit $rc in $((SECONDS - t0)) s"
	return $rc
}

case $stage in
upstream) upstream ;;
own) own ;;
test) run_test ;;
all) upstream && own && run_test ;;
*) echo "gpu-upstream-image.sh: no stage $stage" >&2; exit 2 ;;
esac
