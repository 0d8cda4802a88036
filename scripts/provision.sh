# shellcheck shell=bash
# Sourced by scripts/test.sh: provides, from ../shared when it is beside the repository, what
# the tests that prove the default path need, and exports where it is:
#   - the Dagger engine (../shared/dagger: installed, started, stopped again by its pid when
#     the tests end, also on failure) -> _EXPERIMENTAL_DAGGER_RUNNER_HOST, _EXPERIMENTAL_DAGGER_CLI_BIN
#   - stand-in base images made from Debian packages (mk-image.sh)
#     -> LLBUILD_TEST_DEVEL_IMAGE, LLBUILD_TEST_RUNTIME_IMAGE
#   - CUDA stand-ins from Debian trixie's CUDA 12.4.1 (scripts/mk-cuda-standin.sh)
#     -> LLBUILD_TEST_CUDA_DEVEL_IMAGE, LLBUILD_TEST_CUDA_RUNTIME_IMAGE
#   - the recipe's pinned llama.cpp (../shared/llama.cpp), unpacked -> LLBUILD_TEST_LLAMA_SOURCE
#   - llama-server of that commit built with `llbuild build -t cpu-v3` through the engine, with
#     the patch series and with patch 0001 alone -> LLBUILD_PATCHED_LLAMA_SERVER,
#     LLBUILD_UNPATCHED_LLAMA_SERVER; the source with the series applied ->
#     LLBUILD_PATCHED_LLAMA_SOURCE
# Everything is cached under ~/.cache/llbuild-test and in the engine's state (its cache and
# ccache volume), so a second run on the same machine rebuilds nothing. Without ../shared, or not as root, it
# provides nothing and says so; the tests that need it then skip (and fail under CI=true).
# Each step's time goes to stderr as "provision: STEP took Ns".

shared=${LLBUILD_SHARED:-$(cd .. && pwd)/shared}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/llbuild-test
export PATH=$PATH:/usr/local/go/bin

provision_timed() { # provision_timed NAME CMD...: runs CMD, prints how long it took
	local name=$1 t0=$SECONDS
	shift
	"$@" || { echo "provision: $name failed" >&2; return 1; }
	echo "provision: $name took $((SECONDS - t0))s" >&2
}

provision_engine() {
	local state=/run/dagger/engine.pid env
	if [[ -f $state ]] && kill -0 "$(cat "$state")" 2>/dev/null; then
		provision_engine_ours=0 # someone else's engine: leave it running
	else
		provision_engine_ours=1
	fi
	bash "$shared/dagger/install.sh" || return 1
	env=$(bash "$shared/dagger/start-engine.sh") || return 1
	eval "$env"
}

provision_stop_engine() {
	if [[ ${provision_engine_ours:-0} == 1 ]]; then
		bash "$shared/dagger/stop-engine.sh" >&2 || true
		provision_engine_ours=0
	fi
}

