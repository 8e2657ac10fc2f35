#!/bin/sh
# test_serve.sh - `coli serve` end to end with curl on the demo model:
# every endpoint, streaming, errors, API keys, parallel slots, a client
# that goes away, and a full queue. Skipped (77) only when coli was built
# without libmicrohttpd, or curl is missing.
#
# Run by `make check` from the build directory, like test_cli.sh. Each
# server listens on a port of its own choosing (--port 0), so that runs in
# parallel do not collide.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_serve

if ! grep '^#define COLI_HAVE_MICROHTTPD 1' "$builddir/config.h" >/dev/null 2>&1; then
	echo "SKIP: coli was built without libmicrohttpd (configure --with-microhttpd)"
	if run 1 "serve without libmicrohttpd" "$COLI" serve --model "$demo" &&
		contains "$err" "built without libmicrohttpd"; then
		echo "ok: coli serve says it was built without libmicrohttpd"
	fi
	exit 77
fi
if ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: curl is not installed"
	exit 77
fi
. "$(dirname "$0")/serve_lib.sh" # start, and every server stopped on exit

# post PATH BODY [CURL OPTIONS...]: the response in $out, its status in $code;
# every response is also kept in $tmp/replies, to look for server paths.
post() {
	path=$1
	body=$2
	shift 2
	code=$(curl -s -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
		--data-binary "$body" "$base$path")
	cat "$out" >>"$tmp/replies"
}

get() {
	path=$1
	shift
	code=$(curl -s -o "$out" -w '%{http_code}' "$@" "$base$path")
	cat "$out" >>"$tmp/replies"
}

# The JSON string member $2 of file $1 as written (escapes kept), every
# occurrence concatenated (one a line for the events of a stream).
json_str() {
	sed -n "s/.*\"$2\":\"\\(\\([^\"\\\\]\\|\\\\.\\)*\\)\".*/\\1/p" "$1" | tr -d '\n'
}

json_int() {
	sed -n "s/.*\"$2\":\\([0-9][0-9]*\\).*/\\1/p" "$1" | head -n 1
}

# check WHAT CONDITION...: pass or fail with the response shown.
check() {
	what=$1
	shift
	if "$@"; then
		pass "$what"
	else
		fail "$what: status $code: $(head -c 600 "$out")"
	fi
}

metric() {
	curl -s "$base/metrics" | sed -n "s/^$1 \\([0-9.e+-]*\\)$/\\1/p"
}

start main --parallel 4 --ctx-size 160 || exit 1
main=$base

# ---- the model, health, models -------------------------------------------------

get /health
check "/health is 200 ok" [ "$code" = 200 ]
get /v1/models
check "/v1/models lists the model" eval '[ "$code" = 200 ] && contains "$out" "\"object\":\"list\"" && contains "$out" "\"id\":\"demo\""'
get /models
check "/models without /v1" [ "$code" = 200 ]

# ---- completions --------------------------------------------------------------

prompt="In the beginning God"
"$COLI" generate --model "$demo" --prompt "$prompt" --max-tokens 20 --temperature 0 --format json \
	>"$tmp/gen.json" 2>/dev/null
expect=$(json_str "$tmp/gen.json" text)
check "coli generate gives the expectation" [ -n "$expect" ]

post /v1/completions "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0}"
blocking=$(json_str "$out" text)
check "a blocking completion equals coli generate" [ "$code" = 200 -a "$blocking" = "$expect" ]
check "max_tokens ends with finish_reason length" contains "$out" '"finish_reason":"length"'
check "usage counts the tokens" eval '[ "$(json_int "$out" completion_tokens)" = 20 ] && [ "$(json_int "$out" total_tokens)" = $(( $(json_int "$out" prompt_tokens) + 20 )) ]'
check "the object is text_completion" contains "$out" '"object":"text_completion"'

post /completions "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0}"
check "the same prompt again reuses the slot's cache" eval '[ "$(json_int "$out" cached_tokens)" -gt 0 ] && [ "$(json_str "$out" text)" = "$expect" ]'

