#!/bin/bash
# echo-bench.sh BUNDLE [echo-bench.py options]: starts `llbuild serve BUNDLE` on a free loopback
# port, finds the llama-server it supervises in serve's log, and runs scripts/echo-bench.py
# against both: lm-eval's echo request through the shim against a plain prefill straight to
# llama-server, from an outside client, interleaved (issue 43's measurement). The bundle needs
# the scoring series' server (echo with native prompt logprobs). LLBUILD names the llbuild
# binary (default: llbuild on PATH).
# AB=transport also starts a second serve of the same bundle whose shim calls llama-server
# through Go's transport (LLBUILD_LLAMA_TRANSPORT=go) instead of its own kept-alive connections,
# and compares echo through the two, interleaved in the same rounds (echo-bench.py --shim-b).
# AB=env starts the second serve with B_ENV in its environment instead (B_ENV="GOMAXPROCS=1":
# does the shim's hop shrink when the Go runtime has one thread to hand work between?).
set -uo pipefail
bundle=${1:?usage: echo-bench.sh BUNDLE [--tokens 128,512] [--pairs 15] [--warm 3]}
shift
llbuild=${LLBUILD:-llbuild}
here=$(cd "$(dirname "$0")" && pwd)
pids=() logs=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -f "${logs[@]}"
}
trap cleanup EXIT

# serve ENV...: starts llbuild serve with ENV, waits until it is healthy; sets port, upstream, key
serve() {
	local log pid spid
	log=$(mktemp)
	logs+=("$log")
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	env "$@" "$llbuild" serve "$bundle" --addr 127.0.0.1:"$port" 2>"$log" &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
		kill -0 $pid 2>/dev/null || { echo "llbuild serve exited:" >&2; cat "$log" >&2; exit 1; }
		sleep 0.1
	done
	upstream=$(grep -o 'llama-server starting.* addr=[0-9.:]*' "$log" | tail -1 | sed 's/.* addr=//')
	[ -n "$upstream" ] || { echo "no llama-server address in serve's log:" >&2; cat "$log" >&2; exit 1; }
	# the shim starts llama-server with a key of its own (LLAMA_API_KEY in its environment), so
	# that no other local user can use its port; this user can read it
	spid=$(grep -o 'llama-server starting.* pid=[0-9]*' "$log" | tail -1 | sed 's/.* pid=//')
	key=$(tr '\0' '\n' <"/proc/$spid/environ" | sed -n 's/^LLAMA_API_KEY=//p')
}

serve LLBUILD_LLAMA_TRANSPORT=
a_port=$port a_upstream=$upstream a_key=$key
b=()
case ${AB:-} in
'') ;;
transport)
	serve LLBUILD_LLAMA_TRANSPORT=go
	b=(--shim-b "http://127.0.0.1:$port" --label-b "Go's transport to llama-server") ;;
env)
	[ -n "${B_ENV:-}" ] || { echo "echo-bench.sh: AB=env needs B_ENV (say B_ENV=GOMAXPROCS=1)" >&2; exit 2; }
	read -r -a benv <<<"$B_ENV"
	serve LLBUILD_LLAMA_TRANSPORT= "${benv[@]}"
	b=(--shim-b "http://127.0.0.1:$port" --label-b "$B_ENV") ;;
*) echo "echo-bench.sh: AB=$AB: AB=transport or AB=env (with B_ENV) are known" >&2; exit 2 ;;
esac
python3 "$here/echo-bench.py" "http://127.0.0.1:$a_port" "http://$a_upstream" --llama-key "$a_key" "${b[@]}" "$@"
