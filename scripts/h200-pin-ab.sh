#!/bin/bash
# h200-pin-ab.sh: did moving the pin make the H200 faster? Builds the old pin (the recorded
# series and recipe, patches/<old>/) and the new one (the built-in recipe and series) for h200
# with the host executor, and runs llbuild bench OLD NEW --mode full --rounds "${ROUNDS:-8}" on one model,
# without a draft and with a draft-simple draft (CANARIES, default full mode's 384, sets the
# canary checks of each run of the A/B stages: 128 takes about half a run's time, as the bisect's). For a GPU machine without Go or network.
# Prepare a folder git ignores (.carry/) here with `bash scripts/h200-carry.sh`, which does
#   CGO_ENABLED=0 go build -o .carry/llbuild . && CGO_ENABLED=0 go build -o .carry/randgguf ./internal/tools/randgguf
#   cp ../shared/llama.cpp/llama.cpp-{OLD,NEW}.tar.xz .carry/
# and run there, from the repository root: bash scripts/h200-pin-ab.sh .carry STAGE
#   STAGE build-old | build-new   one build into /tmp/pins/{old,new} (about 4 min each with -j16),
#                                 also packed into $OUT/{old,new}.txz.* to carry to a fresh machine
#   STAGE build-fix               the new pin with its series and the candidate patches of
#                                 patches/candidates/ appended, into /tmp/pins/fix; PAIR="old fix"
#                                 asks whether the candidates make the pin as fast as the old one,
#                                 PAIR="new fix" what they add to the pin
#   STAGE build-minus             the new pin with its series less the patches named in DROP
#                                 (file names or numbers, DROP="0011"; default the series' last,
#                                 0013: the worker woken only for tasks it takes), into
#                                 /tmp/pins/$MINUS (default minus); PAIR="new minus" is that patch's
#                                 own effect, and several MINUS builds interleave in one campaign
#                                 (PAIR="new m11 mlp": each against the series build)
#   (without llama.cpp-COMMIT.tar.xz in the carry folder, a pin builds from the history,
#   .carry/llama.cpp-history.git.tar, which holds every pin: 1425386fd, 34af94cd9, 3f545becc)
#   STAGE build-next              a next pin prepared in patches/next/COMMIT/ (recipe bump --out;
#                                 NEXT, default the one directory there; none now: 3f545becc, the
#                                 last, became the pin), from upstream's history, into
#                                 /tmp/pins/next, packed like the others
#   STAGE ab                      the two benches; results under $OUT (bench-*.txt, records-*.json);
#                                 KINDS=bd runs only the one with a draft
#                                 (ab, ab-bigram and ab-mtp compare PAIR, default "old new": PAIR="new
#                                 next" asks whether the next pin is not slower than the pin;
#                                 more names interleave more builds in one campaign, each compared
#                                 with the first: PAIR="old minus new next")
#   STAGE ab-bigram               the same with the bigram pair of the King James Version's Old
#                                 Testament (.carry/old-testament.txt, bigramgguf in .carry): the
#                                 1b-cost bigram target, and its draft (draft-simple)
#   STAGE ab-mtp                  the pins' A/B with an MTP draft: the bigram pair in Gemma 4's
#                                 shape at a 0.8B model's cost (bigramgguf -shape gemma4-1b)
#   STAGE drafts                  on the new pin, one gemma4 target three ways, interleaved: no
#                                 draft, the llama bigram draft (draft-simple), its MTP assistant
#   STAGE nearties                on the new pin, how often drafted canaries differ, and how many
#                                 of them are near-ties, where they occur: the random 0.8B llama
#                                 with itself and with a random draft, 384 checks each
#   STAGE logprob-cost            libllama alone on each build of PAIR made in this lease: a decode
#                                 step with llama_set_output_logprobs (--prompt-logprobs) on ÷ off,
#                                 the random llama 8 × 512 at gemma's 262,144-token vocabulary on
#                                 the GPU, ROUNDS (default 12) interleaved rounds judged by bench's
#                                 judge (patches.test in the carry: BenchmarkOutputLogprobsOnWithoutTargets;
#                                 the series pays 0005's softmax on every step, 0014 (fix) none),
#                                 then each build's step against the first's, option on and off
#                                 (BenchmarkOutputLogprobsBuildAgainstBuild: fix ÷ new);
#                                 LOGPROB_THREADS (default 8) the CPU threads
#   STAGE series-cost PIN         what the series costs in decode speed on PIN (old or new): the
#                                 pin built with 0001 alone against its series build, with the
#                                 gemma4 bigram target's MTP assistant (needs build-PIN first)
#   STAGE screen4                 issue 32's lab run on the new pin (needs build-new): four bundles
#                                 of the gemma4 bigram target with its MTP assistant, each
#                                 differing from B0 in one setting (B1 --ubatch-size 256, B2
#                                 --threads 4, B3 --spec-draft-n-max 8); B0 alone (one lane's
#                                 time), the four with --gpus $GPUS (default 0,1,2,3) --mode
#                                 screen, B0 against a copy of itself on two GPUs for 3 rounds
#                                 (are GPUs comparable), then the four --mode full over $ROUNDS
#                                 (default 6) rounds, judged against B0 by llbuild;
#                                 nvidia-smi's compute processes sampled every second throughout
#                                 ($OUT/smi-apps.csv: which GPU each lane's server ran on, when)
#   STAGE sweep                   issue 54's lab sweep (needs build-new, or build-fix with
#                                 SWEEP_PIN=fix): the gemma4 bigram target with its MTP assistant
#                                 as a walk through CYCLE (default 600) pieces of the text
#                                 (bigramgguf -cycle; CYCLE=0: the text's own bigrams, whose
#                                 greedy output loops every few tokens),
#                                 llama-server's defaults but for --threads 8, swept by llbuild
#                                 bench --sweep over SWEEP (default the draft's n-max, 2 to 16
#                                 about llama-server's default of 3, and p-min, default 0, or
#                                 0.26, which stops about half the walk assistant's drafts (its
#                                 top probability is 0.24-0.30): 12 variants;
#                                 SWEEP="--ubatch-size=128,256,1024 --threads=4,16 --poll=0,100"
#                                 tries the others; VOCAB=262144 pads the pair's
#                                 vocabulary to gemma's; MODEL=rand sweeps the random 0.8B
#                                 llama without a draft instead, its vocabulary padded to VOCAB
#                                 (default 32000), for SWEEP="--backend-sampling=on,off"); the screen ranks, the leader
#                                 meets the defaults and the next two in full mode over the
#                                 judge's 6 rounds (ROUNDS sets both the screen's rounds and, if
#                                 more, the full run's; CANARIES the checks of every run) and
#                                 llbuild's judge names the winner or none
# Each bench stage leaves its campaign (records, every run's record.json) in $OUT/runs-STAGE.tgz.
# OLD_PIN defaults to the oldest pin recorded under patches/COMMIT/ (by its recipe's epoch):
# 1425386fd, the reference issue 54 names, not 34af94cd9 (the pin before the present one, recorded
# when the pin moved to 3f545becc), which OLD_PIN=34af94cd9 builds as "old".
set -uo pipefail
D=$(cd "${1:?usage: h200-pin-ab.sh CARRY_DIR build-old|build-new|ab}" && pwd); stage=${2:?stage}
OUT=${OUT:-/tmp/h200-pin-ab-out}; mkdir -p "$OUT" /tmp/pins
export PATH=$PATH:/usr/local/cuda/bin
# the GPU machine has no ccache: a carried one (ccache.txz, as scripts/h200-bisect.sh's header
# makes it) lets a build reuse the CUDA objects of builds made before it in the same lease (the
# bisect's, say: between decaf508b and the pin two CUDA files change)
if ! command -v ccache >/dev/null && [ -f "$D"/ccache.txz ]; then
	[ -x /tmp/cc/ccache/bin/ccache ] || { mkdir -p /tmp/cc && tar -xJf "$D"/ccache.txz -C /tmp/cc; }
	export PATH=/tmp/cc/ccache/bin:$PATH
