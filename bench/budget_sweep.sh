#!/bin/bash
# Decode speed of a converted model against its RAM budget (docs/performance.md,
# "Models larger than memory"): one coli bench per budget, random decode ids,
# page cache dropped first when run as root. Prints CSV on stdout:
#   ram_gb,slots,decode_tok_s,hit_rate,decode_disk_mb_s,prefetch_accuracy,rss_peak_mib
# usage: budget_sweep.sh COLI CONVERTED_DIR "G1 G2 ..." [THREADS] [TG]
set -eu
coli=$1 dir=$2 budgets=$3 T=${4:-2} TG=${5:-32}
echo "ram_gb,slots,decode_tok_s,hit_rate,decode_disk_mb_s,prefetch_accuracy,rss_peak_mib"
for g in $budgets; do
  [ -w /proc/sys/vm/drop_caches ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
  "$coli" bench --model "$dir" --threads "$T" --prompt-tokens 16 --gen-tokens "$TG" --repetitions 2 \
      --no-probe --random-decode --no-hotset --ram-gb "$g" --format json 2>/dev/null |
    python3 -c "import json,sys
j=json.loads([l for l in sys.stdin if l.startswith('{')][0]); s=j['store']
print('$g,%d,%.2f,%.4f,%s,%.4f,%.1f' % (s['slots'], j['decode_tok_s'], s['hit_rate'],
      '%.1f' % j['decode_disk_mb_s'] if j['decode_disk_mb_s'] is not None else '', s['prefetch_accuracy'],
      j['rss_peak_bytes'] / 1048576))"
done