post /v1/completions "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
streamed=$(grep '^data: {' "$out" | grep -v '"choices":\[\]' | json_str /dev/stdin text)
check "a stream concatenated equals the blocking text" [ "$code" = 200 -a "$streamed" = "$expect" ]
check "a stream ends with data: [DONE]" [ "$(grep -v '^$' "$out" | tail -n 1)" = "data: [DONE]" ]
check "include_usage adds a chunk without choices" eval 'grep "^data: {.*\"choices\":\[\],\"usage\":{\"prompt_tokens\":[0-9]*,\"completion_tokens\":20," "$out" >/dev/null'
check "the stream's last choice says length" contains "$out" '"finish_reason":"length"'

# a stop string from the middle of the text
stop=$(printf '%s' "$expect" | cut -c 9-12)
post /v1/completions "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0,\"stop\":[\"zzzz\",\"$stop\"]}"
cut=$(json_str "$out" text)
check "a stop string ends the text before it" eval 'contains "$out" "\"finish_reason\":\"stop\"" && [ "$cut$stop${expect#"$cut$stop"}" = "$expect" ] && [ ${#cut} -lt 12 ]'
post /v1/completions "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0,\"stop\":\"$stop\",\"stream\":true}"
check "a stop string in a stream" eval '[ "$(grep "^data: {" "$out" | json_str /dev/stdin text)" = "$cut" ]'

post /v1/completions "{\"prompt\":\"$prompt\",\"max_tokens\":3,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":2}"
check "logprobs in OpenAI's shape" eval 'contains "$out" "\"logprobs\":{\"content\":[{\"token\":" && contains "$out" "\"top_logprobs\":[{"'

# ---- errors ---------------------------------------------------------------------

post /v1/completions '{"prompt": "x", '
check "bad JSON is 400" eval '[ "$code" = 400 ] && contains "$out" "\"error\":{\"message\":" && contains "$out" "invalid_request_error"'
post /v1/completions '{"prompt":"x","temperature":3}'
check "a field out of range is 400 naming it" eval '[ "$code" = 400 ] && contains "$out" "\"param\":\"temperature\""'
post /v1/completions '{"prompt":"x","top_logprobs":30,"logprobs":true}'
check "top_logprobs beyond 20 is 400" eval '[ "$code" = 400 ] && contains "$out" "\"param\":\"top_logprobs\""'
post /v1/completions '{"prompt":"x","max_tokens":"many"}'
check "a field of the wrong type is 400" eval '[ "$code" = 400 ] && contains "$out" "\"param\":\"max_tokens\""'
post /v1/completions '{"prompt":"x","max_tokens":null,"temperature":null,"unknown_field":{"a":1}}'
check "null fields and unknown fields are accepted" [ "$code" = 200 ]
post /v1/completions '{"max_tokens":3}'
check "a missing prompt is 400" eval '[ "$code" = 400 ] && contains "$out" "\"param\":\"prompt\""'
long=$(awk 'BEGIN { for (i = 0; i < 400; i++) printf "word "; }')
post /v1/completions "{\"prompt\":\"$long\"}"
check "a prompt longer than the slot's context is 400" eval '[ "$code" = 400 ] && contains "$out" "exceed_context_size_error"'
get /v1/nothing
check "an unknown path is 404" eval '[ "$code" = 404 ] && contains "$out" "not_found_error"'
get /v1/completions -D "$tmp/headers"
check "a wrong method is 405" eval '[ "$code" = 405 ] && contains "$out" "\"error\""'
check "a 405 names the method allowed (Allow: POST)" grep -qi '^Allow: POST' "$tmp/headers"
code=$(curl -s -o "$out" -D "$tmp/headers" -w '%{http_code}' -X DELETE "$base/v1/models")
check "a 405 on a GET path allows GET and HEAD" eval '[ "$code" = 405 ] && grep -i "^Allow: GET, HEAD" "$tmp/headers" >/dev/null'
post /v1/chat/completions '{"messages":[{"role":"user","content":"In the beginning God"}],"max_tokens":20,"temperature":0}'
check "chat through the demo's template (one text) continues it as the completion does" eval '[ "$code" = 200 ] && [ "$(json_str "$out" content)" = "$expect" ]'
post /apply-template '{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}'
check "/apply-template renders the messages, developer as system and parts joined" eval '[ "$code" = 200 ] && [ "$(json_str "$out" prompt)" = "Be brief.\\nHi" ]'
post /v1/chat/completions '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
check "a content part other than text is 400" eval '[ "$code" = 400 ] && contains "$out" "unsupported content"'
post /v1/chat/completions '{"messages":[{"role":"wizard","content":"x"}]}'
check "an unknown role is 400" eval '[ "$code" = 400 ] && contains "$out" "messages[0]"'
# a model without a chat template: the demo's files but that one
mkdir "$tmp/bare"
for f in "$demo"/*; do
	[ "${f##*/}" = chat_template.jinja ] || ln -s "$(cd "$(dirname "$f")" && pwd)/${f##*/}" "$tmp/bare/"
done
demo_saved=$demo
demo=$tmp/bare
start bare --parallel 1 --ctx-size 64 || exit 1
demo=$demo_saved
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}]}'
check "chat without a template is 400 and says so" eval '[ "$code" = 400 ] && contains "$out" "the model has no chat template; pass --chat-template-file"'
post /apply-template '{"messages":[{"role":"user","content":"Hi"}]}'
check "/apply-template without a template is 400" eval '[ "$code" = 400 ] && contains "$out" "chat template"'
base=$main
awk 'BEGIN { printf "{\"prompt\":\""; for (i = 0; i < 20000; i++) printf "x"; printf "\"}"; }' >"$tmp/big.json"
code=$(curl -s -o "$out" -w '%{http_code}' --data-binary @"$tmp/big.json" "$base/v1/completions")
check "a small body passes the default cap (400 for its length, not 413)" [ "$code" = 400 ]

