#!/usr/bin/env bash
# Project-local PostgreSQL and Redis for development and tests.
# Usage: scripts/services.sh start|stop|status|env
# Ports: SWITCHYARD_PG_PORT (default 55432), SWITCHYARD_REDIS_PORT (default 56379).
# Data: SWITCHYARD_LOCAL_DIR (default .local): another directory and other
# ports give a second, separate Postgres + Redis pair (the chaos suite's,
# scripts/chaos-services.sh).
# Non-default ports on purpose: a system instance from the Debian packages
# (5432/6379) can never collide with ours.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
LOCAL=${SWITCHYARD_LOCAL_DIR:-$ROOT/.local}
PG_PORT=${SWITCHYARD_PG_PORT:-55432}
REDIS_PORT=${SWITCHYARD_REDIS_PORT:-56379}
PGDATA_DIR=$LOCAL/postgres
PG_LOG=$LOCAL/postgres.log
REDIS_DIR=$LOCAL/redis
REDIS_PIDFILE=$LOCAL/redis.pid
REDIS_LOG=$LOCAL/redis.log
DB=switchyard

say() { echo "services: $*"; }
die() { echo "services: $*" >&2; exit 1; }

pg_bin() {
	local dirs=(/usr/lib/postgresql/*/bin)
	printf '%s\n' "${dirs[@]}" | sort -V | tail -n1
}
PGBIN=$(pg_bin)

# Postgres refuses to run as root: run its tools as the postgres OS user then.
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

psql_() { "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }
# Our data dir has a live postmaster (on whatever port; line 4 of postmaster.pid says which).
pg_alive() { [[ -f $PGDATA_DIR/postmaster.pid ]] && as_pg "$PGBIN/pg_ctl" status -D "$PGDATA_DIR" >/dev/null 2>&1; }
pg_port() { sed -n 4p "$PGDATA_DIR/postmaster.pid" 2>/dev/null; }
pg_ours() { pg_alive && [[ $(pg_port) == "$PG_PORT" ]]; }
pg_ready() { "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }
redis_up() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }
# The Redis answering on our port is the one whose pid is in our pidfile.
redis_ours() {
	[[ -s $REDIS_PIDFILE ]] || return 1
	[[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p') == "$(cat "$REDIS_PIDFILE")" ]]
}
pid_gone() { ! kill -0 "$1" 2>/dev/null; }

# wait_for DESC LOGFILE CMD...: poll CMD for up to 30s; on timeout show the log tail.
wait_for() {
	local desc=$1 log=$2 i
	shift 2
	for ((i = 0; i < 150; i++)); do
		"$@" && return 0
		sleep 0.2
	done
	echo "services: $desc not ready after 30s; last lines of $log:" >&2
	tail -n 30 "$log" >&2 || true
	exit 1
}

start_pg() {
	if pg_ours; then
		wait_for "postgres" "$PG_LOG" pg_ready
		say "postgres already running on 127.0.0.1:$PG_PORT"
	elif pg_alive; then
		die "postgres in $PGDATA_DIR runs on port $(pg_port), not $PG_PORT; run '$0 stop' with the old port first"
	else
		# pg_isready exits 2 when nothing answers; anything else means the port is taken.
		local rc=0
		"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" || rc=$?
		((rc == 2)) || die "port $PG_PORT already has a Postgres that is not $PGDATA_DIR; stop it or set SWITCHYARD_PG_PORT"

		mkdir -p "$PGDATA_DIR"
		touch "$PG_LOG"
		if ((EUID == 0)); then
			chown postgres:postgres "$PGDATA_DIR" "$PG_LOG"
			# The postgres user must be able to traverse every directory down to .local
			# (e.g. a clone under /root, which is 0700). Walk top-down, fix only what is needed.
			local d="" part parts
			IFS=/ read -ra parts <<<"${LOCAL#/}"
			for part in "${parts[@]}"; do
				d+=/$part
				as_pg test -x "$d" || { chmod o+x "$d" && say "chmod o+x $d (so the postgres user can reach $LOCAL)"; }
			done
		fi
		chmod 700 "$PGDATA_DIR"

		if [[ ! -s $PGDATA_DIR/PG_VERSION ]]; then
			say "initdb $PGDATA_DIR"
			if ! as_pg "$PGBIN/initdb" -D "$PGDATA_DIR" --auth=trust -U postgres -E UTF8 --locale=C --no-sync >>"$PG_LOG" 2>&1; then
				find "$PGDATA_DIR" -mindepth 1 -delete # initdb won't reuse a non-empty dir
				tail -n 30 "$PG_LOG" >&2
				die "initdb failed"
			fi
			echo "include = 'switchyard.conf'" >>"$PGDATA_DIR/postgresql.conf"
		fi

		# Rewritten on every start so a changed SWITCHYARD_PG_PORT takes effect.
		# Unix socket lives in the data dir; a socket path is limited to 107 bytes,
		# so fall back to TCP only when the checkout path is very long.
		local sock=$PGDATA_DIR
		((${#sock} + 18 <= 107)) || sock=""
		as_pg tee "$PGDATA_DIR/switchyard.conf" >/dev/null <<-EOF
			# Written by scripts/services.sh: throwaway instance for dev and tests.
			listen_addresses = '127.0.0.1'
			port = $PG_PORT
			unix_socket_directories = '$sock'
			fsync = off
			synchronous_commit = off
			full_page_writes = off
			max_connections = 300
			shared_buffers = 256MB
		EOF

		say "starting postgres on 127.0.0.1:$PG_PORT (log $PG_LOG)"
		if ! as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -w -t 60 start >/dev/null; then
			tail -n 30 "$PG_LOG" >&2
			die "postgres failed to start"
		fi
		wait_for "postgres" "$PG_LOG" pg_ready
	fi

	if [[ $(psql_ -d postgres -tAc "select 1 from pg_database where datname = '$DB'") != 1 ]]; then
		psql_ -d postgres -c "create database $DB"
		say "created database $DB"
	fi
}

start_redis() {
	if redis_up; then
		redis_ours || die "port $REDIS_PORT already has a Redis not started from $ROOT; stop it or set SWITCHYARD_REDIS_PORT"
		say "redis already running on 127.0.0.1:$REDIS_PORT"
		return
	fi
	mkdir -p "$REDIS_DIR"
	say "starting redis on 127.0.0.1:$REDIS_PORT (log $REDIS_LOG)"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --protected-mode no \
		--dir "$REDIS_DIR" --daemonize yes --pidfile "$REDIS_PIDFILE" --logfile "$REDIS_LOG" \
		--save '' --appendonly no
	wait_for "redis" "$REDIS_LOG" redis_up
}

stop_all() {
	if pg_alive; then
		as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null
		say "postgres stopped"
	else
		say "postgres not running"
	fi
	local pid
	pid=$(cat "$REDIS_PIDFILE" 2>/dev/null || true)
	if redis_ours; then
		redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	elif [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == redis-server ]]; then
		# Ours, but on another port (SWITCHYARD_REDIS_PORT changed). No persistence
		# is configured, so SIGTERM just exits, like shutdown nosave.
		kill -TERM "$pid"
	else
		rm -f "$REDIS_PIDFILE"
		say "redis not running"
		return
	fi
	wait_for "redis shutdown" "$REDIS_LOG" pid_gone "$pid"
	rm -f "$REDIS_PIDFILE"
	say "redis stopped"
}

status() {
	local ok=0
	if pg_ours && pg_ready; then
		say "postgres up on 127.0.0.1:$PG_PORT ($PGDATA_DIR)"
	elif pg_alive; then
		say "postgres running on port $(pg_port), not $PG_PORT"
		ok=1
	else
		say "postgres down"
		ok=1
	fi
	if redis_ours; then say "redis up on 127.0.0.1:$REDIS_PORT (pid $(cat "$REDIS_PIDFILE"))"; else say "redis down"; ok=1; fi
	return "$ok"
}

print_env() {
	local pg="postgres://postgres@127.0.0.1:$PG_PORT/$DB?sslmode=disable"
	local redis="redis://127.0.0.1:$REDIS_PORT/0"
	echo "export SWITCHYARD_DATABASE_URL='$pg'"
	echo "export SWITCHYARD_REDIS_URL='$redis'"
	echo "export SWITCHYARD_TEST_DATABASE_URL='$pg'"
	echo "export SWITCHYARD_TEST_REDIS_URL='$redis'"
}

case ${1:-} in
start)
	bash "$ROOT/scripts/deps.sh"
	PGBIN=$(pg_bin) # deps.sh may just have installed it
	start_pg
	start_redis
	;;
stop) stop_all ;;
status) status ;;
env) print_env ;;
*)
	echo "usage: $0 start|stop|status|env" >&2
	exit 2
	;;
esac