# provision_images: the stand-in images, made again only when mk-image.sh, its ocitool or the
# package list change. The devel image carries the wheel recipe's apt packages too (python3,
# venv, pip, python-build), so its builds need no network.
provision_images() {
	local extra=python3,python3-venv,python3-pip,python3-build key dir
	key=$( { cat "$shared/dagger/mk-image.sh" "$shared"/dagger/ocitool/*; echo "$extra"; } | sha256sum | cut -c1-16)
	dir=$cache/images/$key
	mkdir -p "$dir"
	if [[ ! -s $dir/devel.tar ]]; then
		EXTRA=$extra bash "$shared/dagger/mk-image.sh" devel "$dir/devel.tar" >/dev/null 2>"$dir/devel.log" ||
			{ tail -20 "$dir/devel.log" >&2; rm -f "$dir/devel.tar"; return 1; }
	fi
	if [[ ! -s $dir/runtime.tar ]]; then
		bash "$shared/dagger/mk-image.sh" runtime "$dir/runtime.tar" >/dev/null 2>"$dir/runtime.log" ||
			{ tail -20 "$dir/runtime.log" >&2; rm -f "$dir/runtime.tar"; return 1; }
	fi
	export LLBUILD_TEST_DEVEL_IMAGE=$dir/devel.tar LLBUILD_TEST_RUNTIME_IMAGE=$dir/runtime.tar
}

# provision_cuda_images: the CUDA stand-ins (scripts/mk-cuda-standin.sh: Debian trixie's CUDA
# 12.4.1 toolkit, no driver; and a runtime of cudart and cuBLAS), made again only when the
# scripts, ocitool or the trixie apt pins change. It mostly downloads and unpacks, so
# provision runs it beside the llama.cpp builds, which use the cores.
provision_cuda_images() {
	local key dir
	key=$( { cat "$shared/dagger/mk-image.sh" "$shared"/dagger/ocitool/* scripts/mk-cuda-standin.sh recipes/apt/debian-13.yaml; } | sha256sum | cut -c1-16)
	dir=$cache/cuda-images/$key
	mkdir -p "$dir"
	local role
	for role in devel runtime; do
		if [[ ! -s $dir/$role.tar ]]; then
			LLBUILD_SHARED=$shared bash scripts/mk-cuda-standin.sh "$role" "$dir/$role.tar" >/dev/null 2>"$dir/$role.log" ||
				{ tail -20 "$dir/$role.log" >&2; rm -f "$dir/$role.tar"; return 1; }
		fi
	done
	echo "$dir"
}

provision_source() {
	local tarball name dir history
	# the tarball of the recipe's pinned commit (../shared/llama.cpp holds other commits too), or,
	# for a pin it has no tarball of, the commit's tree from upstream's history beside them,
	# written as the tarballs were made (../shared/llama.cpp/README.md: without models/*.gguf*)
	local commit full
	full=$(awk '/^  commit:/{print $2; exit}' recipes/server.yaml)
	commit=${full:0:9}
	tarball=$shared/llama.cpp/llama.cpp-$commit.tar.xz
	history=$shared/llama.cpp/llama.cpp-history.git.tar
	if [[ -z $commit ]] || { [[ ! -f $tarball ]] && [[ ! -f $history ]]; }; then
		echo "provision: no llama.cpp-$commit.tar.xz (recipes/server.yaml's commit) and no llama.cpp-history.git.tar in $shared/llama.cpp" >&2
		return 1
	fi
	name=llama.cpp-$commit
	dir=$cache/llama.cpp/$name
	if [[ ! -f $dir/.ready ]]; then
		rm -rf "$dir" && mkdir -p "$dir/src" || return 1
		if [[ -f $tarball ]]; then
			tar -xJf "$tarball" -C "$dir/src" || return 1
		else
			if [[ ! -f $cache/llama.cpp/history/.ready ]]; then
				rm -rf "$cache/llama.cpp/history" && mkdir -p "$cache/llama.cpp/history" &&
					tar -xf "$history" -C "$cache/llama.cpp/history" && touch "$cache/llama.cpp/history/.ready" || return 1
			fi
			go run ./internal/tools/gittree -repo "$cache/llama.cpp/history/llrange.git" -commit "$full" \
				-exclude 'models/*.gguf*' -o "$dir/src" || return 1
		fi
		touch "$dir/.ready"
	fi
	export LLBUILD_TEST_LLAMA_SOURCE=$dir/src
}

# provision_llama_builds: the series build and the build with patch 0001 alone (which
# touches the CUDA backend alone), both as the README's main job runs them: `llbuild build`
# through the engine in the stand-in devel image. The root package's test of the main job then
# finds the series build in the engine's cache instead of compiling llama.cpp a third time; the
# second build shares the engine's ccache volume with the first. The stand-in is Debian
# bookworm, as this machine, so the servers run here. Also a patched source tree (the series
# applied with git apply) for the tests that read the patched headers.
provision_llama_builds() {
	local bin=$cache/bin/llbuild root=$cache/llama.cpp/builds series dir first key src
	mkdir -p "$cache/bin" "$root/unpatched-series"
	go build -o "$bin" . || return 1
	dir=$("$bin" build -t cpu-v3 --source "$LLBUILD_TEST_LLAMA_SOURCE" --base "devel=oci-archive:$LLBUILD_TEST_DEVEL_IMAGE" \
		--out "$root/out" 2>"$root/patched.log") ||
		{ tail -30 "$root/patched.log" >&2; return 1; }
	export LLBUILD_PATCHED_LLAMA_SERVER=$dir/llama-server
	first=$(grep -m1 -E '^0001-[^ ]+\.patch ' patches/series)
	series=$root/unpatched-series/series
	cp "patches/${first%% *}" "$root/unpatched-series/" && echo "$first" >"$series" || return 1
	dir=$("$bin" build -t cpu-v3 --source "$LLBUILD_TEST_LLAMA_SOURCE" --series "$series" --base "devel=oci-archive:$LLBUILD_TEST_DEVEL_IMAGE" \
		--out "$root/out" 2>"$root/unpatched.log") ||
		{ tail -30 "$root/unpatched.log" >&2; return 1; }
	export LLBUILD_UNPATCHED_LLAMA_SERVER=$dir/llama-server
	key=$(sha256sum patches/series | cut -c1-16)
	src=$root/patched-src-$key
	if [[ ! -f $src/.ready ]]; then
		rm -rf "$src" && cp -a "$LLBUILD_TEST_LLAMA_SOURCE" "$src" && git -C "$src" init -q || return 1
		local p
		while read -r p _; do
			git -C "$src" apply --whitespace=nowarn "$PWD/patches/$p" || { echo "provision: $p does not apply to $LLBUILD_TEST_LLAMA_SOURCE" >&2; return 1; }
		done < <(grep -E '^[0-9]{4}-[^ ]+\.patch ' patches/series)
		touch "$src/.ready"
	fi
	export LLBUILD_PATCHED_LLAMA_SOURCE=$src
}

provision() {
	if [[ ! -d $shared/dagger || ! -d $shared/llama.cpp ]]; then
		echo "provision: no $shared/dagger and $shared/llama.cpp: the tests of the Dagger engine and of the patch series on the pinned llama.cpp will skip" >&2
		return 0
	fi
	if [[ $(id -u) -ne 0 ]]; then
		echo "provision: not root: the engine cannot be started here; the tests that need it, the stand-in images or the llama.cpp builds will skip" >&2
		return 0
	fi
	provision_timed "engine (install, start)" provision_engine || return 1
	# the CUDA stand-ins download and unpack while the llama.cpp builds compile; mmdebstrap is
	# installed first (scripts/test.sh does), else both image makers would run apt-get at once
	command -v mmdebstrap >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap; } >&2 || return 1
	local cuda_out
	cuda_out=$(mktemp)
	provision_timed "CUDA stand-in images" provision_cuda_images >"$cuda_out" &
	local cuda_pid=$!
	provision_timed "stand-in images" provision_images &&
		provision_timed "llama.cpp source" provision_source &&
		provision_timed "llama.cpp builds (series, and with patch 0001 alone)" provision_llama_builds
	local rc=$?
	wait "$cuda_pid" || rc=1
	local dir
	dir=$(cat "$cuda_out") && rm -f "$cuda_out"
	if [[ -n $dir ]]; then
		export LLBUILD_TEST_CUDA_DEVEL_IMAGE=$dir/devel.tar LLBUILD_TEST_CUDA_RUNTIME_IMAGE=$dir/runtime.tar
	fi
	return "$rc"
}
