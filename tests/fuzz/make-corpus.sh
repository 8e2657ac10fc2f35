#!/bin/sh
# make-corpus.sh - builds the seed corpora of the fuzz targets from the
# fixtures in the source tree, so that no copies are kept in the repository.
#
# Usage: sh tests/fuzz/make-corpus.sh SRCDIR OUTDIR
# Writes OUTDIR/<target>/ for json, safetensors, tokenizer, tokenizer_load,
# model_open and template (OUTDIR is replaced). Needs only POSIX sh, od, awk, head,
# tail.
set -eu
LC_ALL=C
export LC_ALL

src=$1
out=$2
data=$src/tests/data
models="qwen3_moe olmoe mixtral"

rm -rf "$out"
for t in json safetensors tokenizer tokenizer_load model_open template request; do
	mkdir -p "$out/$t"
done

# ---- helpers ------------------------------------------------------------

# le64 N: the 8-byte little-endian encoding of N, as printf octal escapes.
le64() {
	v=$1
	i=0
	esc=
	while [ "$i" -lt 8 ]; do
		esc="$esc\\$(printf %03o $((v % 256)))"
		v=$((v / 256))
		i=$((i + 1))
	done
	printf '%s' "$esc"
}

# st_file OUT HEADER DATA_BYTES: a safetensors file with a zero data area.
st_file() {
	{
		# shellcheck disable=SC2059 # the format is the escapes
		printf "$(le64 ${#2})"
		printf '%s' "$2"
		head -c "$3" /dev/zero
	} >"$1"
}

# header FILE: the JSON header of a safetensors file.
header() {
	n=$(od -An -tu1 -N8 "$1" | awk '{ v = 0; for (i = NF; i >= 1; i--) v = v * 256 + $i; print v }')
	tail -c +9 "$1" | head -c "$n"
}

# unhex HEX: the bytes of a hex string ("-" is empty), as printf escapes.
unhex() {
	[ "$1" = - ] && return 0
	printf '%s' "$1" | awk '{
		for (i = 1; i < length($0); i += 2) {
			hi = index("0123456789abcdef", substr($0, i, 1)) - 1
			lo = index("0123456789abcdef", substr($0, i + 1, 1)) - 1
			printf "\\%03o", hi * 16 + lo
		}
	}'
}

# entry NAME FILE: one file of a model_open input.
entry() {
	printf '%s\n' "$1"
	cat "$2"
	printf '\000'
}

# st_entry NAME FILE: a safetensors file of a model_open input (its header).
st_entry() {
	printf '%s\n' "$1"
	header "$2"
	printf '\000'
}

# ---- json: every JSON fixture, and documents that reach the corners -----

for m in $models; do
	for f in "$data/$m"/*.json; do
		cp "$f" "$out/json/$m-$(basename "$f")"
	done
done
cp "$src/data/demo/config.json" "$out/json/demo-config.json"
i=0
while IFS= read -r doc; do
	printf '%s' "$doc" >"$out/json/edge-$i.json"
	i=$((i + 1))
done <<'EOF'
{"a":[1,-0,0.5,-1.25e-3,1E+2,9223372036854775807,-9223372036854775808,9223372036854775808,1e308,4.9e-324],"b":{"c":null,"d":true,"e":false}}
["\u00e9\u4e2d\ud83d\ude00\u0000\"\\\/\b\f\n\r\t","caf\u00c3\u00a9"]
{"k":1,"k":2,"":3,"k\u0000x":4}
[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
 	 {"spaces" : [ 1 , 2 ] } 	
"just a string"
-12345678901234567890123
EOF

# ---- safetensors: small files in the shapes real writers produce ---------

st_file "$out/safetensors/one.safetensors" \
	'{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' 16
st_file "$out/safetensors/dtypes.safetensors" \
	'{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"F16","shape":[2,1],"data_offsets":[6,10]},"c":{"dtype":"I64","shape":[1],"data_offsets":[10,18]},"d":{"dtype":"U8","shape":[0,5],"data_offsets":[18,18]},"e":{"dtype":"BOOL","shape":[4],"data_offsets":[18,22]},"f":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[22,24]},"g":{"dtype":"F64","shape":[],"data_offsets":[24,32]}}' 32
st_file "$out/safetensors/padded.safetensors" \
	'{"x":{"dtype":"I32","shape":[1,1,1,1,1,1,1,2],"data_offsets":[0,8]}}  ' 8
st_file "$out/safetensors/empty.safetensors" '{}' 0
st_file "$out/safetensors/meta.safetensors" '{"__metadata__":{"format":"pt","note":"x"}}' 0
# The tensor names of a fixture checkpoint, each a tiny bf16 matrix.
h=$(header "$data/qwen3_moe/model.safetensors" | tr ',' '\n' | sed -n 's/^"\([^"]*\)":{"dtype".*/\1/p' | sed -n '1,24p' |
	awk 'BEGIN { printf "{" } { printf "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[2,4],\"data_offsets\":[%d,%d]}", (NR > 1 ? "," : ""), $0, (NR - 1) * 16, NR * 16; n = NR } END { printf "}" }')
st_file "$out/safetensors/qwen3-names.safetensors" "$h" $((24 * 16))

# ---- tokenizer: byte 0 the tokenizer, byte 1 the flags, then the text ----
# The texts are the fixtures' own test cases (reference.txt), one model's
# cases for each tokenizer, with the flags varied.

