#!/usr/bin/env bash
# remote-engine.sh start|stop: a Dagger engine on another "machine" for testing
# `llbuild build --engine tcp://ADDR:PORT`: the engine from ../shared/dagger (install.sh must
# have run) in its own network namespace (llbuild-buildbox, reached over a veth pair at
# 10.201.0.2 from 10.201.0.1), with its own state, listening on TCP. As root.
#
#   eval "$(bash scripts/remote-engine.sh start)"   # prints LLBUILD_REMOTE_ENGINE=tcp://10.201.0.2:1234
#   bash scripts/remote-engine.sh stop              # stops it, removes the namespace and veth
#
# Env: STATE (default /var/lib/dagger-buildbox), LOG (/var/log/dagger-buildbox.log), PORT (1234).
set -euo pipefail
NS=llbuild-buildbox HOST_IF=llb-host NS_IF=llb-box HOST_IP=10.201.0.1 NS_IP=10.201.0.2
PORT=${PORT:-1234} STATE=${STATE:-/var/lib/dagger-buildbox} LOG=${LOG:-/var/log/dagger-buildbox.log}
RUN=/run/dagger-buildbox PIDFILE=/run/dagger-buildbox/engine.pid
ENGINE_BIN=/usr/local/bin/dagger-engine DAGGER_CLI=/usr/local/bin/dagger
[ "$(id -u)" = 0 ] || { echo "remote-engine.sh: run as root" >&2; exit 2; }

stop() {
	if [ -f "$PIDFILE" ]; then
		pid=$(cat "$PIDFILE")
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$PIDFILE"
	fi
	ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
	ip link del "$HOST_IF" 2>/dev/null || true
	ip netns del "$NS" 2>/dev/null || true
}

answers() {
	timeout 60 env _EXPERIMENTAL_DAGGER_RUNNER_HOST="tcp://$NS_IP:$PORT" DAGGER_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1 \
		"$DAGGER_CLI" --silent core version >/dev/null 2>&1
}

case ${1:-} in
stop) stop; exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
for f in "$ENGINE_BIN" "$DAGGER_CLI"; do
	[ -x "$f" ] || { echo "remote-engine.sh: missing $f: run ../shared/dagger/install.sh first" >&2; exit 2; }
done
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && answers; then
	echo "LLBUILD_REMOTE_ENGINE=tcp://$NS_IP:$PORT"
	exit 0
fi
stop
mkdir -p "$RUN" "$STATE"
ip netns add "$NS"
ip link add "$HOST_IF" type veth peer name "$NS_IF"
ip link set "$NS_IF" netns "$NS"
ip addr add "$HOST_IP/30" dev "$HOST_IF" && ip link set "$HOST_IF" up
ip netns exec "$NS" ip addr add "$NS_IP/30" dev "$NS_IF"
ip netns exec "$NS" ip link set "$NS_IF" up
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" ip route add default via "$HOST_IP"
cp -L /etc/resolv.conf "$RUN/host-resolv.conf"
# Its own mount namespace: the engine's resolv.conf bind, /run and its CNI state (IP
# allocations, dnsname's dnsmasq) stay apart from the host's and from the other engine's.
# shellcheck disable=SC2016 # $1 and $@ are the inner shell's
setsid ip netns exec "$NS" unshare -m --propagation private sh -c '
	mount --bind "$1" /etc/resolv.conf
	mkdir -p /var/lib/cni
	mount -t tmpfs tmpfs /var/lib/cni
	# a /run of its own: the engine keeps sockets and state there at fixed paths, which the
	# local engine uses too (sharing them wedged the local engine)
	mount -t tmpfs tmpfs /run
	# ip netns exec mounts a sysfs of the namespace, without the cgroup tree runc needs
	mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
	shift
	exec "$@"' sh "$RUN/host-resolv.conf" \
	env PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin \
	"$ENGINE_BIN" --root "$STATE" --addr "tcp://$NS_IP:$PORT" --oci-worker-net cni \
	</dev/null >>"$LOG" 2>&1 &
echo $! >"$PIDFILE"
t0=$(date +%s)
until answers; do
	if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
		echo "remote-engine.sh: the engine exited; last lines of $LOG:" >&2; tail -20 "$LOG" >&2; stop; exit 1
	fi
	if [ $(($(date +%s) - t0)) -ge 120 ]; then
		echo "remote-engine.sh: no answer on tcp://$NS_IP:$PORT after 120 s; last lines of $LOG:" >&2; tail -20 "$LOG" >&2; exit 1
	fi
	sleep 2
done
echo "remote-engine.sh: engine up in namespace $NS on tcp://$NS_IP:$PORT in $(($(date +%s) - t0)) s" >&2
echo "LLBUILD_REMOTE_ENGINE=tcp://$NS_IP:$PORT"
