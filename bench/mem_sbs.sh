#!/bin/bash
# Decode speed under a memory limit, side by side with llama.cpp on the same
# weights (docs/performance.md, "Models larger than memory").
#
# Both run in one cgroup v1 memory group whose limit is a fraction of the
# model's size, with the page cache dropped before each run: llama.cpp maps
# its GGUF and leaves paging to the kernel; coli streams a converted model
# through a RAM budget a little under the limit (--ram-gb), reading experts
# with O_DIRECT. Runs are interleaved, llama.cpp first in each round.
#
# usage: mem_sbs.sh LLAMA_BUILD COLI HF_DIR CONVERTED_DIR [ROUNDS]
#   LLAMA_BUILD    a llama.cpp build directory with bin/llama-bench and bin/llama-quantize
#   COLI           the coli binary (LD_LIBRARY_PATH set as it needs)
#   HF_DIR         the Qwen3-MoE checkpoint (tools/make-synthetic)
#   CONVERTED_DIR  `coli convert --weights q4` of it
# env: FRACTIONS ("0.25 0.5"), THREADS (2), TG (32), GGUF_PY (gguf-py of the llama.cpp source),
#      QUANT (Q4_0), SLACK_MB (48: what coli keeps out of --ram-gb for its KV cache and code)
# Needs root (cgroups, drop_caches). Prints one line per run and the ratio per fraction.
set -eu
build=$1 coli=$2 hf=$3 conv=$4 rounds=${5:-3}
T=${THREADS:-2} TG=${TG:-32} Q=${QUANT:-Q4_0} SLACK=${SLACK_MB:-48}
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS:-$here/../../shared/peers}
cg=/sys/fs/cgroup/memory/colibri-mem-sbs
[ -w /sys/fs/cgroup/memory ] || { echo "mem_sbs: needs the cgroup v1 memory controller, writable (root)" >&2; exit 1; }
cache=${COLI_PEERS_CACHE:-$HOME/.cache/colibri-peers}
key=$(cd "$hf" && cat config.json && ls -l --time-style=+%s model.safetensors* 2>/dev/null) || true
key=$(echo "$key" | sha1sum | cut -c1-12)
g=$cache/gguf-$key; mkdir -p "$g"
if [ ! -f "$g/F16.gguf" ]; then
  /usr/bin/python3 "$peers/hf2gguf.py" --gguf-py "${GGUF_PY:?set GGUF_PY to llama.cpp/gguf-py}" "$hf" "$g/F16.gguf.tmp" >&2
  mv "$g/F16.gguf.tmp" "$g/F16.gguf"
fi
[ -f "$g/$Q.gguf" ] || "$build/bin/llama-quantize" "$g/F16.gguf" "$g/$Q.gguf" "$Q" > "$g/$Q.log" 2>&1
size=$(stat -c %s "$conv/model.coli")
echo "model: coli $(numfmt --to=iec "$size") ($conv/model.coli), llama.cpp $(numfmt --to=iec "$(stat -c %s "$g/$Q.gguf")") ($Q)"
mkdir -p "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
out=$(mktemp)
# run LIMIT CMD...: in the group, caches dropped first; prints its stdout
run_in() {
  local limit=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches
  echo "$limit" > "$cg/memory.limit_in_bytes"
  echo 0 > "$cg/memory.max_usage_in_bytes" 2>/dev/null || true
  sh -c 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"' "$cg" sh "$@"
}
for r in $(seq 1 "$rounds"); do
  for f in ${FRACTIONS:-0.25 0.5}; do
    limit=$(python3 -c "print(int($size * $f))")
    ram=$(python3 -c "print(max(0.001, ($limit / 1048576 - $SLACK) / 1024))")
    l=$(run_in "$limit" timeout 900 "$build/bin/llama-bench" -m "$g/$Q.gguf" -t "$T" -p 0 -n "$TG" -r 1 -o json 2>/dev/null |
        python3 -c "import json,sys; r=json.load(sys.stdin); print('%.3f' % r[0]['avg_ts'])" || echo 0)
    lpeak=$(cat "$cg/memory.max_usage_in_bytes")
    c=$(run_in "$limit" timeout 900 "$coli" bench --model "$conv" --threads "$T" --prompt-tokens 16 --gen-tokens "$TG" \
        --repetitions 1 --no-probe --ram-gb "$ram" --format json 2>/dev/null |
        python3 -c "import json,sys; j=json.load(sys.stdin); j=j[0] if isinstance(j,list) else j; print('%.3f' % j['decode_tok_s'])" || echo 0)
    cpeak=$(cat "$cg/memory.max_usage_in_bytes")
    echo "round $r limit $f ($(numfmt --to=iec "$limit")): llama.cpp tg $l tok/s (peak $(numfmt --to=iec "$lpeak")), coli tg $c tok/s (--ram-gb $ram, peak $(numfmt --to=iec "$cpeak"))" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import sys, re, statistics as st, collections
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r'limit (\S+) .*llama.cpp tg (\S+) .*coli tg (\S+)', line)
    if m and float(m.group(2)) > 0:
        by[m.group(1)].append(float(m.group(3)) / float(m.group(2)))
for f, v in sorted(by.items()):
    print(f"ratio at {float(f)*100:.0f}% of the model: decode coli/llama.cpp {st.median(v):.2f} (median of {len(v)} rounds)")
PY
rm -f "$out"
