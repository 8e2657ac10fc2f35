#!/bin/sh
# test_web.sh - the chat page of `coli serve` in headless Chromium, driven
# by chromedriver (tests/web_check.mjs): a message streams in a reply equal
# to the API's answer, a second turn carries the history; with a template
# whose prompt opens <think>, the reply is reasoning and shown folded.
#
# Needs Debian's chromium and chromium-driver (COLI_CHROMIUM and
# COLI_CHROMEDRIVER name others) and node. Skipped (77), saying why, when
# coli was built without libmicrohttpd or one of them is missing.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_web
. "$(dirname "$0")/serve_lib.sh"
need_microhttpd

chromium=${COLI_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
driver=${COLI_CHROMEDRIVER:-$(command -v chromedriver || true)}
if [ -z "$chromium" ] || [ -z "$driver" ] || ! command -v node >/dev/null 2>&1 ||
	! command -v curl >/dev/null 2>&1; then
	echo "SKIP: chromium, chromedriver, node and curl are needed (apt install chromium chromium-driver)"
	exit 77
fi

# chromedriver on a port of its own choosing, found in its log
"$driver" --port=0 >"$tmp/driver.log" 2>&1 &
pids="$pids $!"
dport=
i=0
while [ $i -lt 100 ] && [ -z "$dport" ]; do
	dport=$(sed -n 's/.*was started successfully on port \([0-9][0-9]*\).*/\1/p' "$tmp/driver.log" 2>/dev/null)
	i=$((i + 1))
	sleep 0.1
done
if [ -z "$dport" ]; then
	fail "chromedriver did not start"
	sed 's/^/    /' "$tmp/driver.log"
	exit 1
fi

page() { # WHAT [ENV=VALUE...]: runs the page check against $base
	what=$1
	shift
	if env COLI_WEB_URL="$base" COLI_DRIVER_URL="http://127.0.0.1:$dport" COLI_CHROMIUM="$chromium" \
		COLI_API_KEY=web-key "$@" node "$srcdir/tests/web_check.mjs" >"$out" 2>&1; then
		sed 's/^/    /' "$out"
		pass "$what"
	else
		sed 's/^/    /' "$out"
		fail "$what"
	fi
}

web="--web-dir $srcdir/tools/serve/web"
# a step every 20 ms, so that the page is seen filling in as tokens come
COLI_SERVE_STEP_DELAY_MS=20
export COLI_SERVE_STEP_DELAY_MS
# shellcheck disable=SC2086 # $web is two words
start page --parallel 2 --ctx-size 256 --api-key web-key $web || exit 1
page "the page streams replies equal to the API's, with the history"

get() { curl -s --path-as-is -o "$out" -w '%{http_code}' "$base$1"; }
code=$(get /)
if [ "$code" = 200 ] && contains "$out" '<script src="chat.js">'; then
	pass "/ is the page, open without a key"
else
	fail "/ gave $code"
fi
code=$(get /v1/)
[ "$code" = 404 ] && pass "/v1/ is no page" || fail "/v1/ gave $code"
code=$(get /index.html/../chat.js)
[ "$code" = 404 ] && pass "only the page's own paths are served" || fail "/index.html/../chat.js gave $code"

# a model that always thinks: its template opens the block
{ cat "$demo/chat_template.jinja"; printf '%s' "{%- if add_generation_prompt %}<think>{% endif -%}"; } >"$tmp/think.jinja"
# shellcheck disable=SC2086
start think --parallel 1 --ctx-size 256 --api-key web-key --chat-template-file "$tmp/think.jinja" $web || exit 1
page "reasoning streams into a folded block" COLI_WEB_REASONING=1

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