fi
for f in "$D"/llbuild.xz "$D"/bigramgguf.xz "$D"/randgguf.xz "$D"/old-testament.txt.xz; do # carried compressed
	[ -e "$f" ] && [ ! -e "${f%.xz}" ] && xz -dk "$f" && chmod +x "${f%.xz}"
done
old=${OLD_PIN:-$(for f in patches/[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]/server.yaml; do
	[ -e "$f" ] && awk -v d="${f:8:9}" '/^  epoch:/{print $2, d; exit}' "$f"
done | sort -n | head -1 | cut -d' ' -f2)}
new=$(awk '/^  commit:/{print substr($2, 1, 9); exit}' recipes/server.yaml)

build() { # build NAME COMMIT LLBUILD-ARGS...
	local name=$1 commit=$2 t0=$SECONDS dir
	shift 2
	[ -n "$(find /tmp/pins/"$name" -name artifacts.json 2>/dev/null | head -1)" ] && { echo "$name: already built in this lease"; return 0; }
	for f in "$D"/"$name".txz.*; do
		[ -e "$f" ] || break
		mkdir -p /tmp/pins/"$name" && cat "$D"/"$name".txz.* | tar -xJ -C /tmp/pins/"$name" && echo "$name: carried" && return 0
	done
	local src=/tmp/src-"$name"
	if [ -f "$D"/llama.cpp-"$commit".tar.xz ]; then
		rm -rf "$src" && mkdir -p "$src" && tar -xJf "$D"/llama.cpp-"$commit".tar.xz -C "$src" || return 1
	else # no tarball carried: upstream's history holds both pins
		history || return 1
		src=/tmp/hist/llrange.git
	fi
	dir=$("$D"/llbuild build --executor host -t h200 --source "$src" --out /tmp/pins/"$name" --work-dir /tmp/work-"$name" "$@" 2>"$OUT/build-$name.log") ||
		{ tail -40 "$OUT/build-$name.log"; return 1; }
	echo "$name ($commit): built $dir in $((SECONDS - t0)) s"
	CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/llbuild/ccache} ccache --print-stats >"$OUT/ccache-stats-$name.txt" 2>&1 # hits, misses, unsupported options
	[ -n "${NOPACK:-}" ] || tar -C /tmp/pins -cf - "$name" | xz -T0 -6 | split -b 15m - "$OUT/$name.txz."
}

