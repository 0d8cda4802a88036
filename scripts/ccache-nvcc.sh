#!/bin/bash
# ccache-nvcc.sh: do CUDA objects come out of ccache when the same source is built in another
# work directory? Every plan builds in a work directory of its own (hostexec), so a bisect's
# probes, one commit apart, share CUDA objects only if the cache key holds no path of the work
# directory. Builds a one-kernel CMake CUDA library (written here, nothing of upstream's) twice,
# in /w/A and /w/B, inside the CUDA stand-in devel image's root file system (nvcc, cmake, ninja
# and ccache from Debian), with the CUDA flags and ccache environment of `llbuild plan -t h200`,
# once as the plan has them and once without CCACHE_IGNOREOPTIONS; prints ccache's counters of the
# second build. A second build that hits for its .cu object needs the ignore.
#   bash scripts/ccache-nvcc.sh DEVEL.tar [CCACHE_DIR_OF_A_CCACHE]
# DEVEL.tar: the stand-in's OCI archive (scripts/provision.sh makes it: $LLBUILD_TEST_CUDA_DEVEL_IMAGE);
# the optional second argument: a ccache tree (bin/ccache, lib/) to use instead of the image's,
# e.g. the one scripts/h200-bisect.sh carries (tar -xJf .carry/ccache.txz -C /tmp/cc: /tmp/cc/ccache).
# Needs root (chroot, mount).
set -euo pipefail
img=${1:?usage: ccache-nvcc.sh DEVEL.tar [CCACHE_TREE]}
cc=${2:-}
cd "$(dirname "$0")/.."
root=$(mktemp -d /tmp/ccache-nvcc.XXXXXX)
trap 'umount "$root/fs/proc" 2>/dev/null || true; rm -rf "$root"' EXIT
oci=$root/oci
mkdir -p "$oci" "$root/fs"
tar -xf "$img" -C "$oci"
for layer in $(python3 -c '
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
man = json.load(open(sys.argv[1] + "/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
print(" ".join(l["digest"].split(":")[1] for l in man["layers"]))' "$oci"); do
	tar -xf "$oci/blobs/sha256/$layer" -C "$root/fs"
done
rm -rf "$oci"
fs=$root/fs
mount -t proc proc "$fs/proc"
[ -z "$cc" ] || { mkdir -p "$fs/opt" && cp -r "$cc" "$fs/opt/ccache"; }

# the plan's CUDA flags and ccache environment, @SRC@ left for each work directory
go run . plan -t h200 --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
flags = [a.split("=", 1)[1] for a in p["configure"] if a.startswith("-DCMAKE_CUDA_FLAGS=")]
print("CUDA_FLAGS=\x27%s\x27" % flags[0])
for k in ("CCACHE_NOHASHDIR", "CCACHE_IGNOREOPTIONS"):
    print("%s=\x27%s\x27" % (k, p["env"].get(k, "")))' >"$fs/plan.env"
cat "$fs/plan.env"

mkdir -p "$fs/w/A/src/inc"
cat >"$fs/w/A/src/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(t LANGUAGES CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES 90)
add_library(k SHARED k.cu h.cpp)
target_include_directories(k PRIVATE inc)
EOF
printf '#pragma once\n__global__ void add(float *a, const float *b, int n);\n' >"$fs/w/A/src/inc/k.h"
printf '#include "k.h"\n__global__ void add(float *a, const float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }\nvoid launch(float *a, const float *b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }\n' >"$fs/w/A/src/k.cu"
echo 'int h() { return 1; }' >"$fs/w/A/src/h.cpp"
cp -r "$fs/w/A" "$fs/w/B"
cat >"$fs/w/run.sh" <<'EOF'
set -euo pipefail
. /plan.env
[ -x /opt/ccache/bin/ccache ] && export PATH=/opt/ccache/bin:$PATH
export CCACHE_NOHASHDIR
[ "$1" = plan ] && export CCACHE_IGNOREOPTIONS
export CCACHE_DIR=/w/cache-$1
for d in A B; do
	src=/w/$d/src
	export CCACHE_BASEDIR=$src
	rm -rf /w/$d/build
	cmake -S $src -B /w/$d/build -G Ninja -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
		"-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$src=." "-DCMAKE_CUDA_FLAGS=${CUDA_FLAGS//@SRC@/$src}" >/dev/null
	ccache -z >/dev/null
	ninja -C /w/$d/build >/dev/null
done
echo "$1: $(ccache --version | head -1); the second work directory's build: $(ccache --print-stats | awk '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {printf "%s %s  ", $1, $2}')"
EOF
chroot "$fs" bash /w/run.sh plan
chroot "$fs" bash /w/run.sh without-ignore