# ---- tokenize, detokenize, metrics ----------------------------------------------------

post /tokenize '{"content":"In the beginning God created"}'
tokens=$(sed -n 's/.*"tokens":\(\[[0-9,]*\]\).*/\1/p' "$out")
check "/tokenize gives ids" eval '[ "$code" = 200 ] && [ -n "$tokens" ]'
post /detokenize "{\"tokens\":$tokens}"
check "/detokenize gives the text back" eval '[ "$code" = 200 ] && [ "$(json_str "$out" content)" = "In the beginning God created" ]'
post /detokenize '{"tokens":[-1]}'
check "/detokenize refuses a bad id" [ "$code" = 400 ]
post /detokenize '{"tokens":[5,99999999]}'
check "/detokenize names the id out of the vocabulary, and its range" eval '[ "$code" = 400 ] && contains "$out" "tokens[1] is not a token id (0 to "'

curl -s "$base/metrics" >"$out"
ok=1
for m in coli_queue_depth coli_slots_busy coli_kv_positions_used coli_kv_positions_total coli_requests_total \
	coli_prompt_tokens_total coli_generated_tokens_total coli_time_to_first_token_seconds_sum \
	coli_time_to_first_token_seconds_count coli_generation_tokens_per_second; do
	grep "^$m [0-9]" "$out" >/dev/null || ok=0
done
check "/metrics has every metric" [ $ok = 1 ]

# ---- parallel slots ------------------------------------------------------------------

for i in 1 2 3 4; do
	curl -s -H 'Content-Type: application/json' \
		--data-binary "{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0,\"stream\":true}" \
		"$base/v1/completions" >"$tmp/par$i" &
done
wait_ok=1
wait_for() {
	n=0
	while [ $n -lt 200 ]; do
		all=1
		for i in 1 2 3 4; do
			grep '^data: \[DONE\]' "$tmp/par$i" >/dev/null 2>&1 || all=0
		done
		[ $all = 1 ] && return 0
		n=$((n + 1))
		sleep 0.1
	done
	return 1
}
wait_for || wait_ok=0
same=1
for i in 1 2 3 4; do
	[ "$(grep '^data: {' "$tmp/par$i" | json_str /dev/stdin text)" = "$expect" ] || same=0