# series_line and series_less, for build-fix and build-minus
# shellcheck source=scripts/series-less.sh disable=SC1091
source "$(dirname "$0")"/series-less.sh
artifacts() { dirname "$(find /tmp/pins/"$1" -name artifacts.json | head -1)"; }
history() { [ -d /tmp/hist/llrange.git ] || { mkdir -p /tmp/hist && tar -xf "$D"/llama.cpp-history.git.tar -C /tmp/hist; }; }
read -r -a PINS <<<"${PAIR:-old new}" # two or more builds, each bench interleaves them all
next=${NEXT:-$(find patches/next -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort | head -1)}

case $stage in
build-old) build old "$old" --recipe "patches/$old/server.yaml" --series "patches/$old/series" ;;
build-new) build new "$new" ;;
build-fix) # the pin with the built-in series and the candidate amendments in patches/candidates/
	rm -rf /tmp/series-fix && mkdir -p /tmp/series-fix && cp patches/0*.patch patches/series /tmp/series-fix/ || exit 1
	n=0
	for f in patches/candidates/0*.patch; do
		[ -e "$f" ] || continue
		cp "$f" /tmp/series-fix/ && series_line "$f" >>/tmp/series-fix/series || exit 1
		n=$((n + 1))
	done
	[ $n -gt 0 ] || { echo "no candidate patches in patches/candidates/: build-new builds the series" >&2; exit 2; }
	build fix "$new" --series /tmp/series-fix/series ;;
build-minus) # the pin with the built-in series less DROP's patches (default: its last one), as MINUS
	minus=${MINUS:-minus}
	dropped=$(series_less "${DROP:-$(grep -E '^[0-9]{4}-[^ ]+\.patch ' patches/series | tail -1 | cut -d' ' -f1)}" /tmp/series-"$minus") || exit 2
	echo "$minus: the series without $dropped"
	build "$minus" "$new" --series /tmp/series-"$minus"/series ;;
