#!/bin/bash
# Compiles some of llama.cpp's real ggml-cuda sources (copied to .src/preflight-ggml for the
# run, never committed) the way ggml's CMake does, links them into a shared library, and
# compares preflight's fat binary listing with cuobjdump's. Usage: ggml-cuda.sh OUTDIR
set -u
out=${1:?outdir}
repo=$(pwd)
g=$repo/.src/preflight-ggml
export PATH=$PATH:/usr/local/cuda/bin
w=$(mktemp -d)
cd "$w"
archs="-gencode arch=compute_75,code=compute_75 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=compute_90 -gencode arch=compute_120a,code=sm_120a"
srcs="argsort softmax getrows norm"
pids=()
for s in $srcs; do
  nvcc -c -O3 -std=c++17 -Xcompiler -fPIC -use_fast_math -extended-lambda $archs \
    -DGGML_USE_CUDA -DGGML_CUDA_USE_GRAPHS -I "$g/include" -I "$g/src" -I "$g/src/ggml-cuda" \
    -o "$s.o" "$g/src/ggml-cuda/$s.cu" > "$s.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait $p; done
ls *.o | tee "$out/objects.txt"
for f in *.log; do [ -s "$f" ] && { echo "== $f"; tail -5 "$f"; } ; done > "$out/compile-errors.txt"
nvcc -shared -cudart shared -o libggml-cuda-part.so *.o > "$out/link.log" 2>&1
ls -la libggml-cuda-part.so >> "$out/link.log"
cuobjdump --list-elf --list-ptx libggml-cuda-part.so > libggml-cuda-part.so.cuobjdump.txt 2>&1
cp libggml-cuda-part.so.cuobjdump.txt "$out/"
# fatbinls is built beside this script: go build -o preflight/testdata/devrun/fatbinls ./preflight/fatbin/cmd/fatbinls
"$repo/preflight/testdata/devrun/fatbinls" libggml-cuda-part.so > "$out/fatbinls.txt" 2>&1
grep -E '^(ELF|PTX) file' libggml-cuda-part.so.cuobjdump.txt | sed 's/file  */file /' > want.txt
sed 's/file  */file /' "$out/fatbinls.txt" > got.txt
diff want.txt got.txt > "$out/fatbin-compare.txt" && echo "fatbinls and cuobjdump agree on $(wc -l < got.txt) entries" >> "$out/fatbin-compare.txt"
"$repo/preflight/testdata/devrun/llbuild" preflight --binary "$w/libggml-cuda-part.so" > "$out/preflight-ggml-cuda-part.txt" 2>&1
echo "exit $?" >> "$out/preflight-ggml-cuda-part.txt"
