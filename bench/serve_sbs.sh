#!/bin/sh
# serve_sbs.sh - coli serve and llama.cpp's llama-server side by side on
# the same weights and threads, under the same load (bench/load.mjs: C
# clients, R streamed greedy completions each, N tokens), rounds
# alternated in one run; then the time to first token of a long prompt
# against `coli bench`'s prefill of as many tokens.
#
# usage: bench/serve_sbs.sh COLI MODEL_DIR LLAMA_SERVER GGUF [ROUNDS]
#   COLI          the coli binary (built with libmicrohttpd)
#   MODEL_DIR     the checkpoint coli serves (with a tokenizer)
#   LLAMA_SERVER  llama.cpp's llama-server binary
#   GGUF          the same weights for it (e.g. Q4_0 of MODEL_DIR: sbs.sh makes one)
# env: THREADS (2), PARALLEL (8), CLIENTS (8), REQUESTS (4), TOKENS (64),
#      WEIGHTS (q4), CTX (640 per slot), PROMPT_WORDS (the long prompt, 200),
#      LLAMA_PORT (llama-server's, 18090; coli serve takes a free one)
set -eu
coli=$1 model=$2 llama=$3 gguf=$4 rounds=${5:-3}
T=${THREADS:-2} P=${PARALLEL:-8} C=${CLIENTS:-8} R=${REQUESTS:-4} N=${TOKENS:-64}
W=${WEIGHTS:-q4} CTX=${CTX:-640} WORDS=${PROMPT_WORDS:-200} LP=${LLAMA_PORT:-18090}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/serve_sbs.XXXXXX")
cleanup() { kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
pids=
trap cleanup EXIT

wait_health() { # URL
	i=0
	until [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "serve_sbs: $1 did not become healthy" >&2; exit 1; }
		sleep 0.2
	done
}

"$coli" serve --model "$model" --weights "$W" --threads "$T" --parallel "$P" --ctx-size "$CTX" \
	--port 0 >"$tmp/coli.log" 2>&1 &
pids="$pids $!"
"$llama" -m "$gguf" -t "$T" --parallel "$P" -c $((P * CTX)) --host 127.0.0.1 --port "$LP" \
	>"$tmp/llama.log" 2>&1 &
pids="$pids $!"
i=0
until cport=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$tmp/coli.log") && [ -n "$cport" ]; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$tmp/coli.log" >&2; exit 1; }; sleep 0.1
done
lport=$LP
wait_health "http://127.0.0.1:$cport"
wait_health "http://127.0.0.1:$lport"
echo "coli serve on $cport, llama-server on $lport: $C clients x $R requests x $N tokens, $T threads, --parallel $P"

# warm-up: one request each
node "$here/load.mjs" "http://127.0.0.1:$cport/v1" 1 1 8 >/dev/null
node "$here/load.mjs" "http://127.0.0.1:$lport/v1" 1 1 8 >/dev/null
for r in $(seq 1 "$rounds"); do
	printf 'llama ' >>"$tmp/rounds"; node "$here/load.mjs" "http://127.0.0.1:$lport/v1" "$C" "$R" "$N" | tee -a "$tmp/rounds"
	printf 'coli  ' >>"$tmp/rounds"; node "$here/load.mjs" "http://127.0.0.1:$cport/v1" "$C" "$R" "$N" | tee -a "$tmp/rounds"
done
/usr/bin/python3 - "$tmp/rounds" <<'PY'
import json, statistics as st, sys
by = {"llama": [], "coli": []}
for line in open(sys.argv[1]):
    eng, j = line.split(" ", 1)
    by[eng.strip()].append(json.loads(j)["tok_s"])
ratios = [c / l for c, l in zip(by["coli"], by["llama"])]
print("aggregate tok/s: coli", by["coli"], "llama-server", by["llama"])
print("coli/llama-server per round", [round(x, 2) for x in ratios], "median %.2f" % st.median(ratios))
PY

# time to first token of a long prompt (one request, max_tokens 1) against
# coli bench's prefill of as many tokens
prompt=$(awk -v n="$WORDS" 'BEGIN { for (i = 0; i < n; i++) printf "%s ", (i % 2 ? "light" : "the"); }')
for i in 1 2 3; do
	# a first word of its own: no slot's cache holds a prefix of it
	body="{\"prompt\":\"$i $prompt\",\"max_tokens\":1,\"temperature\":0}"
	curl -s -o "$tmp/ttft.json" -w '%{time_total}\n' -H 'Content-Type: application/json' -d "$body" \
		"http://127.0.0.1:$cport/v1/completions" >>"$tmp/ttft"
done
ptoks=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$tmp/ttft.json")
[ -n "$ptoks" ] || { echo "serve_sbs: the long prompt failed: $(cat "$tmp/ttft.json")" >&2; exit 1; }
kill $pids 2>/dev/null; wait 2>/dev/null; pids=
"$coli" bench --model "$model" --weights "$W" --threads "$T" --prompt-tokens "$ptoks" --gen-tokens 0 \
	--repetitions 3 --no-probe --format json >"$tmp/bench.json" 2>/dev/null
/usr/bin/python3 - "$tmp/ttft" "$tmp/bench.json" "$ptoks" <<'PY'
import json, sys
ttft = min(float(x) for x in open(sys.argv[1]))
pp = json.load(open(sys.argv[2]))["prefill_tok_s"]
n = int(sys.argv[3])
print("first token of a %d-token prompt through coli serve: %.3f s (best of 3, no cached prefix);"
      " coli bench prefill of as many: %.3f s (%.1f tok/s); ratio %.2f" % (n, ttft, n / pp, pp, ttft / (n / pp)))
PY