build-next)
	if [ -z "$next" ] || [ ! -f "patches/next/$next/server.yaml" ]; then
		echo "no next pin prepared in patches/next/${next:-COMMIT}/ (llbuild recipe bump --out patches/next/COMMIT ...)" >&2
		exit 2
	fi
	t0=$SECONDS
	[ -n "$(find /tmp/pins/next -name artifacts.json 2>/dev/null | head -1)" ] && { echo "next: already built in this lease"; exit 0; }
	for f in "$D"/next.txz.*; do
		[ -e "$f" ] || break
		mkdir -p /tmp/pins/next && cat "$D"/next.txz.* | tar -xJ -C /tmp/pins/next && echo "next: carried" && exit 0
	done
	history || exit 1
	dir=$("$D"/llbuild build --executor host -t h200 --source /tmp/hist/llrange.git --recipe "patches/next/$next/server.yaml" \
		--series "patches/next/$next/series" --out /tmp/pins/next --work-dir /tmp/work-next 2>"$OUT/build-next.log") ||
		{ tail -40 "$OUT/build-next.log"; exit 1; }
	echo "next ($next): built $dir in $((SECONDS - t0)) s"
	[ -n "${NOPACK:-}" ] || tar -C /tmp/pins -cf - next | xz -T0 -6 | split -b 15m - "$OUT/next.txz." ;;
ab | ab-bigram)
	if [ "$stage" = ab ]; then
		[ -f /tmp/m.gguf ] || "$D"/randgguf -shape 1b -vocab 32000 -o /tmp/m.gguf || exit 1
		[ -f /tmp/d.gguf ] || "$D"/randgguf -shape draft -vocab 32000 -seed 2 -o /tmp/d.gguf || exit 1
	else
		"$D"/bigramgguf -text "$D"/old-testament.txt -shape 1b -o /tmp/m.gguf || exit 1
		"$D"/bigramgguf -text "$D"/old-testament.txt -shape draft -o /tmp/d.gguf || exit 1
	fi
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	for pin in "${PINS[@]}"; do
		a=$(artifacts "$pin")
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/b-"$pin" --model /tmp/m.gguf "${common[@]}" >/dev/null || exit 1
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/bd-"$pin" --model /tmp/m.gguf --draft /tmp/d.gguf "${common[@]}" >/dev/null || exit 1
	done
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$OUT/gpu.txt"
	for kind in ${KINDS:-b bd}; do # KINDS=bd: the draft alone (issue 40's item 4 asks for the drafts)
		t0=$SECONDS
		"$D"/llbuild bench "${PINS[@]/#//tmp/$kind-}" --mode full --canaries "${CANARIES:-384}" --rounds "${ROUNDS:-8}" --dir /tmp/runs-"$kind" >"$OUT/bench-$kind.txt" 2>"$OUT/bench-$kind.log"
		echo "bench $kind: exit $?, $((SECONDS - t0)) s"
		cat "$OUT/bench-$kind.txt"
		tail -5 "$OUT/bench-$kind.log"
		cp /tmp/runs-"$kind"/records.json "$OUT/records-$kind.json" 2>/dev/null || true
		tar -C /tmp -czf "$OUT/runs-$stage-$kind.tgz" --exclude=server.log runs-"$kind"
	done ;;
ab-mtp | drafts)
	[ -f /tmp/g.gguf ] || "$D"/bigramgguf -text "$D"/old-testament.txt -shape gemma4-1b -o /tmp/g.gguf -assistant /tmp/ga.gguf || exit 1
	[ -f /tmp/d.gguf ] || "$D"/bigramgguf -text "$D"/old-testament.txt -shape draft -o /tmp/d.gguf || exit 1
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$OUT/gpu.txt"
	if [ "$stage" = ab-mtp ]; then
		for pin in "${PINS[@]}"; do
			"$D"/llbuild bundle -t h200 --artifacts "$(artifacts "$pin")" -o /tmp/bm-"$pin" --model /tmp/g.gguf --draft /tmp/ga.gguf "${common[@]}" >/dev/null || exit 1
		done
		set -- "${PINS[@]/#//tmp/bm-}"
	else
		a=$(artifacts new)
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/g-none --model /tmp/g.gguf "${common[@]}" >/dev/null || exit 1
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/g-simple --model /tmp/g.gguf --draft /tmp/d.gguf "${common[@]}" >/dev/null || exit 1
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/g-mtp --model /tmp/g.gguf --draft /tmp/ga.gguf "${common[@]}" >/dev/null || exit 1
		set -- /tmp/g-none /tmp/g-simple /tmp/g-mtp
	fi
	t0=$SECONDS
	"$D"/llbuild bench "$@" --mode full --canaries "${CANARIES:-384}" --rounds "${ROUNDS:-8}" --dir /tmp/runs-"$stage" >"$OUT/bench-$stage.txt" 2>"$OUT/bench-$stage.log"
	echo "bench $stage: exit $?, $((SECONDS - t0)) s"
	cat "$OUT/bench-$stage.txt"
	tail -5 "$OUT/bench-$stage.log"
	cp /tmp/runs-"$stage"/records.json "$OUT/records-$stage.json" 2>/dev/null || true
	tar -C /tmp -czf "$OUT/runs-$stage.tgz" --exclude=server.log runs-"$stage" ;;
