#!/bin/bash
# Builds kernel.cu for a spread of architectures on a machine with the CUDA toolkit and
# records what cuobjdump lists, so the fatbin parser can be compared with NVIDIA's tool.
# Usage: build.sh OUTDIR
set -u
out=${1:?outdir}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
nvcc --version > "$out/nvcc-version.txt" 2>&1 || { echo "no nvcc"; ls -d /usr/local/cuda* /opt/* 2>&1; exit 3; }
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=driver_version,compute_cap,name --format=csv,noheader > "$out/nvidia-smi-query.txt" 2>&1
cat /proc/driver/nvidia/version > "$out/proc-driver-version.txt" 2>&1
dir=$(dirname "$0")
build() { # name, nvcc flags...
  local name=$1; shift
  nvcc -shared -Xcompiler -fPIC -o "$out/$name.so" "$dir/kernel.cu" "$@" > "$out/$name.log" 2>&1 || { echo "build $name failed"; cat "$out/$name.log"; return; }
  cuobjdump --list-elf --list-ptx "$out/$name.so" > "$out/$name.cuobjdump.txt" 2>&1
  objcopy -O binary --only-section=.nv_fatbin "$out/$name.so" "$out/$name.nv_fatbin"
  rm -f "$out/$name.so"
}
build mixed -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90a,code=sm_90a \
  -gencode arch=compute_120a,code=sm_120a -gencode arch=compute_90,code=compute_90
build family -gencode arch=compute_100f,code=sm_100f -gencode arch=compute_120f,code=sm_120f -gencode arch=compute_103,code=sm_103
build plain120 -gencode arch=compute_120,code=sm_120 -gencode arch=compute_120,code=compute_120 -gencode arch=compute_75,code=sm_75
build compressed -Xfatbin=-compress-all -gencode arch=compute_89,code=sm_89 -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_89,code=compute_89
build nocompress -Xfatbin=-compress=false -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80
ls -la "$out"
