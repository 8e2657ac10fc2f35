#!/bin/sh
# test_load.sh - a bounded load on `coli serve` over loopback with hey: a
# fixed count of requests, more clients than slots, the queue taking the
# rest. Every request answered 200, each with the tokens it asked for (the
# server's counters against the count), nothing left busy or queued, and
# the server stops cleanly (a sanitizer build: nothing in its log). Then a
# soak: SOAK_CLIENTS (64) clients for SOAK_SECONDS (15; by hand 120) with
# more clients than slots and queue: only 200 and 503, every 200
# well-formed, descriptors and RSS flat.
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

# ---- the soak: more clients than slots and queue, for SOAK_SECONDS ----------------------
#
# 64 clients, each sending up to 20 requests a second, against --parallel 8
# (queue 16): every answer is 200 or 503;
# the 200s are well-formed (a checker beside hey reads each of its own
# answers whole; the server's counters give every 200 its tokens); open
# descriptors and RSS of the last seconds are those of the first.

SOAK_SECONDS=${SOAK_SECONDS:-15}
SOAK_CLIENTS=${SOAK_CLIENTS:-64}
window=$((SOAK_SECONDS / 3))
[ "$window" -gt 10 ] && window=10
start soak --parallel 8 --ctx-size 128 || exit 1
soak_pid=${pids##* }
before_req=$(metric coli_requests_total)
before_tok=$(metric coli_generated_tokens_total)
# at most 20 requests a second a client: as many as 8 slots can answer
# 1.5 times over, and under hey's cap of a million results
hey -z "${SOAK_SECONDS}s" -c "$SOAK_CLIENTS" -q 20 -t 60 -m POST -T application/json -d "$body" "$base/v1/completions" \
	>"$tmp/soak_hey" 2>&1 &
hey_pid=$!
# the checker: its own requests, each answer read whole
(
	good=0 busy=0 bad=0
	end=$(($(date +%s) + SOAK_SECONDS - 1))
	while [ "$(date +%s)" -lt "$end" ]; do
		c=$(curl -s -D "$tmp/ck_h" -o "$tmp/ck_b" -w '%{http_code}' -m 60 -H 'Content-Type: application/json' \
			-d "$body" "$base/v1/completions")
		if [ "$c" = 200 ] && [ "$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$tmp/ck_b")" = \
			"$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$out")" ] &&
			grep -q "\"completion_tokens\":$each," "$tmp/ck_b" && grep -q '}}$' "$tmp/ck_b"; then
			good=$((good + 1))
		elif [ "$c" = 503 ] && grep -qi '^Retry-After: 1' "$tmp/ck_h" && grep -q '"unavailable_error"' "$tmp/ck_b"; then
			busy=$((busy + 1))
		else
			bad=$((bad + 1))
			{ echo "status $c:"; cat "$tmp/ck_b"; echo; } >>"$tmp/ck_bad"
		fi
	done
	echo "$good $busy $bad" >"$tmp/ck_counts"
) &
ck_pid=$!
# one sample a second: seconds, descriptors, RSS in KiB
t=0
: >"$tmp/samples"
while [ $t -lt "$SOAK_SECONDS" ]; do
	sleep 1
	t=$((t + 1))
	fds=$(ls "/proc/$soak_pid/fd" 2>/dev/null | wc -l)
	rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$soak_pid/status" 2>/dev/null)
	echo "$t $fds ${rss:-0}" >>"$tmp/samples"
done
wait "$hey_pid" "$ck_pid"
read -r ck_good ck_busy ck_bad <"$tmp/ck_counts"
ok200=$(sed -n 's/^ *\[200\][[:space:]]*\([0-9]*\) responses.*/\1/p' "$tmp/soak_hey")
ok503=$(sed -n 's/^ *\[503\][[:space:]]*\([0-9]*\) responses.*/\1/p' "$tmp/soak_hey")
others=$(sed -n '/Status code distribution/,/^$/p' "$tmp/soak_hey" | grep '^ *\[' | grep -v '^ *\[200\]\|^ *\[503\]')
if [ -n "$ok200" ] && [ -z "$others" ] && ! grep -q "Error distribution" "$tmp/soak_hey"; then
	pass "soak, $SOAK_CLIENTS clients for $SOAK_SECONDS s on 8 slots: only 200 ($ok200) and 503 (${ok503:-0}), no error"
else
	fail "soak: $(sed -n '/Status code distribution/,$p' "$tmp/soak_hey" | head -n 20)"
fi
sed -n 's/^  \(Requests\/sec\|Average\|Slowest\):/    \1:/p' "$tmp/soak_hey"
if [ "${ck_bad:-1}" = 0 ] && [ "${ck_good:-0}" -gt 0 ]; then
	pass "soak: the checker's $ck_good answers of 200 are whole and right, its $ck_busy of 503 in the envelope with Retry-After"
else
	fail "soak: the checker got $ck_bad bad answers: $(head -c 600 "$tmp/ck_bad" 2>/dev/null)"
fi
after_req=$(metric coli_requests_total)
after_tok=$(metric coli_generated_tokens_total)
served=$((${ok200:-0} + ${ck_good:-0}))
if [ "$((after_req - before_req))" = "$served" ] && [ "$((after_tok - before_tok))" = $((served * each)) ]; then
	pass "soak: each of the $served answers of 200 got its $each tokens"
else
	fail "soak counters: requests $before_req -> $after_req, tokens $before_tok -> $after_tok for $served answers"
fi
awk -v w="$window" -v n="$SOAK_SECONDS" '
	$1 <= w { if ($2 > f0) f0 = $2; if ($3 > r0) r0 = $3 }
	$1 > n - w { if ($2 > f1) f1 = $2; if ($3 > r1) r1 = $3 }
	END { printf "%d %d %d %d\n", f0, f1, r0, r1 }' "$tmp/samples" >"$tmp/flat"
read -r fd_first fd_last rss_first rss_last <"$tmp/flat"
echo "    descriptors: $fd_first in the first $window s, $fd_last in the last; RSS $((rss_first / 1024)) MiB, then $((rss_last / 1024)) MiB"
if [ "$fd_last" -le $((fd_first + 4)) ] && [ "$fd_first" -gt 0 ]; then
	pass "soak: open descriptors flat ($fd_first, then $fd_last)"
else
	fail "soak: descriptors grew from $fd_first to $fd_last"
fi
if grep -q '^SAN_CFLAGS = .*-fsanitize' "$builddir/Makefile" 2>/dev/null; then
	echo "note: RSS is not compared in a sanitizer build (its allocator holds freed memory back)"
elif [ "$rss_first" -gt 0 ] && [ "$rss_last" -le $((rss_first + rss_first / 20 + 4096)) ]; then
	pass "soak: RSS flat ($((rss_first / 1024)) MiB, then $((rss_last / 1024)) MiB)"
else
	fail "soak: RSS grew from $rss_first KiB to $rss_last KiB"
fi

for pid in "$server_pid" "$soak_pid"; do
	kill -TERM "$pid"
	wait "$pid"
	status=$?
	[ "$status" = 0 ] || fail "exit status $status after SIGTERM"
done
pids=
if [ "$status" = 0 ] && ! grep -E "AddressSanitizer|LeakSanitizer|runtime error|ThreadSanitizer" "$tmp/load.log" \
	"$tmp/soak.log" >/dev/null; then
	pass "the servers stop cleanly after the load, with nothing in their logs"
else
	fail "after SIGTERM: status $status"
	grep -hv "^coli serve: [A-Z]* /" "$tmp/load.log" "$tmp/soak.log" | head -n 40 | sed 's/^/    /'
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
