# series-less.sh, sourced (by h200-pin-ab.sh's build-minus and candidate-ab.sh's DROP), from the
# repository root:
#   series_less "DROP" DIR
# puts the built-in series' patches in DIR (made afresh) with a series file that leaves out the
# patches DROP names (numbers, DROP="0002 0005", or file names), and prints their file names.
# A name that is not in patches/series fails it (2), saying so.
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
