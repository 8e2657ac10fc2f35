#!/bin/sh
# test_perplexity.sh - `coli perplexity` and `coli generate --logprobs`,
# checked against figures this script computes itself, in awk, from the
# full logits that `coli logits` prints for each prefix of the text.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
data=${COLI_TEST_DATA:-${COLI_FIXTURE_FILES:-$srcdir/tests/data}}
q=$data/qwen3_moe

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_perplexity


# The number member $2 of the JSON object in file $1 (the first one).
json_num() {
	sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1
}

# log-probability of token $2 under the logits in file $1 (one per line,
# line 1 is id 0): logit - log(sum(exp(logit - max))) - max, in double.
logprob_from_logits() {
	awk -v id="$2" '{ l[NR - 1] = $1; if (NR == 1 || $1 > m) m = $1 }
		END { for (i in l) s += exp(l[i] - m); printf "%.17g\n", l[id] - m - log(s) }' "$1"
}

# |a - b| <= tol * |b|
close_rel() {
	awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
		exit !(d <= t * m) }'
}

if [ ! -f "$q/model.safetensors" ]; then
	fail "fixture $q is missing"
	echo "$checks checks, $failures failures"
	exit 1
fi

# ---- perplexity equals exp(mean NLL) from `coli logits` at each prefix ----
text="The quick brown fox jumps over the lazy dog."
printf '%s' "$text" >"$tmp/text.txt"
ids=$("$COLI" tokenize --model "$q" --text "$text")
set -- $ids
n=$#
if run 0 "perplexity --format json" "$COLI" perplexity --model "$q" --weights f32 --text-file "$tmp/text.txt" \
	--context "$n" --format json; then
	cp "$out" "$tmp/ppl.json"
	ppl=$(json_num "$tmp/ppl.json" perplexity)
	scored=$(json_num "$tmp/ppl.json" scored)
	# One window of n tokens: tokens n/2 .. n-1 are scored, each from the
	# logits of the prefix before it.
	first=$((n / 2))
	nll=0
	k=$first
	while [ "$k" -lt "$n" ]; do
		prefix=$(echo "$ids" | tr ' ' '\n' | head -n "$k" | paste -s -d, -)
		tok=$(echo "$ids" | tr ' ' '\n' | sed -n "$((k + 1))p")
		"$COLI" logits --model "$q" --weights f32 --prompt-ids "$prefix" --format text >"$tmp/l.txt" 2>"$err" ||
			fail "coli logits $prefix: $(cat "$err")"
		lp=$(logprob_from_logits "$tmp/l.txt" "$tok")
		nll=$(awk -v a="$nll" -v b="$lp" 'BEGIN { printf "%.17g", a - b }')
		k=$((k + 1))
	done
	expect=$(awk -v s="$nll" -v c="$((n - first))" 'BEGIN { printf "%.17g", exp(s / c) }')
	if [ "$scored" = "$((n - first))" ] && close_rel "$ppl" "$expect" 1e-6; then
		pass "perplexity $ppl = exp(mean NLL) from coli logits at $scored prefixes ($expect)"
	else
		fail "perplexity $ppl over $scored positions; expected $expect over $((n - first))"
	fi
fi

# The text report says the same.
if run 0 "perplexity, text report" "$COLI" perplexity --model "$q" --weights f32 --text-file "$tmp/text.txt" \
	--context "$n"; then
	if contains "$out" "perplexity:" && contains "$out" "$n tokens"; then
		pass "perplexity text report names the figure and the token count"
	else
		fail "perplexity text report: $(cat "$out")"
	fi
fi

# ---- KL of a format against itself is 0, of q2 against f32 is not ----------
if run 0 "perplexity f32 --against f32" "$COLI" perplexity --model "$q" --weights f32 --against f32 \
	--text-file "$tmp/text.txt" --format json; then
	kl=$(json_num "$out" mean_kl)
	top=$(json_num "$out" top1_agreement)
	pa=$(json_num "$out" perplexity_against)
	pt=$(json_num "$out" perplexity)
	pt_f32=$pt
	if [ "$kl" = 0 ] && [ "$top" = 1.000000 ] && [ "$pa" = "$pt" ]; then
		pass "f32 against f32: KL 0, top-1 agreement 100%, the same perplexity"
	else
		fail "f32 against f32: KL $kl, top-1 $top, perplexity $pt against $pa"
	fi
fi
if run 0 "perplexity q2 --against f32" "$COLI" perplexity --model "$q" --weights q2 --against f32 \
	--text-file "$tmp/text.txt" --format json; then
	kl=$(json_num "$out" mean_kl)
	if awk -v k="$kl" 'BEGIN { exit !(k > 0) }'; then
		pass "q2 against f32: mean KL $kl > 0"
	else
		fail "q2 against f32: mean KL '$kl'"
	fi
	# the reference's perplexity is f32's own (its single window of the
	# whole text, as in the f32 run above), and q2's is another
	pa=$(json_num "$out" perplexity_against)
	pt=$(json_num "$out" perplexity)
	if [ -n "$pt_f32" ] && [ "$pa" = "$pt_f32" ] && [ "$pt" != "$pt_f32" ]; then
		pass "q2 against f32: the reference's perplexity is f32's ($pa), q2's differs ($pt)"
	else
		fail "q2 against f32: reference perplexity $pa, f32 alone $pt_f32, q2 $pt"
	fi
fi

