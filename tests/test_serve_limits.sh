#!/bin/sh
# test_serve_limits.sh - `coli serve` against clients that try to use up
# its connections (tests/serve_limits.py): 200 idle sockets and 20
# requests dripped a byte at a time stay open while normal requests are
# answered in their usual time, then are closed by --idle-timeout and
# answered 408 by --request-timeout; one address past
# --max-client-connections; more waiting connections than
# --max-connections leaves room for, with a stream that is never cut.
# Each server stops cleanly afterwards (a sanitizer build: nothing in its
# log).
#
# Needs python3 and curl; skipped (77), saying why, without them or
# without libmicrohttpd.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_serve_limits
. "$(dirname "$0")/serve_lib.sh"
need_microhttpd
if ! command -v python3 >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: python3 and curl are needed (apt install python3 curl)"
	exit 77
fi
clients=$srcdir/tests/serve_limits.py

# scenario NAME ARGS...: the script's checks counted as ours
scenario() {
	python3 "$clients" "$@" >"$tmp/out" 2>&1
	while IFS= read -r line; do
		case $line in
		ok:*) pass "${line#ok: }" ;;
		FAIL:*) fail "${line#FAIL: }" ;;
		*) echo "    $line" ;;
		esac
	done <"$tmp/out"
	grep -q '^ok:' "$tmp/out" || fail "$1: the clients ran no check"
}

port_of() {
	echo "${base##*:}"
}

start flood --parallel 2 --idle-timeout 4 --request-timeout 4 || exit 1
scenario idle-and-drip "$(port_of)" 4 4
if grep '/v1/completions 408 .*end=request_timeout' "$tmp/flood.log" >/dev/null; then
	pass "the log names each 408 and why"
else
	fail "no 408 request line in the log"
fi

start cap --parallel 1 --max-client-connections 8 || exit 1
scenario client-cap "$(port_of)" 8

# one slot, each step 20 ms (a test hook), so that the stream lasts;
# --max-connections 26 leaves room for 16 waiting (26 - (1 + 1 + 8))
COLI_SERVE_STEP_DELAY_MS=20
export COLI_SERVE_STEP_DELAY_MS
start crowded --parallel 1 --queue 1 --max-connections 26 || exit 1
unset COLI_SERVE_STEP_DELAY_MS
scenario crowded "$(port_of)" 16

# SIGTERM stops each server cleanly (status 0), and a sanitizer build finds
# nothing in its log (no error, no leak).
stop_servers

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
