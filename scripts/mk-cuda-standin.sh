#!/usr/bin/env bash
# mk-cuda-standin.sh devel|runtime OUT.tar: a stand-in for nvidia/cuda's devel or runtime image,
# made from Debian trixie's non-free CUDA 12.4.1 packages with ../shared/dagger/mk-image.sh, as
# an OCI archive for `--base ROLE=oci-archive:OUT.tar` or a target file that pins its digest.
# Prints the image digest on stdout. Needs root, mmdebstrap (installed when missing), go.
#
#   devel:   build-essential cmake ninja-build git ccache patch at the versions of
#            recipes/apt/debian-13.yaml, and nvidia-cuda-toolkit (nvcc, cuobjdump, cudart,
#            cuBLAS, the driver stub /usr/lib/x86_64-linux-gnu/stubs/libcuda.so). No driver:
#            nvidia-cuda-dev depends on libcuda1 | libcuda.so.1, which an empty package
#            (llbuild-no-cuda-driver) provides, with the real driver libraries pinned out, so the
#            only libcuda in the image is the stub, as in nvidia/cuda's devel images. To keep
#            the archive small (and its import, its reading and its making fast), dpkg leaves
#            out what no llama.cpp build links: the toolkit's static archives (lib*_static.a,
#            about 1.4 GB) except libcudart_static.a, which nvcc links by default; cuFFT,
#            cuSPARSE, cuSOLVER, cuRAND, NPP, nvJPEG and nvperf (about 1.1 GB unpacked);
#            /usr/share/doc and man. nvcc, cudart, cuBLAS, cuBLASLt and the stub are whole. The
#            exclusions hold while the image is made only: its dpkg unpacks everything later.
#   runtime: minbase, libgomp1, ca-certificates, libcudart12, libcublas12, libcublaslt12: no
#            libcuda, no compiler.
#   target ARCH DEVEL.tar RUNTIME.tar: prints a target file (86 or 90) whose images are the two
#            archives, pinned by digest, for a host with such a GPU on driver 550 (CUDA 12.4):
#            llbuild build --target-file FILE --base devel=oci-archive:DEVEL.tar ...
# Both carry CUDA_VERSION, NVIDIA_REQUIRE_CUDA, NVIDIA_VISIBLE_DEVICES and
# NVIDIA_DRIVER_CAPABILITIES in their config, as NVIDIA's images do.
set -euo pipefail
if [[ ${1:-} == target ]]; then
	arch=${2:?usage: $0 target 86|90 DEVEL.tar RUNTIME.tar}
	digest() { tar -xOf "$1" index.json | python3 -c 'import json,sys; m=json.load(sys.stdin)["manifests"]; assert len(m)==1, "one image per archive"; print(m[0]["digest"])'; }
	devel=$(digest "${3:?usage: $0 target 86|90 DEVEL.tar RUNTIME.tar}") runtime=$(digest "${4:?usage: $0 target 86|90 DEVEL.tar RUNTIME.tar}")
	case $arch in
	90) gpu="NVIDIA H100 80GB HBM3" cc=9.0 brand=nvidia ;;
	86) gpu="NVIDIA GeForce RTX 3090" cc=8.6 brand=geforce ;;
	*) echo "mk-cuda-standin.sh: arch must be 86 or 90 (CUDA 12.4 builds both; sm_120 needs 12.8)" >&2; exit 2 ;;
	esac
	cat <<-EOF
		schemaVersion: 1
		name: standin-cuda-sm$arch
		description: >-
		  llbuild's CUDA stand-in images (scripts/mk-cuda-standin.sh: Debian trixie's CUDA 12.4.1
		  toolkit, no driver in the devel image) building sm_$arch, for a host with a GPU of compute
		  capability $cc on a 550 driver (CUDA 12.4).
		host:
		  cpu:
		    features: [SSE42, AVX, AVX2, FMA, F16C, BMI1, BMI2]
		  gpus:
		    - vendor: nvidia
		      name: $gpu
		      computeCapability: "$cc"
		      brand: $brand
		  driver:
		    version: 550.163.01
		    cuda: "12.4"
		build:
		  backend: cuda
		  cuda:
		    toolkit: 12.4.1
		    architectures: ["$arch"]
		  isa: {GGML_SSE42: true, GGML_AVX: true, GGML_AVX_VNNI: false, GGML_AVX2: true, GGML_BMI2: true, GGML_AVX512: false, GGML_AVX512_VBMI: false, GGML_AVX512_VNNI: false, GGML_AVX512_BF16: false, GGML_FMA: true, GGML_F16C: true, GGML_AMX_TILE: false, GGML_AMX_INT8: false, GGML_AMX_BF16: false}
		  images:
		    devel: llbuild-standin-devel:trixie@$devel
		    runtime: llbuild-standin-runtime:trixie@$runtime
		    develDistro: debian-13
	EOF
	exit 0
