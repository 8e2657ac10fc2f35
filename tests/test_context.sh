#!/bin/sh
# test_context.sh - what `coli generate`, `info` and `bench` say about a run
# (issue 17): the seed, the --stats figures, the --stop string, the sizes of
# a converted model, the bandwidth probe's size, and the context: the
# model's full length by default, its KV cache counted and shown, and a
# context that the model or the memory cannot hold refused with the numbers.
#
# Run by `make check` from the build directory, like test_cli.sh.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
data=${COLI_TEST_DATA:-$srcdir/tests/data}
demo=$srcdir/data/demo

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_context


# The value of the JSON integer member $2 in file $1 (the first one).
json_int() {
	sed -n "s/.*\"$2\":\\(-\\{0,1\\}[0-9][0-9]*\\).*/\\1/p" "$1" | head -n 1
}

# The JSON string member $2 of file $1, as printed (escapes kept).
json_str() {
	sed -n "s/.*\"$2\":\\(\"\\([^\"\\\\]\\|\\\\.\\)*\"\\).*/\\1/p" "$1" | head -n 1
}

# The integer member $2 of config.json in directory $1.
config_int() {
	tr ',{}' '\n' <"$1/config.json" |
		sed -n "s/^[[:space:]]*\"$2\"[[:space:]]*:[[:space:]]*\\([0-9][0-9]*\\).*/\\1/p" | head -n 1
}

# KV cache bytes per position of the model in $1, from its config: a key
# and a value of n_kv_heads x head_dim floats per layer.
kv_per_pos() {
	layers=$(config_int "$1" num_hidden_layers)
	kvh=$(config_int "$1" num_key_value_heads)
	hd=$(config_int "$1" head_dim)
	if [ -z "$hd" ]; then
		hd=$(($(config_int "$1" hidden_size) / $(config_int "$1" num_attention_heads)))
	fi
	echo $((2 * layers * kvh * hd * 4))
}

for f in "$demo/config.json" "$data/qwen3_moe/config.json"; do
	[ -f "$f" ] || { fail "missing $f"; echo "$checks checks, $failures failures"; exit 1; }
done
demo_max=$(config_int "$demo" max_position_embeddings)
demo_kv=$(kv_per_pos "$demo")

# ---- 1. the seed drawn from the clock is printed, and gives the text again
if run 0 "generate --verbose without --seed" "$COLI" generate -m "$demo" -p "And God said" -n 12 \
	--temperature 1 --top-k 0 --top-p 1 --ignore-eos --verbose; then
	seed=$(sed -n 's/.*: seed \([0-9][0-9]*\) (--seed \1 gives this text again)$/\1/p' "$err" | head -n 1)
	cp "$out" "$tmp/first.txt"
	if [ -z "$seed" ]; then
		fail "--verbose does not print the seed: $(cat "$err")"
	elif run 0 "generate --seed $seed" "$COLI" generate -m "$demo" -p "And God said" -n 12 \
		--temperature 1 --top-k 0 --top-p 1 --ignore-eos --seed "$seed" --stats; then
		if cmp -s "$out" "$tmp/first.txt" && contains "$err" "seed: $seed"; then
			pass "the seed printed by --verbose gives the same text with --seed; --stats prints it"
		else
			fail "seed $seed: first '$(cat "$tmp/first.txt")', again '$(cat "$out")', stats $(cat "$err")"
		fi
	fi
fi

