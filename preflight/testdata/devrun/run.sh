#!/bin/bash
# End-to-end run on a machine with an NVIDIA GPU and the CUDA toolkit: build a library
# whose kernels fit the GPU and one whose kernels do not, then run preflight with host
# detection on both, and keep nvidia-smi's outputs for the parser tests.
set -u
out=${1:?outdir}
here=$(dirname "$0")
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=driver_version,compute_cap,name,pci.device_id --format=csv,noheader > "$out/nvidia-smi-query.txt" 2>&1
w=$(mktemp -d)
cp "$here/../../fatbin/testdata/realbuild/kernel.cu" "$w/"
cd "$w"
nvcc -shared -Xcompiler -fPIC -cudart shared -o libggml-cuda-fits.so kernel.cu -gencode arch=compute_90,code=sm_90 2>&1 | tail -3
nvcc -shared -Xcompiler -fPIC -cudart shared -o libggml-cuda-misses.so kernel.cu -gencode arch=compute_86,code=sm_86 -gencode arch=compute_120a,code=sm_120a 2>&1 | tail -3
nvcc -shared -Xcompiler -fPIC -cudart shared -o libggml-cuda-ptx.so kernel.cu -gencode arch=compute_80,code=compute_80 2>&1 | tail -3
cp "$OLDPWD/$here/launch.cu" .
nvcc -cudart shared -o launch-fits launch.cu -gencode arch=compute_90,code=sm_90
nvcc -cudart shared -o launch-misses launch.cu -gencode arch=compute_86,code=sm_86 -gencode arch=compute_120a,code=sm_120a
nvcc -cudart shared -o launch-ptx launch.cu -gencode arch=compute_80,code=compute_80
for f in fits misses ptx; do
  ./launch-$f > "$out/launch-$f.txt" 2>&1; echo "exit $?" >> "$out/launch-$f.txt"
  "$OLDPWD/$here/llbuild" preflight --binary "$w/launch-$f" > "$out/preflight-launch-$f.txt" 2>&1; echo "exit $?" >> "$out/preflight-launch-$f.txt"
done
readelf -d libggml-cuda-fits.so | grep NEEDED > "$out/needed.txt"
for f in fits misses ptx; do
  "$OLDPWD/$here/llbuild" preflight --binary "$w/libggml-cuda-$f.so" > "$out/preflight-$f.txt" 2>&1; echo "exit $?" >> "$out/preflight-$f.txt"
  "$OLDPWD/$here/llbuild" preflight --binary "$w/libggml-cuda-$f.so" --json > "$out/preflight-$f.json" 2>/dev/null
  cuobjdump --list-elf --list-ptx "$w/libggml-cuda-$f.so" > "$out/cuobjdump-$f.txt" 2>&1
done
