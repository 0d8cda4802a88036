#!/bin/bash
# h200-bisect.sh: which upstream commit between the two pins made the H200 slower? Runs
# `llbuild bisect run` for two campaigns over 1425386fd..34af94cd9 of the shallow history in
# ../shared/llama.cpp/llama.cpp-history.git.tar, each probe an h200 build with patch 0001 alone
# (the scoring series does not apply across the range): ds, the llama bigram pair of the Old
# Testament (1b-cost target, its draft: draft-simple), and mtp, the gemma4 bigram pair (gemma4-1b
# target, its MTP assistant: draft-mtp). Both campaigns share one artifact directory, so a commit
# both probe is built once. For a GPU machine without Go or network, lent a few minutes at a time:
# each call resumes from the logs carried in and carries them out again.
# Prepare a folder git ignores (.carry/) here with `bash scripts/h200-carry.sh`, which does
#   CGO_ENABLED=0 go build -o .carry/llbuild . && CGO_ENABLED=0 go build -o .carry/bigramgguf ./internal/tools/bigramgguf
#   xz -9 .carry/llbuild .carry/bigramgguf; bible -f Gen1:1-Mal4:6 | sed 's/^[^ ]* //' | xz >.carry/old-testament.txt.xz
#   cp ../shared/llama.cpp/llama.cpp-history.git.tar .carry/
#   (and the logs of an earlier part: cp bisect-h200/{ds,mtp}.log .carry/ )
#   and, since that machine has no ccache (each probe then compiles everything: 241-279 s), this
#   machine's, with its two libraries beside it (RUNPATH $ORIGIN/../lib, patchelf):
#   mkdir -p /tmp/cc/ccache/{bin,lib} && cp /usr/bin/ccache /tmp/cc/ccache/bin/ &&
#   cp -L /lib/x86_64-linux-gnu/{libzstd.so.1,libhiredis.so.0.14} /tmp/cc/ccache/lib/ &&
#   patchelf --set-rpath '$ORIGIN/../lib' /tmp/cc/ccache/bin/ccache && tar -C /tmp/cc -cJf .carry/ccache.txz ccache
# then, from the repository root: bash scripts/h200-bisect.sh .carry start SECONDS
# Where it stands (2026-12-04, third part): ds alone (CAMPAIGNS=ds), ends 0.828; decaf508b (#26920,
# 300 of 364) named the first slower commit, its confirmation against e79e4bf66 still to measure
# (one A/B: the good end, the culprit and its parent to build, about 10 min); resume it with
#   cp benchmarks/h200-bisect-2026-12-04-part3/ds.log .carry/ds.log
#   TEMPLATE_REF=e79e4bf66 CAMPAIGNS=ds bash scripts/h200-bisect.sh .carry start 530
# and a .carry/llbuild of this tree (older ones cannot read the log's "test" setting or its
# "inert" events). TEMPLATE_REF names the commit whose build the templates are made from
# (default: the good end, built first): a campaign whose next step is its confirmation builds
# only the culprit and its parent, so the parent's build serves the templates and the good end
# is not built at all (about 250 s of the lease saved). The templates' identity is their models,
# arguments and environment, not the build they were made from.
# GOOD and BAD start new campaigns over another range (a campaign with a log goes on with its
# own): with GOOD=e79e4bf66 BAD=decaf508b TEMPLATE_REF=e79e4bf66 CAMPAIGNS="ds mtp" and no
# .carry/mtp.log, ds confirms its culprit and mtp asks whether the MTP pair lost its time in the
# same commit (the ends of a one-commit range are its A/B; a step there names the commit, and
# its confirmation measures it again), both from the same two builds.
# NEXT names suspects (any revisions, space-separated) the campaigns probe first, one per step
# once their ends are measured (bisect run --next): a suspect and its parent name it in two
# probes when right; one that cannot be probed is dropped and the search goes on. The lead for
# the draft-simple loss left after decaf508b (the ends 0.828 against its 0.871):
#   GOOD=2bacf9ea5 BAD=34af94cd9 NEXT="22b8e310b 22b8e310b~1" CAMPAIGNS=ds bash scripts/h200-bisect.sh .carry start 560
# (22b8e310b, #27133, 341 of the range, after 2bacf9ea5 at 318, swapped the threads around every
# yield_to_queue: the decode now runs on the server's thread and the task queue on the worker,
# and the end of every yield waits for the worker to finish its current task; a change in the
# per-decode thread handoffs, so a suspect, not a finding).
# PROTOCOL (default "--mode full --metric repeated --canaries 128") is the campaigns' bench
# protocol: the first part (2026-12-03, benchmarks/h200-bisect-2026-12-03/) ran screen mode's
# single row 0, whose ±8% per run left its probes not significant; the mean of 7 repeated rows
# reads less noisy. A campaign's log fixes its protocol: resume it with the one it started with.
#   start SECONDS   unpack, build the good end, make the models and templates, and start the
#                   campaigns in the background (setsid: they outlive the call while the machine
#                   is held); then wait up to SECONDS, copying the state to $OUT
#   wait SECONDS    wait up to SECONDS more, copying the state to $OUT; a .carry/llbuild.xz
#                   other than the running one replaces it before the campaigns' next step
# $OUT gets ds.log and mtp.log (each campaign's bisect.log: resume from them), ds.txt and
# mtp.txt (llbuild bisect log), progress.log (the campaigns' stderr, last lines) and records.tgz
# (every bench record of both campaigns, without server logs).
set -uo pipefail
D=$(cd "${1:?usage: h200-bisect.sh CARRY_DIR start|wait SECONDS}" && pwd); stage=${2:?stage}; secs=${3:-540}
OUT=${OUT:-/tmp/h200-bisect-out}; mkdir -p "$OUT"
B=/tmp/bisect REPO=/tmp/bisect/llrange.git
L=$B/bin # the unpacked tools: each call replaces the checkout (and .carry), the background job outlives it
export PATH=$PATH:/usr/local/cuda/bin
good=${GOOD:-1425386fd996511e1f3295e7366c38289a92a271} bad=${BAD:-34af94cd9ab277632e27caeec2d41de2fd091b31}
PROTOCOL=${PROTOCOL:---mode full --metric repeated --canaries 128}
CAMPAIGNS=${CAMPAIGNS:-ds mtp} # which campaigns run (ds alone halves the builds of a short lease)