# ---- 2. --stats: tokens, speeds, context used, memory of weights and KV cache
if run 0 "tokenize the prompt" "$COLI" tokenize -m "$demo" --text "In the beginning" --format json; then
	n_prompt=$(sed -n 's/.*"ids":\[\([^]]*\)\].*/\1/p' "$out" | tr ',' '\n' | grep -c .)
	weights=0
	if run 0 "info (weights)" "$COLI" info -m "$demo" --format json; then
		weights=$(json_int "$out" weight_bytes)
	fi
	if run 0 "generate --stats" "$COLI" generate -m "$demo" -p "In the beginning" -n 7 --temperature 0 \
		--ignore-eos --stats; then
		want_w=$(awk -v b="$weights" 'BEGIN { printf "%.1f", b / 1048576 }')
		want_kv=$(awk -v b=$((demo_kv * demo_max)) 'BEGIN { printf "%.1f", b / 1048576 }')
		if contains "$err" "tokens: $n_prompt prompt, 7 generated" &&
			grep -E '^speed: prefill [0-9]+\.[0-9]+ tok/s, decode [0-9]+\.[0-9]+ tok/s$' "$err" >/dev/null &&
			contains "$err" "context: $((n_prompt + 7)) of $demo_max positions used" &&
			contains "$err" "memory: weights $want_w MiB, KV cache $want_kv MiB ($demo_kv bytes per position)"; then
			pass "--stats: tokens, speeds, context used, weights and KV cache"
		else
			fail "--stats (want $n_prompt + 7 tokens, $want_w MiB, $want_kv MiB): $(cat "$err")"
		fi
	fi
fi

# ---- 3. --stop: tokens and text agree, and the string matched is named
if run 0 "generate --stop, json" "$COLI" generate -m "$demo" -p "In the beginning" -n 40 --temperature 0 \
	--stop "Egypt" --stop "nothing like this" --format json; then
	cp "$out" "$tmp/stop.json"
	ids=$(sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p' "$out")
	text=$(json_str "$out" text)
	at=$(json_int "$out" stop_offset)
	if ! contains "$out" '"stop_reason":"stop"'; then
		fail "--stop Egypt did not stop the demo's greedy text: $(cat "$out")"
	elif run 0 "detokenize the tokens" "$COLI" detokenize -m "$demo" --ids "$ids" --format json; then
		decoded=$(json_str "$out" text)
		case $text in
		*Egypt*) has=yes ;;
		*) has=no ;;
		esac
		if [ "$text" = "$decoded" ] && [ "$has" = yes ] && contains "$tmp/stop.json" '"stop":"Egypt"' &&
			[ -n "$at" ]; then
			pass "--stop: text is the decoding of tokens, both with the stop string; \"stop\" names it"
		else
			fail "--stop json: text $text, tokens decode to $decoded, $(cat "$tmp/stop.json")"
		fi
	fi
	if run 0 "generate --stop, text, verbose" "$COLI" generate -m "$demo" -p "In the beginning" -n 40 \
		--temperature 0 --stop "Egypt" --stop "nothing like this" --verbose; then
		# text mode shows the prompt, the text before the stop string and a newline
		if contains "$err" 'stopped: a --stop string "Egypt"' && ! contains "$out" Egypt &&
			[ $(($(wc -c <"$out") - 1)) -eq $((16 + at)) ]; then
			pass "--stop in text mode: the text ends before the string, --verbose names it"
		else
			fail "--stop text (offset $at): stdout '$(cat "$out")' stderr $(cat "$err")"
		fi
	fi
fi

# ---- 4. coli info on a converted model: its own sizes, with units
conv=$tmp/demo_q4
if run 0 "convert the demo to q4" "$COLI" convert -m "$demo" --out "$conv" --weights q4 &&
	run 0 "info on the converted demo" "$COLI" info -m "$conv"; then
	stored=$(sed -n 's/^  as stored *\([0-9][0-9]*\) bytes.*/\1/p' "$out")
	q4=$(sed -n 's/^  q4 *\([0-9][0-9]*\) bytes.*/\1/p' "$out")
	file=$(wc -c <"$conv/model.coli" | tr -d ' ')
	if [ -n "$stored" ] && [ "$stored" = "$q4" ] && contains "$out" "model.coli:         $file bytes" &&
		[ "$(grep -c ' bytes read per token$' "$out")" -eq 6 ]; then
		pass "info on a converted q4 model: as stored is q4's size, model.coli's size, bytes read per token"
	else
		fail "info on the converted demo (model.coli $file bytes): $(cat "$out")"
	fi
