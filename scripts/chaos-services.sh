#!/usr/bin/env bash
# The chaos suite's own PostgreSQL and Redis: scripts/services.sh with another
# data directory and other ports, so `switchyard chaos` can restart them under
# load without disturbing the shared development and test instances.
# Usage: scripts/chaos-services.sh start|stop|status|env|restart-pg [DOWN_SECONDS]|restart-redis
#   stop also kills worker pods a crashed chaos run left behind (pods.pids).
# Settings: SWITCHYARD_CHAOS_DIR (default .local/chaos), SWITCHYARD_CHAOS_PG_PORT
# (default 25442), SWITCHYARD_CHAOS_REDIS_PORT (default 26389). The shared
# instance's SWITCHYARD_PG_PORT / SWITCHYARD_REDIS_PORT are ignored on purpose.
# The ports are below Linux's ephemeral range (32768-60999): these services are
# restarted again and again, and a port in that range can be held for a moment
# by any outgoing connection on the machine, failing the restart's bind.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DIR=${SWITCHYARD_CHAOS_DIR:-$ROOT/.local/chaos}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
export SWITCHYARD_LOCAL_DIR=$DIR
export SWITCHYARD_PG_PORT=${SWITCHYARD_CHAOS_PG_PORT:-25442}
export SWITCHYARD_REDIS_PORT=${SWITCHYARD_CHAOS_REDIS_PORT:-26389}
SERVICES=$ROOT/scripts/services.sh

say() { echo "chaos-services: $*"; }
die() { echo "chaos-services: $*" >&2; exit 1; }

pg_bin() {
	local dirs=(/usr/lib/postgresql/*/bin)
	printf '%s\n' "${dirs[@]}" | sort -V | tail -n1
}
# Postgres refuses to run as root: run its tools as the postgres OS user then.
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
redis_cli() { redis-cli -h 127.0.0.1 -p "$SWITCHYARD_REDIS_PORT" "$@"; }

# Kill pods a chaos run left behind: pids in pods.pids still running
# `serve --chaos-handlers` (a pid reused by anything else is left alone).
stop_pods() {
	local f=$DIR/pods.pids pid
	[[ -f $f ]] || return 0
	while read -r pid; do
		[[ $pid =~ ^[0-9]+$ ]] || continue
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- '--chaos-handlers'; then
			kill -KILL "$pid" 2>/dev/null && say "killed leftover pod $pid"
		fi
	done <"$f"
	rm -f "$f"
}

# pg_ctl restart -m fast: sessions are terminated, the server shuts down and
# starts again; -w waits until it accepts connections. With DOWN_SECONDS > 0,
# a longer outage: stop, stay down that long, start.
restart_pg() {
	local down=${1:-0}
	[[ -f $DIR/postgres/postmaster.pid ]] || die "postgres in $DIR/postgres is not running"
	if [[ $down == 0 ]]; then
		as_pg "$(pg_bin)/pg_ctl" -D "$DIR/postgres" -l "$DIR/postgres.log" -m fast -w -t 60 restart >/dev/null
	else
		as_pg "$(pg_bin)/pg_ctl" -D "$DIR/postgres" -m fast -w -t 60 stop >/dev/null
		sleep "$down"
		as_pg "$(pg_bin)/pg_ctl" -D "$DIR/postgres" -l "$DIR/postgres.log" -w -t 60 start >/dev/null
	fi
	say "postgres restarted (down ${down}s extra)"
}

# SHUTDOWN NOSAVE (nothing persisted: every lock and cache entry is gone),
# wait for the process to exit, then start it again the usual way.
restart_redis() {
	local pid i
	pid=$(cat "$DIR/redis.pid" 2>/dev/null || true)
	redis_cli shutdown nosave >/dev/null 2>&1 || true
	if [[ -n $pid ]]; then
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		! kill -0 "$pid" 2>/dev/null || die "redis (pid $pid) still running 10s after shutdown"
	fi
	rm -f "$DIR/redis.pid"
	bash "$SERVICES" start
	say "redis restarted"
}

case ${1:-} in
start | status | env) exec bash "$SERVICES" "$1" ;;
stop)
	stop_pods
	exec bash "$SERVICES" stop
	;;
restart-pg) restart_pg "${2:-0}" ;;
restart-redis) restart_redis ;;
*)
	echo "usage: $0 start|stop|status|env|restart-pg [DOWN_SECONDS]|restart-redis" >&2
	exit 2
	;;
esac
