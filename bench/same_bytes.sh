#!/bin/sh
# same_bytes.sh - the md5 of `coli logits` for every model, weight format,
# CPU kernel set and way of holding the weights, one line each, so that a
# change that must not change a bit (a refactor) is checked by running it
# before and after and comparing the two tables (diff).
#
# usage: bench/same_bytes.sh COLI [MODEL_DIR...] >table
#   COLI       the coli binary
#   MODEL_DIR  Hugging Face directories (default: the fixtures of
#              tests/data, the demo and the GLM demo)
# env: SETS (the kernel sets to run; default: those this CPU has),
#      FORMATS (f32 bf16 q8 q4 q2), THREADS (2), WORK (scratch directory)
# Ways: ram (the checkpoint, weights in RAM), mapped (coli convert's
# container), streamed (the container with as few expert slots as a token
# needs, so that experts are read from disk).
set -eu
coli=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$here"/tests/data/qwen3_moe "$here"/tests/data/olmoe "$here"/tests/data/mixtral \
	"$here"/tests/data/glm4_moe "$here"/tests/data/deepseek_v3 "$here"/tests/data/deepseek_v3_lite "$here"/tests/data/glm_moe_dsa "$here"/data/demo \
	"$here"/data/demo-glm
FORMATS=${FORMATS:-f32 bf16 q8 q4 q2}
THREADS=${THREADS:-2}
if [ -z "${SETS:-}" ]; then
	SETS=$("$coli" info -m "$here/data/demo" | sed -n 's/^cpu kernel sets: *\(.*\) (--cpu.*/\1/p' | tr -d ',')
fi
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/same_bytes.XXXXXX")}
trap 'rm -rf "$work"' EXIT
ids=$(awk 'BEGIN { for (i = 1; i <= 40; i++) printf "%s%d", (i > 1 ? "," : ""), (i * 37) % 200 + 1 }')

# config.json's integer member $2 of directory $1
cfg() {
	tr ',{}' '\n' <"$1/config.json" | sed -n "s/^[[:space:]]*\"$2\"[[:space:]]*:[[:space:]]*\\([0-9][0-9]*\\).*/\\1/p" |
		head -n 1
}

for m in "$@"; do
	name=${m%/}
	name=${name##*/}
	k=$(cfg "$m" num_experts_per_tok)
	for f in $FORMATS; do
		conv=$work/$name-$f
		rm -rf "$conv"
		"$coli" convert -m "$m" --out "$conv" --weights "$f" >/dev/null 2>&1 || conv=
		for s in $SETS; do
			for way in ram mapped streamed; do
				case $way in
				ram) set -- -m "$m" --weights "$f" ;;
				mapped) set -- -m "$conv" ;;
				streamed) set -- -m "$conv" --expert-slots "${k:-8}" ;;
				esac
				if [ "$way" != ram ] && [ -z "$conv" ]; then
					echo "$name $f $s $way no-container"
					continue
				fi
				# stdout only: messages name the scratch directory
				sum=$( ("$coli" logits "$@" --cpu "$s" --threads "$THREADS" --prompt-ids "$ids" 2>/dev/null;
					echo "exit $?") | md5sum | cut -c1-32)
				echo "$name $f $s $way $sum"
			done
		done
		[ -n "$conv" ] && rm -rf "$conv"
	done
done