done
check "4 parallel streams all complete with the text of one alone" [ $wait_ok = 1 -a $same = 1 ]

# ---- API keys ---------------------------------------------------------------------------

printf '# keys\n\n  other-key  \n' >"$tmp/keys"
start keyed --parallel 1 --ctx-size 64 --api-key secret-key --api-key-file "$tmp/keys" || exit 1
get /v1/models
check "no key is 401" eval '[ "$code" = 401 ] && contains "$out" "authentication_error"'
get /v1/models -H 'Authorization: Bearer wrong'
check "a wrong key is 401" [ "$code" = 401 ]
get /v1/models -H 'Authorization: Bearer secret-key'
check "Authorization: Bearer KEY is 200" [ "$code" = 200 ]
get /v1/models -H 'X-Api-Key: other-key'
check "X-Api-Key with a key from the file is 200" [ "$code" = 200 ]
get /health
check "/health needs no key" [ "$code" = 200 ]

# ---- a client that goes away; a full queue --------------------------------------------

# each step of this server's model pauses 10 ms (a test hook): 400 tokens
# take 4 s
COLI_SERVE_STEP_DELAY_MS=10
export COLI_SERVE_STEP_DELAY_MS
start slow --parallel 1 --queue 1 --ctx-size 512 --max-body 4096 || exit 1
unset COLI_SERVE_STEP_DELAY_MS
awk 'BEGIN { printf "{\"prompt\":\""; for (i = 0; i < 5000; i++) printf "x"; printf "\"}"; }' >"$tmp/big.json"
code=$(curl -s -o "$out" -w '%{http_code}' --data-binary @"$tmp/big.json" "$base/v1/completions")
check "a body over --max-body is 413" eval '[ "$code" = 413 ] && contains "$out" "max-body"'

long_req="{\"prompt\":\"$prompt\",\"max_tokens\":400,\"temperature\":0,\"stream\":true}"
curl -s -m 1 -H 'Content-Type: application/json' --data-binary "$long_req" "$base/v1/completions" \
	>"$tmp/gone" 2>/dev/null
busy=1
n=0
while [ $n -lt 40 ]; do
	busy=$(metric coli_slots_busy)
	[ "$busy" = 0 ] && break
	n=$((n + 1))
	sleep 0.1
done
gen=$(metric coli_generated_tokens_total)
check "a client that disconnects mid-stream frees its slot" eval '[ "$busy" = 0 ] && [ "$gen" -lt 400 ] && grep "^data: {" "$tmp/gone" >/dev/null'

for i in 1 2; do
	curl -s -H 'Content-Type: application/json' --data-binary "$long_req" "$base/v1/completions" \
		-o "$tmp/q$i" &
	qpids="${qpids:-} $!"
	sleep 0.3
done
code=$(curl -s -D "$tmp/headers" -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "$long_req" "$base/v1/completions")
check "a full queue is 503 with Retry-After" eval '[ "$code" = 503 ] && grep -i "^Retry-After: 1" "$tmp/headers" >/dev/null && contains "$out" "unavailable_error"'
for p in $qpids; do
	kill "$p" 2>/dev/null
done
n=0
while [ $n -lt 60 ] && [ "$(metric coli_slots_busy)" != 0 ]; do
	n=$((n + 1))
	sleep 0.1
done
check "the slot is free again once the queued clients went away" [ "$(metric coli_slots_busy)" = 0 ]

# ---- keys from each source; an empty one is refused --------------------------------------