sel=0
for m in qwen3_moe olmoe mixtral qwen3_moe; do
	grep '^tok_case ' "$data/$m/reference.txt" | while read -r _ n hex; do
		# shellcheck disable=SC2059 # the format is the escapes
		{
			printf "\\$(printf %03o "$sel")\\$(printf %03o $((n % 4)))"
			printf "$(unhex "$hex")"
		} >"$out/tokenizer/$sel-$n"
	done
	sel=$((sel + 1))
done

# ---- tokenizer_load: the fixture tokenizers and small hand-made ones ------

for m in $models; do
	cp "$data/$m/tokenizer.json" "$out/tokenizer_load/$m.json"
done
cat >"$out/tokenizer_load/metaspace.json" <<'EOF'
{"added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":9,"content":"<s>","special":true,"normalized":false}],
"normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true},
"post_processor":{"type":"RobertaProcessing","sep":["<s>",9],"cls":["<s>",9]},
"decoder":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always"},
"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":false,
"vocab":{"<unk>":0,"\u2581":1,"a":2,"b":3,"\u2581a":4,"ab":5,"\u2581ab":6,"c":7,"\u2581c":8},
"merges":["\u2581 a","a b","\u2581a b",["\u2581","c"]]}}
EOF
cat >"$out/tokenizer_load/gpt2.json" <<'EOF'
{"added_tokens":[{"id":7,"content":"<|end|>","special":true,"lstrip":true,"rstrip":true,"single_word":true}],
"normalizer":{"type":"Sequence","normalizers":[{"type":"Strip","strip_left":true,"strip_right":false},{"type":"Replace","pattern":{"String":"x"},"content":"y"}]},
"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":true,"use_regex":false}]},
"post_processor":{"type":"Sequence","processors":[{"type":"ByteLevel"},{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|end|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<|end|>":{"id":"<|end|>","ids":[7],"tokens":["<|end|>"]}}}]},
"decoder":{"type":"ByteLevel"},
"model":{"type":"BPE","ignore_merges":true,"vocab":{"\u0120":0,"a":1,"b":2,"\u0120a":3,"ab":4,"1":5,"\u0120ab":6},"merges":["\u0120 a","a b","\u0120a b"]}}
EOF
cat >"$out/tokenizer_load/subword.json" <<'EOF'
{"added_tokens":[],"normalizer":{"type":"NFC"},
"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},
"post_processor":{"type":"BertProcessing","sep":["b",1],"cls":["a",0]},
"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"##"},"content":""},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":1}]},
"model":{"type":"BPE","continuing_subword_prefix":"##","end_of_word_suffix":"</w>","byte_fallback":true,"unk_token":null,
"vocab":{"a":0,"b":1,"##b":2,"ab":3,"b</w>":4,"##b</w>":5,"ab</w>":6,"<0x41>":7,"<0xC3>":8,"<0xA9>":9},"merges":[["a","##b"],["a","##b</w>"]]}}
EOF

# ---- model_open: the fixture model directories ---------------------------
# The safetensors files are given as headers; the target fills the data.

for m in qwen3_moe mixtral; do
	d=$data/$m
	{
		entry config.json "$d/config.json"
		entry generation_config.json "$d/generation_config.json"
		entry tokenizer_config.json "$d/tokenizer_config.json"
		st_entry model.safetensors "$d/model.safetensors"
	} >"$out/model_open/$m-notok"
	{
		cat "$out/model_open/$m-notok"
		entry tokenizer.json "$d/tokenizer.json"
	} >"$out/model_open/$m"
done
d=$data/olmoe
{
	entry config.json "$d/config.json"
	entry model.safetensors.index.json "$d/model.safetensors.index.json"
	for s in "$d"/model-*.safetensors; do
		st_entry "$(basename "$s")" "$s"
	done
} >"$out/model_open/olmoe-notok"
# Quantized at load: q8, q4 (group 64), q2.
for w in 3 4 5; do
	{
		# shellcheck disable=SC2059 # the format is the escapes
		printf "@options\n\\$(printf %03o "$w")\\001\\000"
		cat "$out/model_open/qwen3_moe-notok"
	} >"$out/model_open/qwen3_moe-w$w"
done

# ---- template: each chat template fixture, alone (the target's own
# conversation) and with a NUL and variables of its own ----------------------
for f in "$data"/templates/*.jinja; do
	name=$(basename "$f" .jinja)
	cp "$f" "$out/template/$name"
	{
		cat "$f"
		printf '\000{"messages": [{"role": "user", "content": "a\\u00e9"}, {"role": "assistant",'
		printf ' "content": ["x"], "reasoning_content": null}], "add_generation_prompt": false}'
	} >"$out/template/$name-vars"
done
printf '{%%- for m in messages if m.role != "x" -%%}{{ loop.index ~ m|tojson(indent=1) }}{%% endfor %%}' \
	>"$out/template/loop"

# ---- request: OpenAI request bodies as clients send them ------------------
printf '%s' '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"temperature":0.7,"top_p":0.9,"max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}' \
	>"$out/request/chat"
printf '%s' '{"messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"chat_template_kwargs":{"enable_thinking":false},"stop":["\n","END"],"seed":7,"logprobs":true,"top_logprobs":3}' \
	>"$out/request/tools"
printf '%s' '{"prompt":"In the beginning","max_tokens":8,"temperature":null,"frequency_penalty":0.5,"presence_penalty":-0.5,"repeat_penalty":1.1,"top_k":40,"min_p":0.05,"unknown":{"x":[1,2]}}' \
	>"$out/request/completion"