nearties)
	[ -f /tmp/m.gguf ] || "$D"/randgguf -shape 1b -vocab 32000 -o /tmp/m.gguf || exit 1
	[ -f /tmp/d.gguf.rand ] || "$D"/randgguf -shape draft -vocab 32000 -seed 2 -o /tmp/d.gguf.rand || exit 1
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	a=$(artifacts new)
	ln -f /tmp/m.gguf /tmp/m-self.gguf # the bundle names its files after their sources
	"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/n-self --model /tmp/m.gguf --draft /tmp/m-self.gguf "${common[@]}" >/dev/null || exit 1
	"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/n-rand --model /tmp/m.gguf --draft /tmp/d.gguf.rand "${common[@]}" >/dev/null || exit 1
	t0=$SECONDS
	"$D"/llbuild bench /tmp/n-self /tmp/n-rand --mode screen --canaries "${CANARIES:-384}" --rounds 1 --dir /tmp/runs-nearties >"$OUT/bench-nearties.txt" 2>"$OUT/bench-nearties.log"
	echo "bench nearties: exit $?, $((SECONDS - t0)) s"
	cat "$OUT/bench-nearties.txt"
	grep -E 'differ|near-tie|failed at' "$OUT/bench-nearties.log" | tail -12
	tar -C /tmp -czf "$OUT/runs-nearties.tgz" --exclude=server.log runs-nearties ;;
logprob-cost)
	[ -x "$D"/patches.test ] || { xz -dk "$D"/patches.test.xz && chmod +x "$D"/patches.test; } || exit 1
	worksrc() { echo "$(find /tmp/work-"$1" -mindepth 1 -maxdepth 1 -type d -name 'h200-*' 2>/dev/null | head -1)"/src; }
	# cost BENCHMARK OUTFILE PIN [AGAINST]: the patches' BENCHMARK on PIN's build (and AGAINST's)
	cost() {
		(cd patches && env LLBUILD_PATCHED_LLAMA_SERVER="$(artifacts "$3")"/llama-server LLBUILD_PATCHED_LLAMA_SOURCE="$(worksrc "$3")" \
			${4:+LLBUILD_LOGPROB_COST_AGAINST="$(artifacts "$4")"/llama-server} \
			LLBUILD_LOGPROB_COST_NGL=99 LLBUILD_LOGPROB_COST_THREADS="${LOGPROB_THREADS:-8}" LLBUILD_LOGPROB_COST_ROUNDS="${ROUNDS:-12}" \
			"$D"/patches.test -test.run XXX -test.bench "$1" -test.benchtime 1x) 2>&1 | tee "$OUT/$2"
		grep -q '^PASS' "$OUT/$2"
	}
	for pin in "${PINS[@]}"; do
		if [ -z "$(artifacts "$pin")" ] || [ ! -d "$(worksrc "$pin")/include" ]; then
			echo "logprob-cost: no build of $pin with its work tree in this lease (build-$pin first)" >&2
			exit 2
		fi
	done
	for pin in "${PINS[@]}"; do
		echo "== $pin"
		cost OutputLogprobsOnWithoutTargets "logprob-cost-$pin.txt" "$pin" || exit 1
	done
	# then build against build, each against the first
	for pin in "${PINS[@]:1}"; do
		echo "== $pin ÷ ${PINS[0]}"
		cost OutputLogprobsBuildAgainstBuild "logprob-cost-$pin-vs-${PINS[0]}.txt" "${PINS[0]}" "$pin" || exit 1
	done ;;
