#!/bin/bash
# h200-engine-vs-host.sh CARRY STAGE: runs the sm_90 llama-server that the Dagger engine built in
# the CUDA stand-in (scripts/bench-cuda-engine.sh) on a GPU machine without Go, network or CUDA 12,
# against the same commit and series built there with --executor host (its own CUDA toolkit).
# Everything it needs comes in one payload, too big for one trip, carried in pieces:
#   here:   scripts/h200-engine-vs-host.sh pack BENCH_OUT CUDA_RUNTIME_ARCHIVE SRC_TARBALL PARTS_DIR
#           (writes PARTS_DIR/payload.part.NN of 60 MB and PARTS_DIR/payload.sha256)
#   there:  STAGE piece   appends CARRY/payload.part.* to /tmp/payload.tar (one trip per piece;
#                         /tmp lasts only while the machine stays warm: chain the calls)
#           STAGE build   checks the payload's sha256, unpacks it, builds the host executor's
#                         h200 plan into /tmp/host (about 4 min on 16 cores)
#           STAGE ab      preflight of the engine build, bundles of both (a random 0.8B llama),
#                         llbuild bench ENGINE HOST --mode full --rounds 3; results under $OUT
# The payload: llbuild and randgguf (CGO_ENABLED=0), the engine build's artifact directory and
# target file, the runtime stand-in's CUDA 12 libraries (libcudart, libcublas, libcublasLt: the
# build's DT_NEEDED), and the recipe's source tarball.
set -euo pipefail
stage=${2:?usage: h200-engine-vs-host.sh CARRY piece|build|ab, or pack ...}
if [ "$1" = pack ]; then
	bench=$(realpath "$2") runtime=$3 src=$4 parts=$(realpath -m "$5")
	here=$(cd "$(dirname "$0")/.." && pwd)
	w=$(mktemp -d)
	trap 'rm -rf "$w"' EXIT
	mkdir -p "$w/p" "$parts"
	(cd "$here" && CGO_ENABLED=0 go build -o "$w/p/llbuild" . && CGO_ENABLED=0 go build -o "$w/p/randgguf" ./internal/tools/randgguf)
	art=$(dirname "$(find "$bench/artifacts" -name artifacts.json | head -1)")
	cp "$bench/target.yaml" "$w/p/engine-target.yaml"
	tar -C "$(dirname "$art")" -cf "$w/p/engine.tar" "$(basename "$art")"
	basename "$art" >"$w/p/engine.dir"
	# the runtime image's one layer: only the CUDA libraries
	python3 - "$runtime" "$w/p/cuda12.tar" <<'PY'
import json, sys, tarfile
t = tarfile.open(sys.argv[1])
idx = json.load(t.extractfile('index.json'))
man = json.load(t.extractfile('blobs/sha256/' + idx['manifests'][0]['digest'].split(':')[1]))
out = tarfile.open(sys.argv[2], 'w')
for l in man['layers']:
    lt = tarfile.open(fileobj=t.extractfile('blobs/sha256/' + l['digest'].split(':')[1]), mode='r|*')
    for e in lt:
        n = e.name.lstrip('./')
        if n.startswith('usr/lib/x86_64-linux-gnu/libcu') and (e.isfile() or e.issym()):
            e.name = n.split('/')[-1]
            out.addfile(e, lt.extractfile(e) if e.isfile() else None)
out.close()
PY
	cp "$src" "$w/p/"
	tar -C "$w/p" -cf - . | xz -T2 -3 >"$w/payload.txz"
	rm -f "$parts"/payload.part.*
	split -b 60m -d "$w/payload.txz" "$parts/payload.part."
	sha256sum "$w/payload.txz" | cut -d' ' -f1 >"$parts/payload.sha256"
	ls -la "$parts"
	exit 0
fi
D=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
case $stage in
piece)
	for p in "$D"/payload.part.*; do cat "$p" >>/tmp/payload.txz; echo "appended $(basename "$p"): /tmp/payload.txz is $(stat -c %s /tmp/payload.txz) bytes"; done ;;
build)
	[ "$(sha256sum /tmp/payload.txz | cut -d' ' -f1)" = "$(cat "$D"/payload.sha256)" ] || { echo "payload sha256 differs: a piece is missing (the machine went cold between calls?)"; exit 1; }
	mkdir -p /tmp/p /tmp/cuda12 /tmp/src /tmp/engine
	[ -x /tmp/p/llbuild ] || xz -dc /tmp/payload.txz | tar -xf - -C /tmp/p
	tar -xf /tmp/p/cuda12.tar -C /tmp/cuda12
	tar -xf /tmp/p/engine.tar -C /tmp/engine
	[ -n "$(ls /tmp/src)" ] || tar -xJf /tmp/p/llama.cpp-*.tar.xz -C /tmp/src
	src=$(dirname "$(find /tmp/src -maxdepth 3 -path "*/ggml/CMakeLists.txt" | head -1)")/..; src=$(cd "$src" && pwd)
	t0=$SECONDS
	/tmp/p/llbuild build --executor host -t h200 --source "$src" --out /tmp/host --work-dir /tmp/work >/tmp/host.dir 2>"$OUT/host-build.log" ||
		{ tail -30 "$OUT/host-build.log"; exit 1; }
	echo "host build: $(cat /tmp/host.dir) in $((SECONDS - t0)) s" | tee "$OUT/host-build.txt" ;;
ab)
	eng=/tmp/engine/$(cat /tmp/p/engine.dir) host=$(cat /tmp/host.dir)
	# the CUDA 12 runtime as a host (or the runtime image) has it: on the loader's path
	echo /tmp/cuda12 >/etc/ld.so.conf.d/llbuild-cuda12.conf && ldconfig
	{
		echo "== engine build: DT_NEEDED and what resolves them here"
		readelf -d "$eng/libggml-cuda.so" | grep NEEDED
		ldd "$eng/llama-server" | grep -E 'cud|cublas|ggml'
		echo "== preflight --binary (engine build, this host)"
		/tmp/p/llbuild preflight --binary "$eng/llama-server" --binary "$eng/libggml-cuda.so" || echo "preflight exit $?"
		nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
	} 2>&1 | tee "$OUT/preflight.txt"
	[ -f /tmp/b.gguf ] || /tmp/p/randgguf -shape 1b -vocab 32000 -o /tmp/b.gguf
	common=(--model /tmp/b.gguf --server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	/tmp/p/llbuild bundle --target-file /tmp/p/engine-target.yaml --artifacts "$eng" -o /tmp/bEngine "${common[@]}"
	/tmp/p/llbuild bundle -t h200 --artifacts "$host" -o /tmp/bHost "${common[@]}"
	for b in bEngine bHost; do echo "== preflight --bundle $b"; /tmp/p/llbuild preflight --bundle /tmp/$b || echo "preflight exit $?"; done 2>&1 | tee -a "$OUT/preflight.txt"
	t0=$SECONDS
	/tmp/p/llbuild bench /tmp/bEngine /tmp/bHost --mode full --rounds 3 --dir /tmp/runs >"$OUT/bench.txt" 2>"$OUT/bench.log" || echo "bench exit $?"
	cp /tmp/runs/records.json "$OUT/" 2>/dev/null || true
	cat "$OUT/bench.txt"
	tail -40 "$OUT/bench.log"
	echo "bench: $((SECONDS - t0)) s" ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
