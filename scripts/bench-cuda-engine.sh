#!/usr/bin/env bash
# bench-cuda-engine.sh SRC OUT [ARCH]: builds the recipe's llama.cpp (SRC: the pinned commit,
# a plain directory or checkout) with the patch series for one CUDA architecture (default 90)
# through the Dagger engine in the CUDA stand-in images (scripts/mk-cuda-standin.sh), twice:
# cold (what the engine has not cached) and again (cached). Needs the engine's environment
# (../shared/dagger/start-engine.sh) and the two stand-in archives in CUDA_DEVEL and
# CUDA_RUNTIME. Prints each run's wall time and the ninja step count; leaves the artifacts, the
# runtime image (OUT/image.tar) and the logs under OUT.
set -euo pipefail
src=${1:?usage: $0 SRC OUT [ARCH]} out=$(realpath -m "${2:?usage: $0 SRC OUT [ARCH]}") arch=${3:-90}
here=$(cd "$(dirname "$0")" && pwd)
: "${CUDA_DEVEL:?set CUDA_DEVEL to the devel stand-in archive}" "${CUDA_RUNTIME:?set CUDA_RUNTIME to the runtime stand-in archive}"
mkdir -p "$out"
bash "$here/mk-cuda-standin.sh" target "$arch" "$CUDA_DEVEL" "$CUDA_RUNTIME" >"$out/target.yaml"
bin=$out/llbuild
(cd "$here/.." && go build -o "$bin" .)
for run in cold again; do
	t0=$(date +%s.%N)
	"$bin" build --target-file "$out/target.yaml" --source "$src" \
		--base "devel=oci-archive:$CUDA_DEVEL" --base "runtime=oci-archive:$CUDA_RUNTIME" \
		--image-out "$out/image.tar" --out "$out/artifacts" >"$out/$run.stdout" 2>"$out/$run.log"
	t1=$(date +%s.%N)
	steps=$(grep -aoE '\[[0-9]+/[0-9]+\]' "$out/$run.log" | tail -1 || true)
	printf '%s: %.0f s, last ninja step %s, image %s\n' "$run" "$(echo "$t1 - $t0" | bc)" "${steps:-none (cached)}" "$(cat "$out/$run.stdout")"
done
