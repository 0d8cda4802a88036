#!/usr/bin/env bash
# Runs llbuild's whole test suite. On a fresh Debian 12 machine it first installs what the tests
# use for real (cmake, ninja, ccache, binutils' objdump, dpkg tools for the llama-server fixture,
# chromium for the campaign page);
# it needs root for that, or the packages already installed. With ../shared beside the
# repository it then starts the Dagger engine and builds the pinned llama.cpp (provision.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg_cmd in cmake:cmake ninja-build:ninja ccache:ccache binutils:objdump git:git g++:g++ nodejs:node npm:npm docker-registry:docker-registry apache2-utils:htpasswd shellcheck:shellcheck openssl:openssl python3:python3 python3-pip:pip3 mmdebstrap:mmdebstrap iproute2:ip apt-utils:apt-ftparchive gpg:gpg gpg-agent:gpg-agent bible-kjv:bible chromium:chromium; do
	pkg=${pkg_cmd%%:*} cmd=${pkg_cmd##*:}
	command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "scripts/test.sh: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
		exit 2
	fi
	# a fresh machine has no package lists yet; apt's output is shown only when it fails
	log=$(mktemp)
	if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
		cat "$log" >&2
		echo "scripts/test.sh: installing ${need[*]} failed (apt's output above)" >&2
		exit 2
	fi
	rm -f "$log"
fi

export PATH=$PATH:/usr/local/go/bin
# the engine, stand-in images, pinned llama.cpp and its builds (scripts/provision.sh says what)
# shellcheck source=scripts/provision.sh disable=SC1091
source scripts/provision.sh
trap provision_stop_engine EXIT
provision
go vet ./...
go vet -tags gpu .
go test -timeout 45m -count=1 ./... "$@"