series-cost)
	pin=${3:?series-cost old|new}; commit=$old args=(--recipe "patches/$old/server.yaml" --series "patches/$old/series")
	[ "$pin" = new ] && commit=$new args=()
	s=/tmp/series-0001-$pin && mkdir -p "$s" && first=$(grep -m1 -E '^0001-[^ ]+\.patch ' "${args[3]:-patches/series}") &&
		cp "$(dirname "${args[3]:-patches/series}")/${first%% *}" "$s"/ && echo "$first" >"$s"/series || exit 1
	[ -d /tmp/pins/"$pin"1 ] || NOPACK=1 build "$pin"1 "$commit" "${args[@]:0:2}" --series "$s"/series || exit 1
	[ -f /tmp/g.gguf ] || "$D"/bigramgguf -text "$D"/old-testament.txt -shape gemma4-1b -o /tmp/g.gguf -assistant /tmp/ga.gguf || exit 1
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	for p in "$pin" "$pin"1; do
		"$D"/llbuild bundle -t h200 --artifacts "$(artifacts "$p")" -o /tmp/sc-"$p" --model /tmp/g.gguf --draft /tmp/ga.gguf "${common[@]}" >/dev/null || exit 1
	done
	t0=$SECONDS
	"$D"/llbuild bench /tmp/sc-"$pin" /tmp/sc-"$pin"1 --mode full --rounds "${ROUNDS:-8}" --dir /tmp/runs-sc-"$pin" >"$OUT/bench-sc-$pin.txt" 2>"$OUT/bench-sc-$pin.log"
	echo "bench series-cost $pin: exit $?, $((SECONDS - t0)) s"
	grep -v '^  io.llbuild.patches' "$OUT/bench-sc-$pin.txt" | head -40
	tar -C /tmp -czf "$OUT/runs-sc-$pin.tgz" --exclude=server.log runs-sc-"$pin" ;;
screen4)
	gpus=${GPUS:-0,1,2,3}
	IFS=, read -r -a lanes <<<"$gpus"
	[ -f /tmp/g.gguf ] || "$D"/bigramgguf -text "$D"/old-testament.txt -shape gemma4-1b -o /tmp/g.gguf -assistant /tmp/ga.gguf || exit 1
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	a=$(artifacts new)
	mk() { # mk NAME SERVER-ARGS...
		local name=$1
		shift
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o /tmp/s4-"$name" --model /tmp/g.gguf --draft /tmp/ga.gguf "${common[@]}" "$@" >/dev/null
	}
	mk B0 --server-arg=--threads --server-arg=8 && mk B1 --server-arg=--threads --server-arg=8 --server-arg=--ubatch-size --server-arg=256 &&
		mk B2 --server-arg=--threads --server-arg=4 && mk B3 --server-arg=--threads --server-arg=8 --server-arg=--spec-draft-n-max --server-arg=8 || exit 1
	rm -rf /tmp/s4-B0copy && cp -a /tmp/s4-B0 /tmp/s4-B0copy
	nvidia-smi -L | tee "$OUT/gpus.txt"
	nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv | tee -a "$OUT/gpus.txt"
	(while :; do nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader 2>/dev/null | sed "s/^/$(date +%s),/"; sleep 1; done >"$OUT/smi-apps.csv") &
	smi=$!
	trap 'kill $smi 2>/dev/null' EXIT
	bench() { # bench NAME ARGS...: one campaign, timed, its table and the last lines of its log
		local name=$1 t0=$SECONDS
		shift
		"$D"/llbuild bench "$@" --dir /tmp/runs-s4-"$name" --json >"$OUT/s4-$name.json" 2>"$OUT/s4-$name.log"
		echo "bench $name: exit $?, $((SECONDS - t0)) s"
		python3 - "$OUT/s4-$name.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
for r in res["runs"]:
    devs = ", ".join(f'{d["description"]} {d.get("id", "")}' for d in r["server"].get("devices") or [])
    print(f'  {r["identity"]["label"]} r{r["round"]} gpu={r["identity"].get("gpu", "-")} [{devs}] {r["started"]} .. {r["finished"]} '
          f'row0 {r["summary"].get("row0TokPerSec", 0):.2f} canary {r["canary"]["passed"]}/{r["canary"]["checks"]} {r["decision"]}')
for c in res.get("comparisons") or []:
    print(f'  A/B {c["b"]} / {c["a"]}: {c["ratios"]}: {c["verdict"]["text"]}')
if res.get("sharedDevices"):
    print("  SHARED DEVICES:", res["sharedDevices"])
PY
		grep -E 'warning|failed' "$OUT/s4-$name.log" | tail -5
	}
	bench one /tmp/s4-B0 --mode screen --rounds 1 --gpus "${lanes[0]}"
	bench four /tmp/s4-B0 /tmp/s4-B1 /tmp/s4-B2 /tmp/s4-B3 --mode screen --rounds 1 --gpus "$gpus"
	if [ "${#lanes[@]}" -ge 2 ]; then
		bench same /tmp/s4-B0 /tmp/s4-B0copy --mode screen --rounds 3 --gpus "${lanes[0]},${lanes[1]}"
	fi
	# no winner is picked here: the four meet in full mode, interleaved, and llbuild's judge says
	# how each compares with B0 (its verdicts are in the JSON the bench writes)
	bench full /tmp/s4-B0 /tmp/s4-B1 /tmp/s4-B2 /tmp/s4-B3 --mode full --rounds "${ROUNDS:-6}" --gpus "$gpus"
	kill $smi 2>/dev/null
	tar -C /tmp -czf "$OUT/runs-screen4.tgz" --exclude=server.log runs-s4-one runs-s4-four runs-s4-same runs-s4-full 2>/dev/null ;;