collect() {
	for c in $CAMPAIGNS; do
		[ -f "$B/$c/bisect.log" ] && cp "$B/$c/bisect.log" "$OUT/$c.log" && $L/llbuild bisect log "$B/$c" >"$OUT/$c.txt" 2>&1
	done
	tail -c 60000 $B/progress.log >"$OUT/progress.log" 2>/dev/null
	# whether consecutive probes' CUDA objects came from the cache (part 4: a probe next to one
	# built in the same lease still took 253 s): ccache's counters, unsupported options included
	CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/llbuild/ccache} PATH=$B/ccache/bin:$PATH ccache --print-stats >"$OUT/ccache-stats.txt" 2>&1
	local dirs=()
	for c in $CAMPAIGNS; do dirs+=("$c/bench"); done
	(cd $B && tar -czf "$OUT/records.tgz" --exclude=server.log "${dirs[@]}" 2>/dev/null)
	for c in $CAMPAIGNS; do [ -f "$OUT/$c.txt" ] && cat "$OUT/$c.txt"; done | grep -E '^(ends|threshold|inert|[0-9]+ |probing|done|no-step|ambiguous|confirm|culprit)' | tail -30
	return 0 # the call's status is not the campaigns' (they go on in the background)
}

newer_llbuild() { # a .carry/llbuild.xz other than the one unpacked replaces it between two steps
	local sum
	sum=$(sha256sum "$D/llbuild.xz" 2>/dev/null | cut -d' ' -f1) || return 0
	[ -n "$sum" ] && [ -x $L/llbuild ] && [ "$sum" != "$(cat $L/llbuild.sha256 2>/dev/null)" ] || return 0
	xz -dc "$D/llbuild.xz" >$L/llbuild.new && chmod +x $L/llbuild.new && mv $L/llbuild.new $L/llbuild &&
		echo "$sum" >$L/llbuild.sha256 && echo "llbuild replaced: the next step runs $($L/llbuild --version 2>&1 | head -1)"
}

