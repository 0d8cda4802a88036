#!/usr/bin/env bash
# The pin's series build against the series plus the amendments in patches/candidates/, on this
# machine's CPU: both built for cpu-v3 through the engine as provisioning builds them (the second
# mostly from the engine's ccache), bundled with the llama bigram pair (draft-simple) and with its
# target alone, and benched interleaved (`llbuild bench A B --rounds ROUNDS`, B/A row-0 ratios).
# A CPU says whether a candidate breaks or slows anything here; a speed verdict for the H200 is
# `bash scripts/h200-pin-ab.sh CARRY build-fix` and `PAIR="new fix"` there.
#
#   source scripts/provision.sh && provision     # the engine, stand-ins, source, series build
#   bash scripts/candidate-ab.sh [ROUNDS]         # default 8; WORK=DIR keeps what it makes
# VOCAB=262144 pads the pair's vocabulary to Gemma's (bigramgguf -vocab: the output layer and the
# sampling cost what a real model's do; the text's greedy output stays the same), where a
# candidate that changes the per-token work over the vocabulary (0014) shows. The four bundles
# share one model file and one draft (bundle --link): two copies of a model are two sets of page
# cache pages, which a CPU decode reads every token and which need not read alike (docs/bench.md).
# With DROP="0002 0005" (numbers or file names) B is instead the series less those patches, as
# h200-pin-ab.sh's build-minus makes it: one patch's own effect on this CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
for v in LLBUILD_PATCHED_LLAMA_SERVER LLBUILD_TEST_LLAMA_SOURCE LLBUILD_TEST_DEVEL_IMAGE; do
	[[ -n ${!v:-} ]] || { echo "candidate-ab.sh: $v is not set: source scripts/provision.sh && provision first" >&2; exit 2; }
done
shopt -s nullglob
cands=(patches/candidates/0*.patch)
[[ -n ${DROP:-} ]] || ((${#cands[@]})) || { echo "candidate-ab.sh: no patches in patches/candidates/ (DROP=NNNN measures a series patch instead)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work/series"
export PATH=$PATH:/usr/local/go/bin
go build -o "$work/llbuild" .
ll=$work/llbuild

# shellcheck source=scripts/series-less.sh disable=SC1091
source scripts/series-less.sh
if [[ -n ${DROP:-} ]]; then
	dropped=$(series_less "$DROP" "$work/series") || exit 2
	what="series less $dropped"
else
	cp patches/0*.patch patches/series "$work/series/"
	for f in "${cands[@]}"; do
		cp "$f" "$work/series/"
		series_line "$f" >>"$work/series/series" || exit 1
	done
	what="series + ${cands[*]##*/}"
fi
t0=$SECONDS
b=$("$ll" --quiet build -t cpu-v3 --source "$LLBUILD_TEST_LLAMA_SOURCE" --series "$work/series/series" \
	--base "devel=oci-archive:$LLBUILD_TEST_DEVEL_IMAGE" --out "$work/out")
echo "$what: built in $((SECONDS - t0)) s: $b"

text=$HOME/.cache/llbuild-test/kjv/old-testament.txt
if [[ ! -s $text ]]; then
	text=$work/ot.txt
	bible -f Gen1:1-Mal4:6 | sed -E 's/^[^ ]+ //' >"$text"
fi
pad=()
[[ -z ${VOCAB:-} ]] || pad=(-vocab "$VOCAB")
go run ./internal/tools/bigramgguf -text "$text" -shape target "${pad[@]}" -o "$work/target.gguf"
go run ./internal/tools/bigramgguf -text "$text" -shape draft "${pad[@]}" -o "$work/draft.gguf"

bundle() { # bundle NAME ARTIFACTS [--draft FILE]
	local name=$1 arts=$2
	shift 2
	rm -rf "${work:?}/$name"
	"$ll" --quiet bundle -t cpu-v3 --link --artifacts "$arts" --model "$work/target.gguf" "$@" \
		--threads 2 --parallel 1 --ctx-size 2048 -o "$work/$name" >/dev/null
}
series=$(dirname "$LLBUILD_PATCHED_LLAMA_SERVER")
bundle series-ds "$series" --draft "$work/draft.gguf"
bundle fix-ds "$b" --draft "$work/draft.gguf"
bundle series "$series"
bundle fix "$b"
cd "$work"
echo "== draft-simple (the llama bigram pair), fix / series"
"$ll" --quiet bench series-ds fix-ds --rounds "$rounds" --dir lab-ds | grep -E '^A/B|^  [AB] |^  verdict'
echo "== no draft, fix / series"
"$ll" --quiet bench series fix --rounds "$rounds" --dir lab | grep -E '^A/B|^  [AB] |^  verdict'
echo "records: $work/lab-ds, $work/lab"