sweep)
	pin=${SWEEP_PIN:-new}
	# the walk pair (bigramgguf -cycle): a text's bigram output loops every few tokens, where
	# draft settings measure the loop (2026-12-06's sweep); CYCLE=0 sweeps that text pair
	cycle=${CYCLE:-600}
	if [ "${MODEL:-walk}" = rand ]; then
		# MODEL=rand: the random 0.8B llama without a draft, its vocabulary padded to VOCAB
		# (default 32,000; 262144 is gemma's, where each token's logits are 1 MiB of float32)
		g=/tmp/m${VOCAB:-32000}.gguf ga=
		[ -f "$g" ] || "$D"/randgguf -shape 1b -vocab "${VOCAB:-32000}" -o "$g" || exit 1
	else
		# VOCAB pads the pair's vocabulary (bigramgguf -vocab): the same text or walk, a real
		# model's output layer and sampling
		walk=() g=/tmp/g${VOCAB:+v$VOCAB}.gguf ga=/tmp/ga${VOCAB:+v$VOCAB}.gguf
		if [ "$cycle" != 0 ]; then
			walk=(-cycle "$cycle") g=/tmp/gw$cycle${VOCAB:+v$VOCAB}.gguf ga=/tmp/gwa$cycle${VOCAB:+v$VOCAB}.gguf
		fi
		[ -f "$g" ] || "$D"/bigramgguf -text "$D"/old-testament.txt -shape gemma4-1b "${walk[@]}" ${VOCAB:+-vocab "$VOCAB"} -o "$g" -assistant "$ga" || exit 1
	fi
	common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --force)
	rm -rf /tmp/sw-"$pin" /tmp/runs-sweep
	"$D"/llbuild bundle -t h200 --artifacts "$(artifacts "$pin")" -o /tmp/sw-"$pin" --model "$g" ${ga:+--draft "$ga"} "${common[@]}" >/dev/null || exit 1
	sweeps=()
	for s in ${SWEEP:---spec-draft-n-max=2,4,6,8,12,16 --spec-draft-p-min=0,0.26}; do sweeps+=(--sweep "$s"); done
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$OUT/gpu.txt"
	t0=$SECONDS
	"$D"/llbuild bench /tmp/sw-"$pin" "${sweeps[@]}" ${ROUNDS:+--rounds "$ROUNDS"} ${CANARIES:+--canaries "$CANARIES"} --dir /tmp/runs-sweep >"$OUT/bench-sweep.txt" 2>"$OUT/bench-sweep.log"
	echo "bench sweep ($pin; ${sweeps[*]}): exit $?, $((SECONDS - t0)) s"
	cat "$OUT/bench-sweep.txt"
	tail -5 "$OUT/bench-sweep.log"
	cp /tmp/runs-sweep/records.json "$OUT/records-sweep.json"
	# the variants' models are hard links of the bundle's (a 0.8B model, 950 MB packed): left out
	tar -C /tmp -czf "$OUT/runs-sweep.tgz" --exclude=server.log --exclude='*.gguf' runs-sweep ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