fi
role=${1:?usage: $0 devel|runtime OUT.tar}
out=$(realpath -m "${2:?usage: $0 devel|runtime OUT.tar}")
here=$(cd "$(dirname "$0")" && pwd)
shared=${LLBUILD_SHARED:-$(cd "$here/../.." && pwd)/shared}
mk=$shared/dagger/mk-image.sh
[[ -f $mk ]] || { echo "mk-cuda-standin.sh: $mk not found: set LLBUILD_SHARED to the folder holding dagger/" >&2; exit 2; }
pins=$here/../recipes/apt/debian-13.yaml
export SUITE=trixie COMPONENTS=main,contrib,non-free
export IMAGE_ENV='CUDA_VERSION=12.4.1 NVIDIA_REQUIRE_CUDA=cuda>=12.4 NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility'
work=$(mktemp -d "$(dirname "$out")/.cuda-standin-XXXXXX")
trap 'rm -rf "$work"' EXIT
case $role in
devel)
	# name=version of every package the pins file lists (two-space indented "name: version")
	versions=$(awk '/^packages:/{p=1; next} p && /^  [a-z0-9]/{gsub(/"/, "", $2); sub(":$", "", $1); printf "%s%s=%s", sep, $1, $2; sep=","}' "$pins")
	[[ -n $versions ]] || { echo "mk-cuda-standin.sh: no packages in $pins" >&2; exit 2; }
	mkdir -p "$work/pkg/DEBIAN"
	cat >"$work/pkg/DEBIAN/control" <<-'EOF'
		Package: llbuild-no-cuda-driver
		Version: 1.0
		Architecture: all
		Maintainer: llbuild <llbuild@localhost>
		Provides: libcuda.so.1 (= 550), libnvidia-ml.so.1 (= 550)
		Description: satisfies the CUDA toolkit's dependency on a driver without one
		 A build container has no GPU driver: the toolkit links against its stub.
	EOF
	deb=$work/llbuild-no-cuda-driver_1.0_all.deb
	SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000} dpkg-deb --root-owner-group -Zxz -b "$work/pkg" "$deb" >/dev/null
	cat >"$work/args" <<-EOF
		--essential-hook=cp $deb "\$1"/tmp/ && chroot "\$1" dpkg -i /tmp/$(basename "$deb") >&2 && rm -f "\$1"/tmp/$(basename "$deb")
		--setup-hook=mkdir -p "\$1"/etc/apt/preferences.d && printf 'Package: libcuda1 libnvidia-ml1 nvidia-alternative libnvidia-ptxjitcompiler1\nPin: release *\nPin-Priority: -1\n' >"\$1"/etc/apt/preferences.d/llbuild-no-driver
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/lib*_static*.a
		--dpkgopt=path-include=/usr/lib/x86_64-linux-gnu/libcudart_static.a
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libcufft*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libcusparse*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libcusolver*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libcurand*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libnpp*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libnvjpeg*
		--dpkgopt=path-exclude=/usr/lib/x86_64-linux-gnu/libnvperf*
		--dpkgopt=path-exclude=/usr/share/doc/*
		--dpkgopt=path-exclude=/usr/share/man/*
		--customize-hook=rm -f "\$1"/etc/dpkg/dpkg.cfg.d/99mmdebstrap
		--customize-hook=if [ -e "\$1"/usr/lib/x86_64-linux-gnu/libcuda.so.1 ]; then echo 'a driver libcuda.so.1 is in the image' >&2; exit 1; fi
	EOF
	export EXTRA=$versions,nvidia-cuda-toolkit MMDEBSTRAP_ARGS_FILE=$work/args
	;;
runtime)
	export EXTRA=libcudart12,libcublas12,libcublaslt12
	;;
*) echo "role must be devel or runtime" >&2; exit 2 ;;
esac
bash "$mk" "$role" "$out"