run 2 "--api-key '' is refused" "$COLI" serve --model "$demo" --port 0 --api-key ''
check "--api-key '' is refused at start, saying why" contains "$err" "--api-key: the API key is empty"
run 2 "a key with a blank is refused" "$COLI" serve --model "$demo" --port 0 --api-key 'two words'
check "a key with a blank is refused at start" contains "$err" "has a blank or a control character"
printf '# only a comment\n   \n\n' >"$tmp/nokeys"
run 1 "a key file of blank lines is refused" "$COLI" serve --model "$demo" --port 0 --api-key-file "$tmp/nokeys"
check "a key file without a key is refused at start" contains "$err" "no API key in the file"
run 2 "COLI_API_KEY='' is refused" env COLI_API_KEY= "$COLI" serve --model "$demo" --port 0
check "COLI_API_KEY set but empty is refused at start" contains "$err" "COLI_API_KEY is set but empty"
run 2 "COLI_API_KEY='' is refused beside --api-key" env COLI_API_KEY= "$COLI" serve --model "$demo" --port 0 \
	--api-key k
check "... also when an option gives a key" contains "$err" "COLI_API_KEY is set but empty"
COLI_API_KEY=env-key
export COLI_API_KEY
start envkey --parallel 1 --ctx-size 64 || exit 1
unset COLI_API_KEY
get /v1/models
check "COLI_API_KEY: no key is 401" [ "$code" = 401 ]
get /v1/models -H 'Authorization: Bearer env-key'
check "COLI_API_KEY: its key is 200" [ "$code" = 200 ]
check "the key is not on the server's command line" eval '! tr "\0" " " </proc/${pids##* }/cmdline | grep env-key >/dev/null'
COLI_API_KEY=env-key
export COLI_API_KEY
start optkey --parallel 1 --ctx-size 64 --api-key opt-key || exit 1
unset COLI_API_KEY
get /v1/models -H 'Authorization: Bearer env-key'
check "--api-key wins over COLI_API_KEY" [ "$code" = 401 ]
base=$main

# ---- a stop: streams in flight finish, or end with server_shutdown and [DONE] ---------------

