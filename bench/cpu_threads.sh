#!/bin/sh
# CPU decode and prefill of one model at several thread counts, one
# `coli bench` per format and count (docs/performance.md, "Threads on the
# GPU machine's CPU").
#
# usage: bench/cpu_threads.sh COLI MODEL_DIR [THREADS...]
#   COLI       the coli binary (with LD_LIBRARY_PATH set as it needs)
#   MODEL_DIR  e.g. the benchmark model of tools/make-synthetic
#   THREADS    thread counts (default: 1 2 4 8 16)
# env: FORMATS (q4 q8), PP (512), TG (128), REPS (3)
set -eu
[ $# -ge 2 ] || { echo "usage: $0 COLI MODEL_DIR [THREADS...]" >&2; exit 2; }
coli=$1 model=$2
shift 2
threads=${*:-1 2 4 8 16}
printf '%-7s %7s %12s %12s\n' weights threads "pp${PP:-512} tok/s" "tg${TG:-128} tok/s"
for w in ${FORMATS:-q4 q8}; do
  for t in $threads; do
    "$coli" bench --model "$model" --weights "$w" --threads "$t" --prompt-tokens "${PP:-512}" \
        --gen-tokens "${TG:-128}" --repetitions "${REPS:-3}" --no-probe --format json |
      python3 -c "import json,sys
j=json.load(sys.stdin); j=j[0] if isinstance(j,list) else j
print('%-7s %7s %12.1f %12.1f' % ('$w', '$t', j['prefill_tok_s'], j['decode_tok_s']))"
  done
done
