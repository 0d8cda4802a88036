# series-less.sh, the series file's helpers, sourced from the repository root (by h200-pin-ab.sh,
# candidate-ab.sh and join-candidate.sh):
#   series_line FILE
# prints FILE's line in a series file: its name and its sha256, as llbuild checks it.
#   series_less "DROP" DIR
# puts the built-in series' patches in DIR (made afresh) with a series file that leaves out the
# patches DROP names (numbers, DROP="0002 0005", or file names), and prints their file names.
# A name that is not in patches/series fails it (2), saying so.
series_line() {
	[ -f "$1" ] || { echo "series_line: no file $1" >&2; return 1; }
	echo "$(basename "$1") sha256:$(sha256sum "$1" | cut -d' ' -f1)"
}

series_less() {
	local p f drop=()
	for p in $1; do
		f=$(grep -E "^$p(-[^ ]+\.patch)? " patches/series | cut -d' ' -f1)
		[ -n "$f" ] || { echo "DROP: $p is not in patches/series" >&2; return 2; }
		drop+=("$f")
	done
	((${#drop[@]})) || { echo "DROP names no patch" >&2; return 2; }
	rm -rf "$2" && mkdir -p "$2" && cp patches/0*.patch "$2"/ || return 1
	grep -vE "^($(IFS='|'; echo "${drop[*]}")) " patches/series >"$2"/series
	echo "${drop[*]}"
}
