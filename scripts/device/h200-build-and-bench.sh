#!/bin/bash
# Device run: real CUDA build of llama-server for h200 (sm_90) through llbuild's host executor,
# shim vs direct throughput on the GPU, preflight vs cuobjdump, stub linking with libcuda hidden.
R=$(pwd)
export PATH=/usr/local/cuda/bin:$PATH
exec > >(tee $OUT/run.log) 2>&1
set -x
nproc; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; nvidia-smi | head -4
which g++ gcc git cmake ninja nvcc ccache; nvcc --version | tail -2; cmake --version | head -1; g++ --version | head -1
mkdir -p /tmp/src && tar xzf .src/llama.cpp.tar.gz -C /tmp/src
.dev/llbuild target detect --name device > $OUT/device-target.yaml
T0=$(date +%s)
timeout 330 .dev/llbuild server --executor host -t h200 --source /tmp/src/llama.cpp --out /tmp/out --work-dir /tmp/work > $OUT/server.stdout 2> $OUT/server.log
echo "build rc=$? secs=$(( $(date +%s)-T0 ))"
tail -30 $OUT/server.log
A=$(tail -1 $OUT/server.stdout)
ls -la $A
cp $A/artifacts.json $A/provenance.json $OUT/ 2>/dev/null
$A/llama-server --version
for t in h200 olares-one rtx3090; do .dev/llbuild preflight --target $t --binary $A/llama-server --binary $A/libggml-cuda.so --binary $A/libggml-cpu.so > $OUT/preflight-$t.txt 2>&1; echo "preflight $t rc=$?"; done
.dev/llbuild preflight --binary $A/llama-server --binary $A/libggml-cuda.so --binary $A/libggml-cpu.so --json > $OUT/preflight-here.json 2>&1; echo "preflight here rc=$?"
cat $OUT/preflight-h200.txt | head -40
cuobjdump --list-elf --list-ptx $A/libggml-cuda.so > $OUT/cuobjdump.txt 2>&1; wc -l $OUT/cuobjdump.txt; sort $OUT/cuobjdump.txt | awk '{print $NF}' | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c
# shim vs direct on the GPU, 1B-class random model
cd $R/shim 2>/dev/null || cd $R
SHIM_LLAMA_SERVER=$A/llama-server SHIM_BENCH_MODEL=1b SHIM_SERVER_ARGS="-ngl 99 -t 8" timeout 200 $R/.dev/shim.test -test.run XXX -test.bench . -test.benchtime 10x -test.count 2 2>&1 | tee $OUT/shim-bench-gpu.txt | grep -v "^\s*$" | tail -30
cd $R
# stub linking: relink with the driver library out of the linker's reach
B=$(dirname $(find /tmp/work -name build.ninja | head -1)); S=$(grep -m1 CMAKE_HOME_DIRECTORY $B/CMakeCache.txt | cut -d= -f2)
echo "build=$B src=$S"; ldconfig -p | grep libcuda; ls -la /usr/local/nvidia/lib64/libcuda* 2>/dev/null | head -3
hide='for f in $(ldconfig -p | awk "/libcuda\\.so/{print \$NF}") /usr/local/nvidia/lib64/libcuda.so*; do [ -e $f ] && mount --bind /dev/null $f; done'
if unshare -m true; then
  rm -f $B/bin/llama-server $B/bin/libggml-cuda.so*
  timeout 100 unshare -m bash -c "$hide; env -u LD_LIBRARY_PATH ninja -C $B llama-server" > $OUT/relink-patched.log 2>&1; echo "patched relink rc=$?"; tail -5 $OUT/relink-patched.log
  (cd $S && patch -R -p1 < $R/patches/0001-ggml-cuda-link-driver-interface.patch)
  rm -f $B/bin/llama-server $B/bin/libggml-cuda.so*
  timeout 120 unshare -m bash -c "$hide; env -u LD_LIBRARY_PATH ninja -C $B llama-server" > $OUT/relink-unpatched.log 2>&1; echo "unpatched relink rc=$?"; grep -m5 -i "undefined\|not found\|error" $OUT/relink-unpatched.log
else
  echo "no mount namespaces here: stub-link test not run"
fi