waitfor() { # waitfor SECONDS: until the campaigns end or the time is up
	local t0=$SECONDS
	while [ $((SECONDS - t0)) -lt "$1" ] && ! [ -f $B/finished ]; do sleep 10; done
	[ -f $B/finished ] && echo "campaigns finished: $(cat $B/finished)"
	tail -5 $B/progress.log
	collect
}

case $stage in
start)
	if [ -f $B/running ] && kill -0 "$(cat $B/running)" 2>/dev/null; then
		echo "the campaigns are running already (pid $(cat $B/running)): waiting"
		waitfor "$secs"
		exit 0
	fi
	rm -f $B/finished $B/*.failed $B/*.failed1
	mkdir -p $L $B/src && cp -r patches $B/src/ || exit 1
	for f in llbuild bigramgguf old-testament.txt; do
		[ -e $L/$f ] || { xz -dc "$D/$f.xz" >$L/$f && chmod +x $L/$f; } || exit 1
	done
	[ -f $L/llbuild.sha256 ] || sha256sum "$D/llbuild.xz" | cut -d' ' -f1 >$L/llbuild.sha256
	newer_llbuild
	[ -d $REPO ] || tar -xf "$D"/llama.cpp-history.git.tar -C $B || exit 1
	if [ -f "$D"/ccache.txz ] && ! command -v ccache >/dev/null; then
		[ -x $B/ccache/bin/ccache ] || tar -xJf "$D"/ccache.txz -C $B || exit 1
		$B/ccache/bin/ccache --version | head -1
	fi
	export PATH=$B/ccache/bin:$PATH # the campaigns' builds find it (the plan's compiler launcher)
	for c in $CAMPAIGNS; do # an earlier part's log, carried in
		[ -f "$D/$c.log" ] && mkdir -p "$B/$c" && cp "$D/$c.log" "$B/$c/bisect.log" && echo "$c: resuming from $(wc -l <"$D/$c.log") events"
	done
	nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$OUT/gpu.txt"
	# the campaigns run in a session of their own, so that they outlive this call while the
	# machine is held; their script is quoted whole and gets its values as arguments
	# shellcheck disable=SC2016
	setsid bash -c '
		D=$1 B=$2 REPO=$3 good=$4 bad=$5 PROTOCOL=$6 CAMPAIGNS=$7 TEMPLATE_REF=$8 NEXT=$9
		exec >>$B/progress.log 2>&1
		echo $$ >$B/running
		cd $B/src || exit 1
		t0=$SECONDS
		mkdir -p $B/plain && cp patches/0001-ggml-cuda-link-driver-interface.patch $B/plain/ && grep "^0001-" patches/series >$B/plain/series
		# the good end, built as the campaigns build it (the same plan, so they reuse it): the
		# templates need its artifacts
		if [ -n "$TEMPLATE_REF" ]; then
			# a commit the campaign builds anyway (the plan a probe of it has: --ref with the
			# built-in recipe), so that the templates cost no build of their own
			a=$("$D"/llbuild build --executor host -t h200 --source $REPO --ref "$TEMPLATE_REF" --series $B/plain/series --out $B/artifacts --work-dir $B/work) || { echo "$TEMPLATE_REF: build failed"; exit 1; }
			echo "templates from $TEMPLATE_REF, built in $((SECONDS - t0)) s: $a"
		else
			a=$(ls -d $B/artifacts/h200/3708fd884f2d 2>/dev/null) || a=$("$D"/llbuild build --executor host -t h200 --source $REPO --recipe patches/1425386fd/server.yaml --series $B/plain/series --out $B/artifacts --work-dir $B/work) || { echo "good end: build failed"; exit 1; }
			echo "good end built in $((SECONDS - t0)) s: $a"
		fi
		if ! [ -f $B/ga.gguf ]; then
			"$D"/bigramgguf -text "$D"/old-testament.txt -shape 1b -o $B/m.gguf && "$D"/bigramgguf -text "$D"/old-testament.txt -shape draft -o $B/d.gguf &&
				"$D"/bigramgguf -text "$D"/old-testament.txt -shape gemma4-1b -o $B/g.gguf -assistant $B/ga.gguf || exit 1
		fi
		common=(--server-arg=--n-gpu-layers --server-arg=99 --server-arg=--threads --server-arg=8 --server-arg=--ctx-size --server-arg=4096 --server-arg=--parallel --server-arg=1 --link --force -q)
		"$D"/llbuild bundle -t h200 --artifacts "$a" -o $B/tpl-ds --model $B/m.gguf --draft $B/d.gguf "${common[@]}" >/dev/null &&
			"$D"/llbuild bundle -t h200 --artifacts "$a" -o $B/tpl-mtp --model $B/g.gguf --draft $B/ga.gguf "${common[@]}" >/dev/null || exit 1
		ended() { [ -f $B/$1.failed ] || "$D"/llbuild bisect log $B/$1 --json 2>/dev/null | grep -qE "\"phase\": \"(done|no-step|ambiguous|ends-unusable)\""; }
		while :; do
			for c in $CAMPAIGNS; do
				ended $c && continue
				echo "== $c: one step, $((SECONDS - t0)) s into the part"
				# a campaign with a log goes on with its own settings; a new one starts over good..bad
				start=(--good "$good" --bad "$bad" -t h200 --template "$B/tpl-$c" --series plain $PROTOCOL)
				[ -f "$B/$c/bisect.log" ] && start=()
				# NEXT: suspects to probe first, one per step once the ends are measured
				next=() suspect=${NEXT%% *}
				if [ -n "$NEXT" ] && "$D"/llbuild bisect log $B/$c --json 2>/dev/null | grep -q "\"phase\": \"probing\""; then
					next=(--next "$suspect")
					NEXT=$(echo "${NEXT#"$suspect"}" | sed "s/^ *//")
					echo "$c: probing the suspect $suspect first"
				fi
				"$D"/llbuild bisect run --dir $B/$c --source $REPO "${start[@]}" "${next[@]}" \
					--executor host --out $B/artifacts --work-dir $B/work --max-probes 1 >$B/$c.out 2>$B/$c.err
				rc=$?
				cat $B/$c.err
				grep -E "^(ends|threshold|probing|done|no-step|ambiguous|culprit|confirm)" $B/$c.out
				if [ $rc -eq 2 ] && [ ${#next[@]} -gt 0 ]; then
					echo "$c: the suspect $suspect cannot be probed (decided, inert or outside the open range): the search goes on"
				elif [ $rc -ne 0 ]; then
					echo "$c: bisect run exit $rc"; [ -f $B/$c.failed1 ] && touch $B/$c.failed; touch $B/$c.failed1
				fi
			done
			all=1; for c in $CAMPAIGNS; do ended $c || all=0; done
			[ $all = 1 ] && { echo "$CAMPAIGNS ended after $((SECONDS - t0)) s" >$B/finished; break; }
		done
	' _ $L $B $REPO "$good" "$bad" "$PROTOCOL" "$CAMPAIGNS" "${TEMPLATE_REF:-}" "${NEXT:-}" </dev/null &
	sleep 5
	waitfor "$secs" ;;
wait) newer_llbuild; waitfor "$secs" ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
