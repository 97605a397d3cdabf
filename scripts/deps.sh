#!/usr/bin/env bash
# Ensure the tools the project's local services and tests need are present:
# PostgreSQL server binaries (initdb, pg_ctl, psql, pg_isready), redis-server,
# redis-cli, promtool and make. Installs Debian packages only for what is missing.
set -euo pipefail

# Newest PostgreSQL under /usr/lib/postgresql/*/bin (the Debian layout).
pg_bin() {
	local dirs=(/usr/lib/postgresql/*/bin) d
	d=$(printf '%s\n' "${dirs[@]}" | sort -V | tail -n1)
	[[ -n $d && -x $d/initdb && -x $d/pg_ctl && -x $d/psql && -x $d/pg_isready ]] && echo "$d"
}

have() { command -v "$1" >/dev/null 2>&1; }

missing=()
pg_bin >/dev/null || missing+=(postgresql)
have redis-server || missing+=(redis-server)
have redis-cli || missing+=(redis-tools)
have promtool || missing+=(prometheus)
have make || missing+=(make)

if ((${#missing[@]} == 0)); then
	echo "deps: all present (postgres: $(pg_bin))"
	exit 0
fi

echo "deps: installing ${missing[*]}"
if ((EUID != 0)); then
	echo "deps: must run as root to install ${missing[*]}" >&2
	exit 1
fi

# Keep package postinst scripts from starting system-wide instances (default
# ports 5432/6379/9090 would not collide with ours, but they are unwanted).
# Docker-style images usually ship this file already; add it only if absent.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	trap 'rm -f "$policy"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q || ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
	echo "deps: FAILED to install ${missing[*]} with apt-get" >&2
	exit 1
fi

pg_bin >/dev/null || { echo "deps: no initdb/pg_ctl under /usr/lib/postgresql/*/bin after install" >&2; exit 1; }
for t in redis-server redis-cli promtool make; do
	have "$t" || { echo "deps: $t still missing after install" >&2; exit 1; }
done
echo "deps: installed ${missing[*]} (postgres: $(pg_bin))"