fi
convq=$tmp/qwen_q4
if run 0 "convert the fixture to q4" "$COLI" convert -m "$data/qwen3_moe" --out "$convq" --weights q4 &&
	run 0 "info with 2 expert slots" "$COLI" info -m "$convq" --expert-slots 2 --format json; then
	slot=$(json_int "$out" slot_bytes)
	want=$(awk -v b="$slot" 'BEGIN { printf "%.1f KiB each", b / 1024 }')
	if contains "$out" "$want" && ! contains "$out" "0.0 MiB"; then
		pass "info: a slot's size in a unit that shows it ($want)"
	else
		fail "info slots (slot $slot bytes, want $want): $(cat "$out")"
	fi
fi

# ---- 5. the bandwidth probe is sized to the caches, not 2 GiB
llc=0
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
	[ -r "$d/size" ] || continue
	[ "$(cat "$d/type" 2>/dev/null)" = Instruction ] && continue
	s=$(sed -n 's/^\([0-9][0-9]*\)K$/\1/p' "$d/size")
	[ -n "$s" ] && [ $((s * 1024)) -gt "$llc" ] && llc=$((s * 1024))
done
if run 0 "bench with the default probe" "$COLI" bench -m "$demo" --prompt-tokens 4 --gen-tokens 2 \
	--repetitions 1 --format json; then
	mib=$(json_int "$out" mem_bw_mib)
	floor=$((3 * llc))
	[ "$floor" -gt $((1024 << 20)) ] && floor=$((1024 << 20))
	if [ "$llc" -eq 0 ]; then
		# no cache sizes in sysfs here: 4 x what coli found otherwise, within
		# 64 MiB .. 1 GiB, or the documented 1 GiB when it found none
		lb=$(json_int "$out" llc_bytes)
		want=1024
		[ "${lb:-0}" -gt 0 ] && want=$(((4 * lb + 1048575) >> 20))
		[ "$want" -lt 64 ] && want=64
		[ "$want" -gt 1024 ] && want=1024
		[ "$mib" = "$want" ] && pass "bench: without sysfs cache sizes the probe reads $want MiB" ||
			fail "bench probe without sysfs cache sizes (want $want MiB): $(cat "$out")"
	elif [ -n "$mib" ] && [ "$mib" -lt 2048 ] && [ $((mib << 20)) -ge "$floor" ] &&
		[ "$(json_int "$out" llc_bytes)" -ge "$llc" ]; then
		pass "bench: the probe reads $mib MiB, below 2 GiB and at least 3 x the $((llc >> 20)) MiB cache"
	else
		fail "bench probe ($((llc >> 20)) MiB LLC): $(cat "$out")"
	fi
fi

# ---- 6. the context
big=$tmp/big_ctx # the fixture, claiming 40960 positions
cp -r "$data/qwen3_moe" "$big"
sed 's/"max_position_embeddings": *[0-9]*/"max_position_embeddings": 40960/' "$data/qwen3_moe/config.json" \
	>"$big/config.json"
kv=$(kv_per_pos "$big")
if run 0 "info on a 40960-position model" "$COLI" info -m "$big" --format json; then
	if [ "$(json_int "$out" context_positions)" = 40960 ] && [ "$(json_int "$out" kv_bytes_per_position)" = "$kv" ] &&
		[ "$(json_int "$out" kv_bytes)" = $((kv * 40960)) ]; then
		pass "info: the default context is max_position_embeddings, with its KV cache"
	else
		fail "info (40960 positions, $kv bytes each): $(cat "$out")"
	fi
fi
if run 0 "info, text" "$COLI" info -m "$big"; then
	if contains "$out" "kv cache:           $((kv * 40960)) bytes" &&
		contains "$out" "40960 positions, $kv bytes per position"; then
		pass "info (text): the KV cache line"
	else
		fail "info (text): $(cat "$out")"
	fi
fi
# --kv-type bf16 (and COLI_KV_TYPE=bf16): two bytes a value, half the cache,
# in info, in generate's statistics and in the store's budget below.
for how in option env; do
	if [ "$how" = option ]; then
		run 0 "info --kv-type bf16" "$COLI" info -m "$big" --kv-type bf16 --format json
	else
		run 0 "COLI_KV_TYPE=bf16 info" env COLI_KV_TYPE=bf16 "$COLI" info -m "$big" --format json
	fi
	if [ "$(json_int "$out" kv_bytes_per_position)" = $((kv / 2)) ] &&
		[ "$(json_int "$out" kv_bytes)" = $((kv / 2 * 40960)) ] && contains "$out" '"kv_type":"bf16"'; then
		pass "info, bf16 KV cache ($how): $((kv / 2)) bytes per position"
	else
		fail "info, bf16 KV cache ($how): $(cat "$out")"
	fi
