#!/usr/bin/env bash
# join-candidate.sh NNNN: the candidate patches/candidates/NNNN-*.patch joins the built-in series,
# once its measurement says so (patches/candidates/README.md: the GPU says faster, or it is
# faster on one target and the GPU finds no difference in any mode). It moves the patch into
# patches/ (git mv), appends its line to patches/series with its sha256, and remakes the plan
# goldens (go test ./pipeline -update), whose plan hashes the series changes. What it cannot
# write is printed at the end: the verdict's words in docs/patches.md, patches/candidates/README.md
# and BENCHMARKS.md. A refusal (no such candidate, one already in the series, a number not after
# the series' last) changes nothing; a failure after the move puts everything back.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/series-less.sh disable=SC1091
source scripts/series-less.sh
n=${1:-}
[[ $n =~ ^[0-9]{4}$ ]] || { echo "usage: scripts/join-candidate.sh NNNN (the candidate's four-digit number, e.g. 0014)" >&2; exit 2; }
shopt -s nullglob
c=(patches/candidates/"$n"-*.patch)
((${#c[@]} == 1)) || { echo "join-candidate.sh: want one patches/candidates/$n-*.patch, found ${#c[@]}" >&2; exit 2; }
name=$(basename "${c[0]}")
f=patches/$name
if [[ -e $f ]] || grep -q "^$name " patches/series; then
	echo "join-candidate.sh: $name is already in the series" >&2
	exit 2
fi
last=$(grep -oE '^[0-9]{4}-' patches/series | tail -1 | tr -d -)
((10#$n > 10#$last)) || { echo "join-candidate.sh: $n does not come after the series' last patch, $last: renumber the candidate first" >&2; exit 2; }
git diff --quiet -- patches/series pipeline/testdata || { echo "join-candidate.sh: patches/series or pipeline/testdata has changes not committed: commit or drop them first" >&2; exit 2; }

undo() {
	echo "join-candidate.sh: failed; putting everything back" >&2
	git mv -f "$f" "${c[0]}" 2>/dev/null || true
	git checkout -- patches/series pipeline/testdata 2>/dev/null || true
}
trap undo ERR
git mv "${c[0]}" "$f"
series_line "$f" >>patches/series
export PATH=$PATH:/usr/local/go/bin
go test -count=1 ./pipeline -update >/dev/null
go test -count=1 ./pipeline >/dev/null
trap - ERR
echo "$name joined the series: $f, its line in patches/series, the plan goldens remade ($(git status --short pipeline/testdata | wc -l) files)."
echo "Still to write, with the verdict: docs/patches.md (the series table, what each patch is worth, the candidates paragraph),"
echo "patches/candidates/README.md, patches/named.go's SeriesScoring comment where it names the patches, and BENCHMARKS.md."