# ---- windows: n tokens in windows of 4 score 2 tokens of each whole one ----
if run 0 "perplexity --context 4" "$COLI" perplexity --model "$q" --weights f32 --text-file "$tmp/text.txt" \
	--context 4 --format json; then
	want_w=$((n / 4))
	if [ "$(json_num "$out" windows)" = "$want_w" ] && [ "$(json_num "$out" scored)" = "$((want_w * 2))" ]; then
		pass "$n tokens in windows of 4: $want_w windows, $((want_w * 2)) scored (the rest left out)"
	else
		fail "windows of 4 over $n tokens: $(cat "$out")"
	fi
fi

# ---- bad inputs -----------------------------------------------------------
if run 1 "perplexity, missing file" "$COLI" perplexity --model "$q" --text-file "$tmp/nonexistent.txt"; then
	if contains "$err" "nonexistent.txt" && contains "$err" "No such file"; then
		pass "perplexity, missing file: named"
	else
		fail "perplexity, missing file: $(cat "$err")"
	fi
fi
: >"$tmp/empty.txt"
if run 1 "perplexity, empty text" "$COLI" perplexity --model "$q" --text-file "$tmp/empty.txt"; then
	contains "$err" "empty.txt: the text is empty" && pass "perplexity, empty text: said" ||
		fail "perplexity, empty text: $(cat "$err")"
fi
printf 'a' >"$tmp/one.txt"
if run 1 "perplexity, one token" "$COLI" perplexity --model "$q" --text-file "$tmp/one.txt"; then
	contains "$err" "the text has 1 token; perplexity needs at least 2" && pass "perplexity, one token: said" ||
		fail "perplexity, one token: $(cat "$err")"
fi
for c in 1 0 abc -5 99999999; do
	if run 2 "perplexity --context $c" "$COLI" perplexity --model "$q" --text-file "$tmp/text.txt" --context "$c"; then
		contains "$err" "--context" && pass "perplexity --context $c: a usage error naming --context" ||
			fail "perplexity --context $c: $(cat "$err")"
	fi
done
if run 2 "perplexity without --text-file" "$COLI" perplexity --model "$q"; then
	contains "$err" "--text-file is required" && pass "perplexity without --text-file: said" ||
		fail "perplexity without --text-file: $(cat "$err")"
fi

# ---- generate --logprobs --------------------------------------------------
prompt=1,2,3
if run 0 "generate --logprobs 3" "$COLI" generate --model "$q" --weights f32 --prompt-ids "$prompt" \
	--temperature 0 -n 4 --logprobs 3 --format json; then
		# `coli logits` prints 9 significant digits: 1e-6 is far above that
	# rounding and far below any real difference.
	# One line per generated token: id logprob top-ids... top-logprobs...
	sed -n 's/.*"logprobs":\[\(.*\)\],"text".*/\1/p' "$out" |
		sed 's/},{"id":\([0-9]*\),"logprob":\([^,]*\),"top"/}\n{"id":\1,"logprob":\2,"top"/g' |
		sed 's/[^-0-9.eE+]\{1,\}/ /g; s/^ //; s/ $//' >"$tmp/lp.txt"
	toks=$(sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' "$out")
	lines=$(wc -l <"$tmp/lp.txt")
	# each line: id lp t1 l1 t2 l2 t3 l3
	if [ "$lines" -eq 4 ] && awk 'NF != 8 || $1 != $3 || $2 != $4 || $2 > 0 || $4 < $6 || $6 < $8 || $8 > 0 { bad = 1 }
		END { exit bad }' "$tmp/lp.txt"; then
		pass "greedy --logprobs: the token is the top-1 with its log-probability; <= 0, sorted"
	else
		fail "greedy --logprobs: $(cat "$tmp/lp.txt")"
	fi
	ok=1
	i=1
	pre=$prompt
	for t in $(echo "$toks" | tr ',' ' '); do
		"$COLI" logits --model "$q" --weights f32 --prompt-ids "$pre" --format text >"$tmp/l.txt" 2>"$err" || ok=0
		want=$(logprob_from_logits "$tmp/l.txt" "$t")
		got=$(sed -n "${i}p" "$tmp/lp.txt" | cut -d' ' -f2)
		close_rel "$got" "$want" 1e-6 || { ok=0; echo "  token $i ($t): $got, expected $want"; }
		pre=$pre,$t
		i=$((i + 1))
	done
	[ "$i" -eq 5 ] || { ok=0; echo "  $((i - 1)) generated tokens, expected 4: '$toks'"; }
	[ "$ok" -eq 1 ] && pass "generate --logprobs matches log-softmax of coli logits at each prefix" ||
		fail "generate --logprobs differs from coli logits"
fi
if run 0 "generate --logprobs 0" "$COLI" generate --model "$q" --prompt-ids "$prompt" --seed 7 -n 2 \
	--logprobs 0 --format json; then
	contains "$out" '"top":[]}' && pass "generate --logprobs 0: no top list" ||
		fail "generate --logprobs 0: $(cat "$out")"
fi
if run 2 "generate --logprobs in text mode" "$COLI" generate --model "$q" --prompt-ids "$prompt" --logprobs 2; then
	contains "$err" "--logprobs needs --format json" && pass "generate --logprobs in text mode: refused" ||
		fail "generate --logprobs in text mode: $(cat "$err")"
fi
if run 2 "generate --logprobs 21" "$COLI" generate --model "$q" --prompt-ids "$prompt" --logprobs 21 \
	--format json; then
	contains "$err" "--logprobs" && contains "$err" "20" && pass "generate --logprobs 21: out of its range" ||
		fail "generate --logprobs 21: $(cat "$err")"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