done
if run 0 "generate --kv-type bf16 --stats" "$COLI" generate -m "$big" -p "In the" -n 2 --temperature 0 \
	--kv-type bf16 --format json --stats; then
	if [ "$(json_int "$out" kv_bytes)" = $((kv / 2 * 40960)) ] && contains "$out" '"kv_type":"bf16"' &&
		contains "$err" "($((kv / 2)) bytes per position)"; then
		pass "generate --kv-type bf16: its context's KV cache is half the f32 one"
	else
		fail "generate --kv-type bf16: $(cat "$out" "$err")"
	fi
fi
if run 1 "COLI_KV_TYPE=f16" env COLI_KV_TYPE=f16 "$COLI" info -m "$big"; then
	if contains "$err" "environment variable COLI_KV_TYPE: 'f16' is not f32 or bf16"; then
		pass "a malformed COLI_KV_TYPE is refused, naming it"
	else
		fail "COLI_KV_TYPE=f16: $(cat "$err")"
	fi
fi
if run 0 "generate on a 40960-position model" "$COLI" generate -m "$big" -p "In the" -n 2 --temperature 0 \
	--format json; then
	if [ "$(json_int "$out" context_positions)" = 40960 ] && [ "$(json_int "$out" kv_bytes)" = $((kv * 40960)) ]; then
		pass "generate: the context holds all 40960 positions by default"
	else
		fail "generate default context: $(cat "$out")"
	fi
fi
if run 1 "a context beyond the model" "$COLI" generate -m "$demo" -p "In the" -n 2 -c $((demo_max + 1)); then
	if contains "$err" "$((demo_max + 1)) positions exceed the model's max_position_embeddings ($demo_max)"; then
		pass "a context beyond max_position_embeddings is refused, with the maximum"
	else
		fail "context beyond: $(cat "$err")"
	fi
fi

