#!/usr/bin/env bash
# Makes the folder a GPU lease carries (.carry/ by default, which .git/info/exclude must name so
# that it travels as an ignored path): everything scripts/h200-pin-ab.sh and
# scripts/h200-bisect.sh read there, for a machine without Go, ccache or network.
#   llbuild.xz, bigramgguf.xz, randgguf   this tree's binaries (static, CGO off)
#   shim.test.xz                          the shim's tests (scripts/gpu-bench.sh overhead)
#   patches.test.xz                       the patches' tests (h200-pin-ab.sh logprob-cost: libllama's
#                                         decode step with the log probability option on ÷ off)
#   cpu-server.txz                        with CPU_SERVER=1 and LLBUILD_PATCHED_LLAMA_SERVER set: that
#                                         llama-server and its libraries (the overhead stage without a
#                                         GPU build; 4 MB, which the tree and the rest leave no room
#                                         for under 64 MiB since 2026-12-07, so only when asked)
#   old-testament.txt.xz                  the bigram pairs' text (Debian's bible-kjv)
#   llama.cpp-history.git.tar             upstream's history from ../shared (every pin: 1425386fd, 34af94cd9, 3f545becc)
#   ccache.txz                            this machine's ccache with its two libraries beside it
#                                         (RUNPATH $ORIGIN/../lib), so that a build reuses the
#                                         objects of the builds before it in the same lease
# About 56 MB; run/carry take 64 MiB in all. Usage: bash scripts/h200-carry.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.carry}
shared=${LLBUILD_SHARED:-$(cd .. && pwd)/shared}
git check-ignore -q "$dir/llbuild" || { echo "h200-carry.sh: git does not ignore $dir: echo /$dir/ >>.git/info/exclude first" >&2; exit 2; }
for c in xz patchelf ccache bible; do
	command -v "$c" >/dev/null || { echo "h200-carry.sh: $c is missing (apt-get install xz-utils patchelf ccache bible-kjv)" >&2; exit 2; }
done
mkdir -p "$dir"
export PATH=$PATH:/usr/local/go/bin CGO_ENABLED=0
go build -o "$dir/llbuild" . && go build -o "$dir/bigramgguf" ./internal/tools/bigramgguf && go build -o "$dir/randgguf" ./internal/tools/randgguf
go test -c -o "$dir/shim.test" ./shim
go test -c -o "$dir/patches.test" ./patches
rm -f "$dir"/llbuild.xz "$dir"/bigramgguf.xz "$dir"/shim.test.xz "$dir"/patches.test.xz
xz -9 "$dir/llbuild" "$dir/bigramgguf" "$dir/shim.test" "$dir/patches.test"
bible -f Gen1:1-Mal4:6 | sed 's/^[^ ]* //' | xz >"$dir/old-testament.txt.xz"
cp "$shared/llama.cpp/llama.cpp-history.git.tar" "$dir/"
# the patched CPU llama-server the tests run (provision.sh), for gpu-bench.sh's overhead stage
# without a GPU build: LLBUILD_PATCHED_LLAMA_SERVER names it (source /tmp/prov/env.sh or the like)
rm -f "$dir/cpu-server.txz"
if [ "${CPU_SERVER:-}" = 1 ] && [ -n "${LLBUILD_PATCHED_LLAMA_SERVER:-}" ]; then
	srv=$(dirname "$(readlink -f "$LLBUILD_PATCHED_LLAMA_SERVER")")
	tar -C "$srv" -cJf "$dir/cpu-server.txz" --exclude=artifacts.json .
fi
cc=$(mktemp -d)
mkdir -p "$cc/ccache/bin" "$cc/ccache/lib"
cp "$(command -v ccache)" "$cc/ccache/bin/"
for lib in $(ldd "$(command -v ccache)" | awk '/libzstd|libhiredis/ {print $3}'); do cp -L "$lib" "$cc/ccache/lib/"; done
patchelf --set-rpath "\$ORIGIN/../lib" "$cc/ccache/bin/ccache"
tar -C "$cc" -cJf "$dir/ccache.txz" ccache
rm -rf "$cc"
du -sh "$dir"
ls -l "$dir"
# what a call sends: the tracked and untracked files git does not ignore, and this folder
tree=$( (git ls-files -z; git ls-files -oz --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((tree + $(du -sb "$dir" | cut -f1)))
echo "a call sends $((total >> 20)) MiB (the tree $((tree >> 20)) MiB); the limit is 64 MiB"
((total <= 64 << 20)) || { echo "h200-carry.sh: over 64 MiB: leave out cpu-server.txz (CPU_SERVER unset) or what else the plan does not read" >&2; exit 1; }
