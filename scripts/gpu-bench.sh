#!/bin/bash
# gpu-bench.sh: the H200 measurements of BENCHMARKS.md ("Echo through the shim"), on a GPU machine
# without Go or network. Prepare a folder that git ignores (say .devcarry/, in .git/info/exclude) with
#   llbuild        CGO_ENABLED=0 go build -o .devcarry/llbuild .
#   shim.test      (cd shim && CGO_ENABLED=0 go test -c -o ../.devcarry/shim.test .)
#   llama.cpp-PIN.tar.xz   the recipe's pinned source (../shared/llama.cpp; PIN: recipes/server.yaml's
#                  commit, 9 hex), or llama.cpp-history.git.tar (upstream's history from there, which
#                  holds the pin: ../shared has no tarball of 3f545becc), or
#   srv.txz.*      a build packed by an earlier run (then nothing is built)
# and run, from the repository root on that machine: bash scripts/gpu-bench.sh .devcarry [STAGE]
# (TARGET=cpu-v3 tries it on a machine without a GPU). The outside stage also runs from
# scripts/h200-carry.sh's folder after h200-pin-ab.sh build-new in the same lease:
#   bash scripts/gpu-bench.sh .carry outside
# The series is built for the h200 target into /tmp (once per machine; 280-300 s on the H200) and
# packed into $OUT/srv.txz.* (15 MiB pieces, about 42 MB) to carry to the next machine instead.
# STAGE: echo (default: BenchmarkPromptLogprobs with CUDA graphs off and on, BenchmarkEchoAnswer),
# concurrent (BenchmarkConcurrentScoring), tests (the GPU-relevant shim tests), ab (the series'
# last patch A/B on one machine: the build's bin/ is copied as B, the last patch is reverted in the
# work tree and ninja rebuilds what it touched into A, then the echo benchmark runs A B A B with
# graphs off; AB_RUNS pairs, 2 by default; needs the build made here, not a carried one),
# outside (scripts/echo-bench.sh on a bundle of the build: echo through llbuild serve against a
# plain prefill straight to llama-server, from an outside client; randgguf in the carry folder:
# CGO_ENABLED=0 go build -o .devcarry/randgguf ./internal/tools/randgguf; AB=transport adds a
# second serve whose shim calls llama-server through Go's transport, interleaved; AB=env B_ENV=…
# one with B_ENV in its environment, say B_ENV=GOMAXPROCS=1),
# overhead (BenchmarkEchoShimOverhead: the shim's share of an echo with llama-server's compute taken
# out, a replay server answering from memory in its place; run as the host sets the CPUs, with them
# held out of deep idle states through /dev/cpu_dma_latency, with each answer held back 4 ms (the
# shim idle while it waits, as in service) and the same with the shim polling for the answer
# (LLBUILD_LLAMA_SPIN), alternating, with the host's CPU and idle states printed: is the shim's
# cost on a GPU host its work or the wake-ups of idle cores? Without a build in the lease it runs
# on the carry's CPU llama-server).
set -uo pipefail
D=$(cd "${1:?usage: gpu-bench.sh CARRY_DIR [echo|concurrent|tests]}" && pwd); stage=${2:-echo}
OUT=${OUT:-/tmp/gpu-bench-out}; mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
if [ ! -x /tmp/server ] && ls "$D"/srv.txz.* >/dev/null 2>&1; then
	mkdir -p /tmp/out/carried && cat "$D"/srv.txz.* | tar -xJ -C /tmp/out/carried || exit 1
	ln -sf /tmp/out/carried/*/llama-server /tmp/server
	echo "carried build: $(ls /tmp/out/carried)"
fi
# the pin's h200 build that scripts/h200-pin-ab.sh build-new or scripts/gpu-upstream-image.sh made
# in this lease (/tmp/pins/new) serves as well, so that one lease can run those and this;
# SERVER_PIN=fix (or a MINUS name) takes that build of h200-pin-ab.sh instead, relinked even where
# an earlier stage linked another: the tests stage on a candidate's build
if [ -n "${SERVER_PIN:-}" ]; then
	pin_art=$(find /tmp/pins/"$SERVER_PIN" -name artifacts.json 2>/dev/null | head -1)
	[ -n "$pin_art" ] || { echo "gpu-bench.sh: SERVER_PIN=$SERVER_PIN: no build in /tmp/pins/$SERVER_PIN (h200-pin-ab.sh build-$SERVER_PIN first)" >&2; exit 2; }
	ln -sfn "$(dirname "$pin_art")/llama-server" /tmp/server
	echo "the lease's build-$SERVER_PIN: $(dirname "$pin_art")"
fi
new_art=$(find /tmp/pins/new -name artifacts.json 2>/dev/null | head -1)
if [ ! -x /tmp/server ] && [ -n "$new_art" ] && [ "${TARGET:-h200}" = h200 ]; then
	ln -sf "$(dirname "$new_art")/llama-server" /tmp/server
	echo "the lease's build-new: $(dirname "$new_art")"
fi
for f in llbuild shim.test; do # a carry folder of scripts/h200-carry.sh holds them compressed
	if [ -e "$D/$f.xz" ] && [ ! -e "$D/$f" ]; then xz -dk "$D/$f.xz" && chmod +x "$D/$f"; fi
done
# the overhead stage needs a patched llama-server only to answer each request once (the replay
# server answers the rest): without a GPU build in this lease it takes the CPU one the carry holds
# (cpu-server.txz, CPU_SERVER=1 scripts/h200-carry.sh with LLBUILD_PATCHED_LLAMA_SERVER set), no build needed
# (not linked as /tmp/server, which the other stages take for the lease's GPU build)
srv=/tmp/server
if [ ! -x /tmp/server ] && [ "$stage" = overhead ] && [ -f "$D"/cpu-server.txz ]; then
	[ -x /tmp/cpu-server/llama-server ] || { mkdir -p /tmp/cpu-server && tar -xJf "$D"/cpu-server.txz -C /tmp/cpu-server; } || exit 1
	srv=/tmp/cpu-server/llama-server
	echo "the carried CPU llama-server"
fi
if [ ! -x "$srv" ]; then
	pin=$(awk '/^  commit:/{print substr($2, 1, 9); exit}' recipes/server.yaml) src=/tmp/src
	if [ -f "$D"/llama.cpp-"$pin".tar.xz ]; then
		mkdir -p /tmp/src && tar -xJf "$D"/llama.cpp-"$pin".tar.xz -C /tmp/src || exit 1
	elif [ -f "$D"/llama.cpp-history.git.tar ]; then
		[ -d /tmp/hist/llrange.git ] || { mkdir -p /tmp/hist && tar -xf "$D"/llama.cpp-history.git.tar -C /tmp/hist; } || exit 1
		src=/tmp/hist/llrange.git
	else
		echo "gpu-bench.sh: no llama.cpp-$pin.tar.xz nor llama.cpp-history.git.tar in $D" >&2
		exit 1
	fi
	t0=$SECONDS
	dir=$("$D"/llbuild build --executor host -t "${TARGET:-h200}" --source "$src" --out /tmp/out --work-dir /tmp/work 2>"$OUT"/build.log) ||
		{ tail -40 "$OUT"/build.log; exit 1; }
	echo "built $dir in $((SECONDS - t0)) s"
	ln -sf "$dir/llama-server" /tmp/server
	echo "$dir" >/tmp/server.dir
	tar -C "$(dirname "$dir")" -cf - "$(basename "$dir")" | xz -T0 -6 | split -b 15m - "$OUT"/srv.txz.
fi
export LLBUILD_PATCHED_LLAMA_SERVER=$srv SHIM_LLAMA_SERVER=$srv SHIM_BENCH_GGUF=/tmp/b.gguf
repo=$(pwd)
cd shim || exit 1
T=$D/shim.test
one_b=(SHIM_SERVER_ARGS="-ngl 99 -t 8" SHIM_BENCH_MODEL=1b SHIM_BENCH_VOCAB=32000)
case $stage in
echo)
	for graphs in off on; do
		echo "== CUDA graphs $graphs"
		# ggml-cuda takes the variable's presence, whatever its value, as graphs off
		if [ $graphs = off ]; then g=(GGML_CUDA_DISABLE_GRAPHS=1); else g=(-u GGML_CUDA_DISABLE_GRAPHS); fi
		env "${g[@]}" "${one_b[@]}" "$T" -test.run XXX -test.bench PromptLogprobs -test.benchtime 5x -test.count 3 2>&1
	done | tee "$OUT"/echo.txt
	"$T" -test.run XXX -test.bench EchoAnswer -test.benchtime 500x -test.count 2 2>&1 | tee "$OUT"/echoanswer.txt ;;
concurrent)
	env "${one_b[@]}" "$T" -test.run XXX -test.bench 'ConcurrentScoring/native' -test.benchtime 3x 2>&1 | tee "$OUT"/concurrent.txt ;;
tests)
	SHIM_SERVER_ARGS="-ngl 99" "$T" -test.run 'TestFlatPromptLogprobs|TestNativeEchoThroughTheShim|TestNextTurn|TestCompletionsSay|TestScoresDoNotDependOnTraffic' \
		-test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)" | tee "$OUT"/tests.txt ;;
ab)
	[ -f /tmp/server.dir ] || { echo "ab needs the series built on this machine (not carried)" >&2; exit 1; }
	work=$(find /tmp/work -mindepth 1 -maxdepth 1 -type d -name "${TARGET:-h200}-*" | head -1)
	last=$(grep -v '^#' "$repo"/patches/series | grep -v '^$' | tail -1 | cut -d' ' -f1)
	if [ ! -x /tmp/ab/A/llama-server ]; then
		mkdir -p /tmp/ab/A /tmp/ab/B
		cp -a "$work"/build/bin/llama-server "$work"/build/bin/*.so* /tmp/ab/B/
		t0=$SECONDS
		(cd "$work/src" && git apply -R "$repo/patches/$last") || { echo "reverting $last failed" >&2; exit 1; }
		cmake --build "$work/build" --target llama-server >"$OUT"/ab-build.log 2>&1 || { tail -30 "$OUT"/ab-build.log; exit 1; }
		cp -a "$work"/build/bin/llama-server "$work"/build/bin/*.so* /tmp/ab/A/
		echo "A (without $last) rebuilt in $((SECONDS - t0)) s"
	fi
	for i in $(seq "${AB_RUNS:-2}"); do
		for v in A B; do
			echo "== $v run $i ($( [ $v = A ] && echo "without $last" || echo "with $last"))"
			env GGML_CUDA_DISABLE_GRAPHS=1 LLBUILD_PATCHED_LLAMA_SERVER=/tmp/ab/$v/llama-server SHIM_LLAMA_SERVER=/tmp/ab/$v/llama-server \
				"${one_b[@]}" "$T" -test.run XXX -test.bench PromptLogprobs -test.benchtime 5x -test.count 1 2>&1
		done
	done | tee "$OUT"/ab.txt ;;
outside)
	# issue 43's measurement: lm-eval's echo request through llbuild serve against a plain prefill
	# straight to its llama-server, from an outside client (scripts/echo-bench.py), interleaved;
	# the 0.8B random llama with a 32,000-token vocabulary, graphs off (every prompt shape new, as
	# in lm-eval's traffic); needs randgguf in the carry folder
	a=$(dirname "$(readlink -f /tmp/server)")
	[ -f /tmp/o.gguf ] || "$D"/randgguf -shape 1b -vocab 32000 -o /tmp/o.gguf || exit 1
	"$D"/llbuild bundle -t "${TARGET:-h200}" --artifacts "$a" --model /tmp/o.gguf -o /tmp/b-outside --n-gpu-layers 99 --threads 8 \
		--ctx-size 4096 --parallel 1 --env GGML_CUDA_DISABLE_GRAPHS=1 --force >/dev/null || exit 1
	LLBUILD=$D/llbuild bash "$repo"/scripts/echo-bench.sh /tmp/b-outside --pairs "${PAIRS:-15}" 2>&1 | tee "$OUT"/outside.txt ;;
overhead)
	{
		echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores"
		echo "governor: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo none)"
		for st in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
			[ -d "$st" ] && echo "idle state $(cat "$st"/name): exit latency $(cat "$st"/latency) us, disabled $(cat "$st"/disable)"
		done
		# idle: each answer held back 4 ms (SHIM_REPLAY_DELAY), a 128-token prefill's time on the
		# H100, so that the shim's threads go idle while they wait as they do in service (on the
		# 2-core machine that alone took the shim's share from +193 to +374 us at 128 tokens);
		# spin: the same with the shim polling for the answer instead of parking (LLBUILD_LLAMA_SPIN)
		for i in 1 2; do
			for q in free held idle spin; do
				n=1000
				case $q in
				free) echo "== free: the CPUs as the host sets them" ;;
				held) echo "== held: the CPUs held out of deep idle states (cpu_dma_latency 0)" ;;
				idle) echo "== idle: answers held back 4 ms (SHIM_REPLAY_DELAY=4ms)"; n=400 ;;
				spin) echo "== spin: answers held back 4 ms, the shim polling for them (LLBUILD_LLAMA_SPIN=20ms)"; n=400 ;;
				esac
				delay='' spin=''
				case $q in idle) delay=4ms ;; spin) delay=4ms spin=20ms ;; esac
				# held: the request holds while the file is open, this subshell's fd 3, closed when it ends
				(if [ $q = held ]; then exec 3>/dev/cpu_dma_latency && printf 0 >&3 || exit 1; fi
					SHIM_REPLAY_DELAY=$delay LLBUILD_LLAMA_SPIN=$spin "$T" -test.run '^$' -test.bench EchoShimOverhead -test.benchtime ${n}x) 2>&1
			done
		done
	} | tee "$OUT"/overhead.txt ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
