#!/usr/bin/env bash
# bench-executors.sh: one plan (cpu-v3, the recipe's pinned llama.cpp with the series) built cold
# by the host executor and then by the Dagger executor, one after the other on this machine, and
# the ratio. Cold: an empty ccache for the host build; a fresh engine state directory (so the
# devel image import, the source upload and an empty ccache volume are all counted) for the
# Dagger build. The two builds' files are compared byte for byte.
#
#   sudo bash scripts/bench-executors.sh [SHARED_DIR]     (default ../shared)
#
# Needs root, what scripts/test.sh installs, and ../shared (dagger/, llama.cpp/). It stops the
# engine that is running, if any, for the Dagger run (a fresh state needs a fresh engine) and
# starts it again afterwards. Nothing else may run on the machine meanwhile: it times builds.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=$(cd "${1:-../shared}" && pwd)
export PATH=$PATH:/usr/local/go/bin
[[ $(id -u) -eq 0 ]] || { echo "bench-executors.sh: run as root (the engine needs it)" >&2; exit 2; }

# the stand-in images and the unpacked source, as the test command provides them
# shellcheck source=scripts/provision.sh disable=SC1091
source scripts/provision.sh
provision_images
provision_source

tmp=$(mktemp -d /var/tmp/llbuild-bench.XXXXXX)
bin=$tmp/llbuild
go build -o "$bin" .
engine_was_running=0
if [[ -f /run/dagger/engine.pid ]] && kill -0 "$(cat /run/dagger/engine.pid)" 2>/dev/null; then
	engine_was_running=1
fi
cleanup() {
	bash "$shared/dagger/stop-engine.sh" >/dev/null 2>&1 || true
	if ((engine_was_running)); then
		bash "$shared/dagger/start-engine.sh" >/dev/null 2>&1 || echo "bench-executors.sh: could not restart the engine" >&2
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "host executor, empty ccache ..." >&2
t0=$(date +%s.%N)
host_dir=$(CCACHE_DIR=$tmp/ccache "$bin" build -t cpu-v3 --executor host --source "$LLBUILD_TEST_LLAMA_SOURCE" \
	--out "$tmp/host-out" --work-dir "$tmp/work" 2>"$tmp/host.log") || { tail -30 "$tmp/host.log" >&2; exit 1; }
t1=$(date +%s.%N)

echo "dagger executor, fresh engine state ..." >&2
bash "$shared/dagger/stop-engine.sh" >/dev/null 2>&1 || true
env=$(STATE=$tmp/state bash "$shared/dagger/start-engine.sh" 2>/dev/null)
eval "$env"
t2=$(date +%s.%N)
dagger_dir=$("$bin" build -t cpu-v3 --source "$LLBUILD_TEST_LLAMA_SOURCE" --base "devel=oci-archive:$LLBUILD_TEST_DEVEL_IMAGE" \
	--out "$tmp/dagger-out" 2>"$tmp/dagger.log") || { tail -30 "$tmp/dagger.log" >&2; exit 1; }
t3=$(date +%s.%N)

same=0 differ=0
while read -r f; do
	if cmp -s "$host_dir/$f" "$dagger_dir/$f"; then same=$((same + 1)); else differ=$((differ + 1)); echo "differs: $f" >&2; fi
done < <(cd "$dagger_dir" && find . -type f ! -name '*.json' | sort)

steps=$(grep -oE 'step done.*name="?[a-z ]+"? took=[0-9.a-zµ]+' "$tmp/dagger.log" | sed -E 's/.*name="?([a-z ]+)"? took=/\1 /' | paste -sd, - || true)
awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v same="$same" -v differ="$differ" -v steps="$steps" -v cores="$(nproc)" 'BEGIN {
	h = t1 - t0; d = t3 - t2
	printf "machine: %d cores\n", cores
	printf "host executor, cold ccache:        %7.1f s\n", h
	printf "dagger executor, fresh engine:     %7.1f s\n", d
	printf "ratio dagger/host:                 %7.3f\n", d / h
	printf "files identical: %d, differing: %d\n", same, differ
	printf "dagger steps: %s\n", steps
}'
