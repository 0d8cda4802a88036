#!/bin/bash
# gpu-chain.sh: a lease's GPU steps, run in order across calls of at most 10 minutes. The GPU
# machine's /tmp lives 30 s after a call and a call runs 600 s at most, so a lease is a few
# calls back to back of the same command:
#   bash scripts/gpu-chain.sh scripts/gpu-plans/PLAN
# (with carry [".carry"], made by scripts/h200-carry.sh). Each line of PLAN is a step: about how
# many seconds it takes, then its shell command (run from the repository root with OUT set to
# the step's own folder). A step starts only if it fits in what is left of the call (LIMIT,
# default 570 s), except the first of a call, which always starts: a build cut off at the
# call's limit goes on where ninja stopped when the same command runs again. A finished step is
# not run again while the machine lives (/tmp/chain/PLAN/done-N, which holds the command it ran:
# each plan keeps its own, so a second plan on the same warm machine starts at its step 1, and a
# plan whose finished step was changed since is refused, not half-skipped; a step appended to a
# plan runs); a failed one stops the chain. CHAIN_STATE moves /tmp/chain.
# Each call leaves in $OUT the chain's summary and chain.tgz (every step's log and output so
# far); the summary's last line says "chain: done" or what to run next.
set -uo pipefail
plan=${1:?usage: gpu-chain.sh PLAN}
[ -f "$plan" ] || { echo "gpu-chain.sh: no plan $plan" >&2; exit 2; }
limit=${LIMIT:-570}
name=$(basename "$plan" .plan)
state=${CHAIN_STATE:-/tmp/chain}/$name
out=${OUT:-/tmp/chain-out}
mkdir -p "$state" "$out"
t0=$SECONDS n=0 ran=0 status="done"
# keep: chain.tgz and summary.txt in $OUT as they stand, after every step, so that a call cut
# off by the machine's own limit (its device time spent) still brings back the steps it finished
keep() {
	# a file over 16 MiB does not come back from the GPU machine: then without the campaigns'
	# archives (runs-*.tgz; the verdicts, tables and records.json stay). The state only grows, so
	# once the summary says so, the whole archive is not made again.
	if ! grep -q '^chain: chain.tgz without' "$state/summary" 2>/dev/null; then
		tar -C "$state" -czf "$out/chain.tgz.new" . 2>/dev/null
		[ "$(stat -c %s "$out/chain.tgz.new")" -le $((15 << 20)) ] ||
			echo "chain: chain.tgz without runs-*.tgz (over 15 MiB with them)" | tee -a "$state/summary"
	fi
	if grep -q '^chain: chain.tgz without' "$state/summary" 2>/dev/null; then
		tar -C "$state" -czf "$out/chain.tgz.new" --exclude='runs-*.tgz' --exclude='*.gguf' . 2>/dev/null
	fi
	mv "$out/chain.tgz.new" "$out/chain.tgz"
	cp "$state/summary" "$out/summary.txt"
}
finish() {
	echo "chain: $1" | tee -a "$state/summary"
	keep
}
while IFS= read -r line || [ -n "$line" ]; do
	case $line in '' | '#'*) continue ;; esac
	n=$((n + 1))
	est=${line%% *} cmd=${line#* }
	if ! [[ $est =~ ^[0-9]+$ ]]; then
		finish "step $n of $plan does not start with its seconds: $line"
		exit 2
	fi
	if [ -f "$state/done-$n" ]; then
		# the seconds may be corrected between calls; the command may not
		ran_as=$(cat "$state/done-$n")
		if [ "$ran_as" != "$cmd" ]; then
			finish "step $n ran as \"$ran_as\" but $plan now says \"$cmd\": restore the plan, or start it afresh with CHAIN_STATE set to an empty folder"
			exit 2
		fi
		continue
	fi
	left=$((limit - (SECONDS - t0)))
	if [ $ran -gt 0 ] && [ "$est" -gt "$left" ]; then
		status="step $n needs about $est s and $left s are left in this call: run the same command again within 30 s"
		break
	fi
	echo "== step $n ($(date -u +%T)): $cmd" | tee -a "$state/summary"
	s0=$SECONDS
	mkdir -p "$state/out-$n"
	OUT=$state/out-$n bash -c "$cmd" > >(tee -a "$state/log-$n") 2>&1
	rc=$?
	ran=$((ran + 1))
	echo "== step $n: exit $rc in $((SECONDS - s0)) s" | tee -a "$state/summary"
	if [ $rc -ne 0 ]; then
		finish "step $n failed (exit $rc): its log is log-$n in chain.tgz; fix it, then run the same command again"
		exit 1
	fi
	printf '%s' "$cmd" >"$state/done-$n"
	keep
done <"$plan"
finish "$status"