# each step 10 ms (a test hook): the long stream (400 tokens) outlives the
# 1 s the stop gives, the short one (20) does not
COLI_SERVE_STEP_DELAY_MS=10
export COLI_SERVE_STEP_DELAY_MS
start stopper --parallel 3 --ctx-size 512 --stop-timeout 1 || exit 1
unset COLI_SERVE_STEP_DELAY_MS
stopper=${pids##* }
curl -sN -H 'Content-Type: application/json' --data-binary \
	"{\"prompt\":\"$prompt\",\"max_tokens\":400,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
	"$base/v1/completions" >"$tmp/stop_long" &
long_pid=$!
curl -sN -H 'Content-Type: application/json' --data-binary \
	"{\"prompt\":\"$prompt\",\"max_tokens\":20,\"temperature\":0,\"stream\":true}" \
	"$base/v1/completions" >"$tmp/stop_short" &
short_pid=$!
curl -s -o "$tmp/stop_whole" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
	"{\"prompt\":\"$prompt\",\"max_tokens\":400,\"temperature\":0}" "$base/v1/completions" >"$tmp/stop_code" &
whole_pid=$!
n=0
while [ $n -lt 50 ] && [ "$(metric coli_slots_busy)" != 3 ]; do
	n=$((n + 1))
	sleep 0.02
done
kill -TERM "$stopper"
sleep 0.2
code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$base/health")
check "after SIGTERM no new connection is taken" [ "$code" = 000 ]
wait "$long_pid" "$short_pid" "$whole_pid"
wait "$stopper"
status=$?
check "the server exits 0 after its stop" [ "$status" = 0 ]
check "a stream that finishes within --stop-timeout ends as usual" eval '[ "$(grep -v "^$" "$tmp/stop_short" | tail -n 1)" = "data: [DONE]" ] && contains "$tmp/stop_short" "\"finish_reason\":\"length\""'
check "a stream still open at the deadline ends with finish_reason server_shutdown" \
	contains "$tmp/stop_long" '"finish_reason":"server_shutdown"'
check "... then its usage, then data: [DONE]" eval '[ "$(grep -v "^$" "$tmp/stop_long" | tail -n 1)" = "data: [DONE]" ] && grep "\"choices\":\[\],\"usage\"" "$tmp/stop_long" >/dev/null'
got=$(grep '^data: {' "$tmp/stop_long" | json_str /dev/stdin text)
check "... having given the text so far: a prefix of the whole answer" eval '[ ${#got} -gt 0 ] && [ "${expect#"$got"}" != "$expect" -o "${got#"$expect"}" != "$got" ]'
check "a blocking request cut at the deadline is 503 saying the server stopped" eval '[ "$(cat "$tmp/stop_code")" = 503 ] && contains "$tmp/stop_whole" "the server stopped before the request was done"'
check "the log names the requests cut, and why" eval '[ "$(grep -c "POST /v1/completions [0-9]* .*end=server_shutdown id=cmpl-" "$tmp/stopper.log")" = 2 ] && contains "$tmp/stopper.log" "2 requests were cut at the --stop-timeout deadline"'
check "the log does not blame the client for them" eval '! grep "client_gone\|client went away" "$tmp/stopper.log" >/dev/null'
servers=$(echo "$servers" | sed "s/ stopper:$stopper//")

# ---- JSON logs: one object a line, libmicrohttpd's messages too ------------------------------

start jsonlog --parallel 1 --ctx-size 64 --format json || exit 1
jpid=${pids##* }
post /v1/completions '{"prompt":"In the beginning","max_tokens":3}'
get /v1/nothing
# a request libmicrohttpd itself refuses (it says so in its own message)
curl -s -o /dev/null -H 'Content-Length: abc' "$base/health"
kill -TERM "$jpid"
wait "$jpid"
servers=$(echo "$servers" | sed "s/ jsonlog:$jpid//")
if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/jsonlog.log" >"$tmp/jsoncheck" 2>&1 <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
objs = [json.loads(l) for l in lines]  # raises on a line that is not JSON
assert all(isinstance(o, dict) and "time" in o and "level" in o for o in objs), "time and level"
reqs = [o for o in objs if o.get("event") == "request"]
need = {"client", "method", "path", "status", "duration_ms", "end"}
assert all(need <= set(o) for o in reqs), reqs
gen = [o for o in reqs if o["path"] == "/v1/completions"]
assert gen and gen[0]["status"] == 200 and gen[0]["completion_tokens"] == 3 and gen[0]["end"] == "length", gen
assert gen[0]["id"].startswith("cmpl-") and gen[0]["client"] == "127.0.0.1"
assert any(o["path"] == "/v1/nothing" and o["status"] == 404 for o in reqs)
assert any(o.get("msg", "").startswith("libmicrohttpd: ") for o in objs), "no libmicrohttpd message"
assert any(o.get("msg", "").startswith("listening on http://") for o in objs)
print(len(objs), "lines")
PY
	jstatus=$?
	check "--format json: every line of the log is a JSON object, libmicrohttpd's and each request's with its fields" \
		eval '[ $jstatus = 0 ] && contains "$tmp/jsoncheck" " lines"'
	[ -s "$tmp/jsoncheck" ] && sed 's/^/    /' "$tmp/jsoncheck"
else
	echo "note: no python3: the JSON log lines were not parsed"
fi

# ---- no server path or internal name in any reply -------------------------------------------

abs_demo=$(cd "$demo" && pwd)
abs_build=$(cd "$builddir" && pwd)
leak=
for w in "$abs_demo" "$abs_build" tokenizer.json .safetensors coli__ COLI_; do
	contains "$tmp/replies" "$w" && leak="$leak $w"
done
check "no reply names a server path or an internal name ($(wc -c <"$tmp/replies") bytes of replies)" [ -z "$leak" ]

# ---- the log --------------------------------------------------------------------------

check "requests are logged on standard error" eval 'grep "coli serve: POST /v1/completions 200" "$tmp/main.log" >/dev/null'

# ---- shutdown --------------------------------------------------------------------------

# SIGTERM stops each server cleanly (status 0), and a sanitizer build finds
# nothing in its log (no error, no leak).
stop_servers

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
