#!/bin/sh
# test_load.sh - a bounded load on `coli serve` over loopback with hey: a
# fixed count of requests, more clients than slots, the queue taking the
# rest. Every request answered 200, each with the tokens it asked for (the
# server's counters against the count), nothing left busy or queued, and
# the server stops cleanly (a sanitizer build: nothing in its log).
#
# Needs hey (Debian's hey) and curl; skipped (77), saying why, without them
# or without libmicrohttpd.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_load
. "$(dirname "$0")/serve_lib.sh"
need_microhttpd
if ! command -v hey >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: hey and curl are needed (apt install hey curl)"
	exit 77
fi

metric() {
	curl -s "$base/metrics" | sed -n "s/^$1 \\([0-9.e+-]*\\)$/\\1/p"
}

REQUESTS=240
CLIENTS=24
start load --parallel 4 --queue 64 --ctx-size 128 || exit 1
server_pid=${pids##* }
body='{"prompt":"In the beginning God created","max_tokens":12,"temperature":0}'

# one request alone: its length is what each of the load's must get
curl -s -o "$out" -H 'Content-Type: application/json' -d "$body" "$base/v1/completions"
each=$(sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p' "$out")
before_req=$(metric coli_requests_total)
before_tok=$(metric coli_generated_tokens_total)

hey -n $REQUESTS -c $CLIENTS -t 60 -m POST -T application/json -d "$body" "$base/v1/completions" >"$tmp/hey" 2>&1
if grep -q "\[200\][[:space:]]*$REQUESTS responses" "$tmp/hey" && ! grep -q "Error distribution" "$tmp/hey"; then
	pass "$REQUESTS requests from $CLIENTS clients on 4 slots: all 200"
else
	fail "the load: $(sed -n '/Status code distribution/,$p' "$tmp/hey")"
fi
sed -n 's/^  \(Requests\/sec\|Average\|Slowest\):/    \1:/p' "$tmp/hey"

after_req=$(metric coli_requests_total)
after_tok=$(metric coli_generated_tokens_total)
if [ -n "$each" ] && [ "$((after_req - before_req))" = $REQUESTS ] &&
	[ "$((after_tok - before_tok))" = $((REQUESTS * each)) ]; then
	pass "nothing lost: $REQUESTS requests of $each tokens each were generated"
else
	fail "counters: requests $before_req -> $after_req, tokens $before_tok -> $after_tok, $each a request"
fi
if [ "$(metric coli_slots_busy)" = 0 ] && [ "$(metric coli_queue_depth)" = 0 ]; then
	pass "afterwards no slot is busy and the queue is empty"
else
	fail "afterwards: $(metric coli_slots_busy) busy, $(metric coli_queue_depth) queued"
fi

# the same answer as before the load: batching and queueing changed nothing
curl -s -o "$tmp/again" -H 'Content-Type: application/json' -d "$body" "$base/v1/completions"
if [ "$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$tmp/again")" = "$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$out")" ]; then
	pass "the answer after the load is the answer before it"
else
	fail "the answer changed: $(cat "$out") / $(cat "$tmp/again")"
fi

kill -TERM "$server_pid"
wait "$server_pid"
status=$?
pids=
if [ "$status" = 0 ] && ! grep -E "AddressSanitizer|LeakSanitizer|runtime error|ThreadSanitizer" "$tmp/load.log" >/dev/null; then
	pass "the server stops cleanly after the load, with nothing in its log"
else
	fail "exit status $status after SIGTERM"
	grep -v "^coli serve: [A-Z]* /" "$tmp/load.log" | head -n 40 | sed 's/^/    /'
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
