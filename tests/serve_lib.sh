# serve_lib.sh - starting `coli serve` in the shell tests; sourced after
# lib.sh, with COLI, demo and tmp set:
#   . "$(dirname "$0")/serve_lib.sh"
# Each server listens on a port of its own choosing (--port 0), so that
# tests running in parallel do not collide; every one started is stopped
# on exit.

# Exits 77 (skip) when coli was built without libmicrohttpd.
need_microhttpd() {
	if ! grep '^#define COLI_HAVE_MICROHTTPD 1' "$builddir/config.h" >/dev/null 2>&1; then
		echo "SKIP: coli was built without libmicrohttpd (configure --with-microhttpd)"
		exit 77
	fi
}

pids=
serve_cleanup() {
	for p in $pids; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap serve_cleanup EXIT

# start NAME OPTIONS...: starts a server on the demo model (log in
# $tmp/NAME.log) and waits for its /health; sets $base to its URL.
start() {
	name=$1
	shift
	"$COLI" serve --model "$demo" --port 0 --threads 1 "$@" >"$tmp/$name.log" 2>&1 &
	pids="$pids $!"
	servers="${servers:-} $name:$!"
	base=
	i=0
	while [ $i -lt 100 ]; do
		port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\)/.*|\1|p' "$tmp/$name.log" 2>/dev/null)
		if [ -n "$port" ] && [ "$(curl -s "http://127.0.0.1:$port/health")" = '{"status":"ok"}' ]; then
			base=http://127.0.0.1:$port
			return 0
		fi
		i=$((i + 1))
		sleep 0.1
	done
	fail "$name: the server did not become healthy"
	sed 's/^/    /' "$tmp/$name.log"
	return 1
}

# stop_servers: SIGTERM to every server started and not yet stopped; each
# must exit 0, having said it stops, with nothing of a sanitizer (no error,
# no leak) in its log.
stop_servers() {
	for sv in ${servers:-}; do
		name=${sv%%:*}
		pid=${sv#*:}
		kill -TERM "$pid" 2>/dev/null
		wait "$pid"
		status=$?
		if [ "$status" = 0 ] && contains "$tmp/$name.log" "stopping (SIGTERM)" &&
			! grep -E "AddressSanitizer|LeakSanitizer|runtime error|ThreadSanitizer" "$tmp/$name.log" >/dev/null; then
			pass "$name: SIGTERM stops the server cleanly"
		else
			fail "$name: exit status $status after SIGTERM"
			grep -v "^coli serve: [A-Z-]* /" "$tmp/$name.log" | head -n 40 | sed 's/^/    /'
		fi
	done
	pids=
	servers=
}