# --ram-gb leaves room for the KV cache of the context chosen.
if [ -f "$conv/model.coli" ] && run 0 "info on the converted demo, json" "$COLI" info -m "$conv" --format json; then
	dense=$(json_int "$out" dense_bytes)
	slot=$(json_int "$out" slot_bytes)
	experts=$(json_int "$out" experts)
	for ctx in "" 64 "64 bf16"; do
		kvt=${ctx#* }
		[ "$kvt" = "$ctx" ] && kvt=f32
		ctx=${ctx%% *}
		n_ctx=${ctx:-$demo_max}
		kvb=$((demo_kv * n_ctx))
		[ "$kvt" = bf16 ] && kvb=$((kvb / 2))
		# a budget of whole MiB that leaves 4 to 4 + 1 MiB of slots past the dense weights and KV cache
		mb=$(((dense + kvb + 4 * slot + 1048575) / 1048576))
		want=$(((mb * 1048576 - dense - kvb) / slot))
		[ "$want" -gt "$experts" ] && want=$experts
		gb=$(awk -v m="$mb" 'BEGIN { printf "%.10f", m / 1024 }')
		if run 0 "generate --ram-gb $gb ${ctx:+-c $ctx} --kv-type $kvt" "$COLI" generate -m "$conv" --ram-gb "$gb" \
			${ctx:+-c "$ctx"} --kv-type "$kvt" -p "In the" -n 2 --temperature 0 --format json; then
			if [ "$(json_int "$out" slots)" = "$want" ] && [ "$(json_int "$out" context_positions)" = "$n_ctx" ]; then
				pass "--ram-gb $gb with $n_ctx positions in $kvt: $want slots, room left for the KV cache"
			else
				fail "--ram-gb $gb, $n_ctx positions in $kvt: want $want slots: $(cat "$out")"
			fi
		fi
	done
	# too small for the KV cache: the message counts it
	mb=$(((dense + demo_kv * demo_max) / 1048576))
	if run 1 "--ram-gb below the dense weights and KV cache" "$COLI" generate -m "$conv" \
		--ram-gb "$(awk -v m="$mb" 'BEGIN { printf "%.10f", m / 1024 }')" -p "In the" -n 2; then
		if contains "$err" "the KV cache of $demo_max positions"; then
			pass "a budget without room for the KV cache is refused, naming it"
		else
			fail "budget too small for the KV cache: $(cat "$err")"
		fi
	fi
fi

# A KV cache that cannot be allocated: the bytes it needs and the context
# that fits. The address space is limited so that the allocation fails on
# any machine; a build whose sanitizers need the address space (it cannot
# run under the limit at all) skips this check.
huge=$tmp/huge_ctx
cp -r "$data/qwen3_moe" "$huge"
sed 's/"max_position_embeddings": *[0-9]*/"max_position_embeddings": 16777216/' "$data/qwen3_moe/config.json" \
	>"$huge/config.json"
limit=2000000 # KiB
# (whether coli starts at all under the limit: --version opens no model)
if (ulimit -v "$limit" && "$COLI" --version) >/dev/null 2>&1; then
	need=$((kv * 16777216))
	if (ulimit -v "$limit" && exec "$COLI" generate -m "$huge" -p "In the" -n 2 -c 16777216) >"$out" 2>"$err"; then
		fail "-c 16777216 under a $limit KiB address space was accepted"
	else
		fit=$(sed -n 's/.*at most \([0-9][0-9]*\) positions fit.*/\1/p' "$err")
		if contains "$err" "a KV cache of 16777216 positions needs $need bytes" &&
			contains "$err" "$kv bytes per position in f32" &&
			[ -n "$fit" ] && [ "$fit" -gt 0 ] && [ $((fit * kv)) -lt $((limit * 1024)) ]; then
			if (ulimit -v "$limit" && exec "$COLI" generate -m "$huge" -p "In the" -n 2 -c "$fit") >"$out" 2>&1; then
				pass "a KV cache beyond memory is refused with its $need bytes; the -c $fit it names works"
			else
				fail "the suggested -c $fit does not work: $(cat "$out")"
			fi
		else
			fail "KV cache beyond memory: $(cat "$err")"
		fi
	fi
	# with many threads the suggestion is the same on every run, and works:
	# the pool's threads set their memory aside before the cache is
	# allocated, and the suggestion leaves room for the rest of a run
	# (once it varied with when the threads started, and failed under load)
	cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	nt=$((4 * cores))
	[ "$nt" -gt 8 ] && nt=8
	fits=
	for i in 1 2 3; do
		(ulimit -v "$limit" && exec "$COLI" generate -m "$huge" -p "In the" -n 2 -c 16777216 -t "$nt") >"$out" 2>"$err"
		fits="$fits $(sed -n 's/.*at most \([0-9][0-9]*\) positions fit.*/\1/p' "$err")"
	done
	set -- $fits
	if [ $# = 3 ] && [ "$1" = "$2" ] && [ "$2" = "$3" ] &&
		(ulimit -v "$limit" && exec "$COLI" generate -m "$huge" -p "In the" -n 2 -c "$1" -t "$nt") >"$out" 2>&1; then
		pass "with $nt threads the KV cache's suggestion is the same three times ($1 positions) and works"
	else
		fail "with $nt threads: suggestions$fits; $(cat "$out")"
	fi
	# a bf16 cache takes half: the message counts two bytes a value
	if (ulimit -v "$limit" && exec "$COLI" generate -m "$huge" -p "In the" -n 2 -c 16777216 --kv-type bf16) \
		>"$out" 2>"$err"; then
		fail "-c 16777216 --kv-type bf16 under a $limit KiB address space was accepted"
	elif contains "$err" "a KV cache of 16777216 positions needs $((need / 2)) bytes" &&
		contains "$err" "$((kv / 2)) bytes per position in bf16"; then
		pass "a bf16 KV cache beyond memory is refused with its $((need / 2)) bytes"
	else
		fail "bf16 KV cache beyond memory: $(cat "$err")"
	fi
else
	echo "skip: coli does not run in a $limit KiB address space (a sanitizer build?)"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
