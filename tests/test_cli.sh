#!/bin/sh
# test_cli.sh - exercises the coli tool end to end on the test fixtures.
#
# Run by `make check` from the build directory; $srcdir is the source
# directory (read-only under distcheck). Missing fixtures are a failure, not
# a skip: the fixtures are part of the distribution.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
data=${COLI_TEST_DATA:-${COLI_FIXTURE_FILES:-$srcdir/tests/data}}
header=$srcdir/include/colibri/colibri.h

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
err=$tmp/err

failures=0
checks=0

pass() {
	checks=$((checks + 1))
	echo "ok: $1"
}

fail() {
	checks=$((checks + 1))
	failures=$((failures + 1))
	echo "FAIL: $1"
}

# run EXPECTED_STATUS DESCRIPTION COMMAND...: runs the command with stdout in
# $out and stderr in $err; returns 0 if it exited with EXPECTED_STATUS.
run() {
	expected=$1
	what=$2
	shift 2
	"$@" >"$out" 2>"$err" </dev/null
	status=$?
	if [ "$status" -ne "$expected" ]; then
		fail "$what: exit status $status, expected $expected"
		if [ -s "$err" ]; then
			echo "  stderr:"
			sed -n '1,20s/^/    /p' "$err"
		fi
		return 1
	fi
	return 0
}

# Checks that $1 (a file) contains the fixed string $2.
contains() {
	grep -F -e "$2" "$1" >/dev/null 2>&1
}

# A minimal JSON syntax checker (RFC 8259) in awk, so that the test depends
# on no interpreter beyond POSIX tools. Exit status 0 if stdin is one valid
# JSON value.
json_valid() {
	awk '
	function ws() {
		while (pos <= n && index(" \t\r\n", substr(s, pos, 1)) > 0)
			pos++
	}
	function digits(   start) {
		start = pos
		while (pos <= n && index("0123456789", substr(s, pos, 1)) > 0)
			pos++
		return pos > start
	}
	function number() {
		if (substr(s, pos, 1) == "-")
			pos++
		if (substr(s, pos, 1) == "0")
			pos++
		else if (!digits())
			return 0
		if (substr(s, pos, 1) == ".") {
			pos++
			if (!digits())
				return 0
		}
		if (substr(s, pos, 1) == "e" || substr(s, pos, 1) == "E") {
			pos++
			if (substr(s, pos, 1) == "+" || substr(s, pos, 1) == "-")
				pos++
			if (!digits())
				return 0
		}
		return 1
	}
	function string(   c, k) {
		pos++
		while (pos <= n) {
			c = substr(s, pos, 1)
			if (c == "\"") {
				pos++
				return 1
			}
			if (index(ctrl, c) > 0)
				return 0
			if (c == "\\") {
				c = substr(s, pos + 1, 1)
				if (c == "u") {
					for (k = 2; k <= 5; k++)
						if (index("0123456789abcdefABCDEF", substr(s, pos + k, 1)) == 0)
							return 0
					pos += 6
				} else if (index("\"\\/bfnrt", c) > 0) {
					pos += 2
				} else {
					return 0
				}
				continue
			}
			pos++
		}
		return 0
	}
	function value(   c) {
		ws()
		c = substr(s, pos, 1)
		if (c == "{")
			return object()
		if (c == "[")
			return array()
		if (c == "\"")
			return string()
		if (substr(s, pos, 4) == "true" || substr(s, pos, 4) == "null") {
			pos += 4
			return 1
		}
		if (substr(s, pos, 5) == "false") {
			pos += 5
			return 1
		}
		return number()
	}
	function array() {
		pos++
		ws()
		if (substr(s, pos, 1) == "]") {
			pos++
			return 1
		}
		for (;;) {
			if (!value())
				return 0
			ws()
			if (substr(s, pos, 1) == "]") {
				pos++
				return 1
			}
			if (substr(s, pos, 1) != ",")
				return 0
			pos++
		}
	}
	function object() {
		pos++
		ws()
		if (substr(s, pos, 1) == "}") {
			pos++
			return 1
		}
		for (;;) {
			ws()
			if (substr(s, pos, 1) != "\"" || !string())
				return 0
			ws()
			if (substr(s, pos, 1) != ":")
				return 0
			pos++
			if (!value())
				return 0
			ws()
			if (substr(s, pos, 1) == "}") {
				pos++
				return 1
			}
			if (substr(s, pos, 1) != ",")
				return 0
			pos++
		}
	}
	BEGIN {
		for (i = 1; i < 32; i++)
			ctrl = ctrl sprintf("%c", i)
	}
	{ s = (NR == 1) ? $0 : s "\n" $0 }
	END {
		n = length(s)
		pos = 1
		if (n == 0 || !value())
			exit 1
		ws()
		exit (pos <= n)
	}'
}

# Prints the members of the JSON array under key $2 in file $1, one per line
# (for arrays of numbers, as coli prints them: no blanks inside).
json_array() {
	sed -n "s/.*\"$2\":\\[\\([^]]*\\)\\].*/\\1/p" "$1" | tr ',' '\n' | sed '/^$/d'
}

# Prints the value of the JSON integer member $2 in file $1.
json_int() {
	sed -n "s/.*\"$2\":\\(-\\{0,1\\}[0-9][0-9]*\\).*/\\1/p" "$1"
}

# Prints the value of the JSON number member $2 in file $1 (integer or real;
# nothing if the member is missing or not a number, e.g. null).
json_number() {
	sed -n "s/.*\"$2\":\\(-\\{0,1\\}[0-9][0-9.eE+-]*\\).*/\\1/p" "$1"
}

# Exit status 0 if $1 is a number greater than 0.
positive() {
	[ -n "$1" ] && awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'
}

# Decodes a hex string to bytes on stdout.
unhex() {
	printf '%s' "$1" | awk '
	BEGIN { h = "0123456789abcdef" }
	{
		s = tolower($0)
		for (i = 1; i < length(s); i += 2) {
			v = (index(h, substr(s, i, 1)) - 1) * 16 + index(h, substr(s, i + 1, 1)) - 1
			printf "\\0%03o", v
		}
	}' | {
		read -r esc
		printf "%b" "$esc"
	}
}

# ---- the binary and version --------------------------------------------------

if [ ! -x "$COLI" ]; then
	echo "FAIL: $COLI is not built"
	exit 1
fi

hdr_string=$(sed -n 's/^#define COLI_VERSION_STRING "\(.*\)"$/\1/p' "$header")
hdr_major=$(sed -n 's/^#define COLI_VERSION_MAJOR \([0-9][0-9]*\)$/\1/p' "$header")
hdr_minor=$(sed -n 's/^#define COLI_VERSION_MINOR \([0-9][0-9]*\)$/\1/p' "$header")
hdr_patch=$(sed -n 's/^#define COLI_VERSION_PATCH \([0-9][0-9]*\)$/\1/p' "$header")
if [ -n "$hdr_string" ] && [ "$hdr_string" = "$hdr_major.$hdr_minor.$hdr_patch" ]; then
	pass "header version string $hdr_string matches its major/minor/patch"
else
	fail "header version string '$hdr_string' vs '$hdr_major.$hdr_minor.$hdr_patch'"
fi
pkg_version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$builddir/config.h" 2>/dev/null)
if [ "$pkg_version" = "$hdr_string" ]; then
	pass "package version $pkg_version matches the header"
else
	fail "package version '$pkg_version' differs from the header's '$hdr_string'"
fi

if run 0 "coli --version" "$COLI" --version; then
	if [ "$(cat "$out")" = "coli (libcolibri) $hdr_string" ]; then
		pass "coli --version"
	else
		fail "coli --version printed '$(cat "$out")'"
	fi
fi

# ---- help and usage errors -------------------------------------------------

if run 0 "coli --help" "$COLI" --help; then
	ok=1
	for c in generate logits tokenize detokenize info bench compare; do
		contains "$out" "$c" || { ok=0; fail "coli --help does not mention $c"; }
	done
	[ "$ok" = 1 ] && pass "coli --help"
fi

check_help() {
	cmd=$1
	shift
	if run 0 "coli $cmd --help" "$COLI" "$cmd" --help; then
		ok=1
		contains "$out" "Usage: coli $cmd" || { ok=0; fail "coli $cmd --help: no usage line"; }
		for o in "$@"; do
			contains "$out" "$o" || { ok=0; fail "coli $cmd --help does not mention $o"; }
		done
		[ -s "$err" ] && { ok=0; fail "coli $cmd --help wrote to stderr"; }
		[ "$ok" = 1 ] && pass "coli $cmd --help"
	fi
}
check_help generate --model --prompt --prompt-ids --max-tokens --temperature --top-k \
	--top-p --seed --weights --threads --context --no-special --format
check_help logits --model --prompt-ids --weights --threads --format
check_help tokenize --model --text --no-special --format
check_help detokenize --model --ids --skip-special --format
check_help info --model --weights --q4-group --format
check_help bench --model --weights --q4-group --threads --prompt-tokens --gen-tokens \
	--repetitions --seed --probe-mib --no-probe --format
check_help compare --model --weights --q4-group --against --prompt-ids --prompt-tokens \
	--gen-tokens --seed --threads --format

# usage_error DESCRIPTION WORD COMMAND...: must exit 2 and name WORD on stderr.
usage_error() {
	what=$1
	word=$2
	shift 2
	if run 2 "$what" "$@"; then
		if contains "$err" "$word"; then
			pass "$what"
		else
			fail "$what: stderr does not name '$word'"
		fi
	fi
}
usage_error "unknown subcommand" frobnicate "$COLI" frobnicate
usage_error "unknown top-level option" --frob "$COLI" --frob
usage_error "no subcommand" Usage "$COLI"
usage_error "unknown option" --bogus "$COLI" generate --bogus
usage_error "unknown option with value" --bogus "$COLI" tokenize --bogus=1 --text x
usage_error "option of another subcommand" --prompt "$COLI" tokenize --prompt x
usage_error "missing value" --model "$COLI" info --model
usage_error "bad integer" 12x "$COLI" generate --prompt-ids 1 --max-tokens 12x
usage_error "bad integer (=)" 12x "$COLI" generate --prompt-ids 1 --max-tokens=12x
usage_error "negative max-tokens" -3 "$COLI" generate --prompt-ids 1 --max-tokens -3
usage_error "bad real" abc "$COLI" generate --prompt-ids 1 --temperature abc
usage_error "top-p out of range" 1.5 "$COLI" generate --prompt-ids 1 --top-p=1.5
usage_error "bad seed" -1 "$COLI" generate --prompt-ids 1 --seed -1
usage_error "bad format" xml "$COLI" tokenize --text x --format=xml
usage_error "bad weights" f8 "$COLI" info --weights f8
usage_error "bad threads" many "$COLI" info --threads many
usage_error "threads out of range" 99999999999 "$COLI" info --threads 99999999999
usage_error "bad id list" 1,,2 "$COLI" detokenize --ids 1,,2
usage_error "both prompts" --prompt-ids "$COLI" generate --prompt x --prompt-ids 1
usage_error "no prompt" prompt "$COLI" generate --max-tokens 1
usage_error "flag with value" --no-special "$COLI" tokenize --text x --no-special=1
usage_error "stray argument" stray "$COLI" info stray
usage_error "bench: zero repetitions" --repetitions "$COLI" bench --repetitions 0
usage_error "bench: negative prompt tokens" -1 "$COLI" bench --prompt-tokens -1
usage_error "bench: negative gen tokens" -5 "$COLI" bench --gen-tokens=-5
usage_error "bench: nothing to measure" nothing "$COLI" bench --prompt-tokens 0 --gen-tokens 0
usage_error "bench: bad probe size" --probe-mib "$COLI" bench --probe-mib 0
usage_error "bench: probe size without probe" --no-probe "$COLI" bench --probe-mib 8 --no-probe
usage_error "bad weights (q5)" q5 "$COLI" bench --weights q5
usage_error "bad q4 group" 48 "$COLI" info --weights q4 --q4-group 48
usage_error "q4 group without q4" --q4-group "$COLI" generate --prompt-ids 1 --weights q8 --q4-group 64

# ---- runtime failures --------------------------------------------------------

missing=$tmp/no-such-model
if run 1 "missing model directory" "$COLI" info --model "$missing"; then
	if contains "$err" "$missing" && grep '^coli: ' "$err" >/dev/null; then
		pass "missing model directory names the path"
	else
		fail "missing model directory: message does not name $missing"
	fi
fi
if run 1 "missing model directory (generate)" "$COLI" generate --model="$missing" --prompt-ids 1; then
	if contains "$err" "$missing"; then
		pass "missing model directory (generate) names the path"
	else
		fail "missing model directory (generate): message does not name $missing"
	fi
fi

# ---- fixtures ------------------------------------------------------------------

for arch in qwen3_moe olmoe mixtral; do
	if [ ! -s "$data/$arch/reference.txt" ] || [ ! -s "$data/$arch/config.json" ]; then
		fail "fixture $data/$arch is missing or empty"
	fi
done

# The tokenizer cases of a fixture (add_special=False), through the CLI.
check_tokenize() {
	arch=$1
	model=$data/$arch
	ref=$model/reference.txt
	[ -s "$ref" ] || return
	ncase=0
	# Cases whose text survives a shell round trip (no NUL, no trailing newline).
	awk '$1 == "tok_case" && NF == 3 && $3 !~ /^(..)*00/ && $3 !~ /0[aA]$/ { print $2 }' "$ref" >"$tmp/cases"
	while read -r k; do
		hex=$(awk -v k="$k" '$1 == "tok_case" && $2 == k { print $3; exit }' "$ref")
		want=$(awk -v k="$k" '$1 == "tok_ids" && $2 == k { s = ""; for (i = 4; i <= NF; i++) s = s (i > 4 ? " " : "") $i; print s; exit }' "$ref")
		text=$(unhex "$hex"; printf x)
		text=${text%x}
		if run 0 "$arch tokenize case $k" "$COLI" tokenize --model "$model" --no-special --text="$text"; then
			got=$(cat "$out")
			if [ "$got" = "$want" ]; then
				pass "$arch tokenize case $k"
			else
				fail "$arch tokenize case $k: got '$got', want '$want'"
			fi
		fi
		# The default adds the special tokens (tok_ids_special).
		want_sp=$(awk -v k="$k" '$1 == "tok_ids_special" && $2 == k { s = ""; for (i = 4; i <= NF; i++) s = s (i > 4 ? " " : "") $i; print s; exit }' "$ref")
		if [ "$ncase" -lt 3 ] && [ -n "$want_sp" ] &&
			run 0 "$arch tokenize case $k (special)" "$COLI" tokenize --model "$model" --text="$text"; then
			got=$(cat "$out")
			if [ "$got" = "$want_sp" ]; then
				pass "$arch tokenize case $k with special tokens"
			else
				fail "$arch tokenize case $k with special tokens: got '$got', want '$want_sp'"
			fi
		fi
		ncase=$((ncase + 1))
		[ "$ncase" -ge 12 ] && break
	done <"$tmp/cases"
	if [ "$ncase" -eq 0 ]; then
		fail "$arch: no tok_case/tok_ids lines in $ref"
	fi
}

# The next-token logits of the first reference prompt, within 1e-4 of the
# range of the reference logits.
check_logits() {
	arch=$1
	weights=$2
	model=$data/$arch
	ref=$model/reference.txt
	[ -s "$ref" ] || return
	p=$(awk '$1 == "prompt" { print $2; exit }' "$ref")
	ids=$(awk -v p="$p" '$1 == "prompt" && $2 == p { s = ""; for (i = 4; i <= NF; i++) s = s (i > 4 ? "," : "") $i; print s; exit }' "$ref")
	if [ -z "$ids" ]; then
		fail "$arch: no prompt line in $ref"
		return
	fi
	awk -v p="$p" '$1 == "logits" && $2 == p { for (i = 4; i <= NF; i++) print $i; exit }' "$ref" >"$tmp/ref_logits"
	if [ ! -s "$tmp/ref_logits" ]; then
		fail "$arch: no logits line for prompt $p in $ref"
		return
	fi
	if run 0 "$arch logits ($weights)" "$COLI" logits --model "$model" --prompt-ids "$ids" --weights "$weights" --format json; then
		if ! json_valid <"$out"; then
			fail "$arch logits ($weights): output is not valid JSON"
			return
		fi
		json_array "$out" logits >"$tmp/got_logits"
		verdict=$(awk '
			NR == FNR { ref[NR] = $1 + 0; nref = NR; next }
			{ got[FNR] = $1 + 0; ngot = FNR }
			END {
				if (ngot != nref) { printf "count %d, expected %d\n", ngot, nref; exit }
				lo = ref[1]; hi = ref[1]
				for (i = 1; i <= nref; i++) { if (ref[i] < lo) lo = ref[i]; if (ref[i] > hi) hi = ref[i] }
				tol = 1e-4 * (hi - lo)
				worst = 0; at = 0
				for (i = 1; i <= nref; i++) {
					d = got[i] - ref[i]; if (d < 0) d = -d
					if (d > worst) { worst = d; at = i - 1 }
				}
				if (worst > tol) printf "max difference %g at id %d exceeds %g\n", worst, at, tol
				else print "ok"
			}' "$tmp/ref_logits" "$tmp/got_logits")
		if [ "$verdict" = ok ]; then
			pass "$arch logits ($weights) match the reference"
		else
			fail "$arch logits ($weights): $verdict"
		fi
	fi
}

for arch in qwen3_moe olmoe mixtral; do
	check_tokenize "$arch"
	check_logits "$arch" f32
done
check_logits qwen3_moe auto

# Both option spellings give the same result.
q=$data/qwen3_moe
if run 0 "tokenize --text VALUE" "$COLI" tokenize --model "$q" --text "In the beginning" --format json; then
	cp "$out" "$tmp/a"
	if run 0 "tokenize --text=VALUE" "$COLI" tokenize "--model=$q" "--text=In the beginning" --format=json; then
		if cmp -s "$tmp/a" "$out" && json_valid <"$out" && grep '^{"ids":\[[0-9,]*\]}$' "$out" >/dev/null; then
			pass "tokenize: --opt VALUE and --opt=VALUE agree, JSON output"
		else
			fail "tokenize: --opt VALUE and --opt=VALUE disagree or bad JSON: $(cat "$tmp/a") / $(cat "$out")"
		fi
		ids=$(json_array "$out" ids | paste -sd, -)
		if run 0 "detokenize" "$COLI" detokenize --model "$q" --ids "$ids" --skip-special; then
			if [ "$(cat "$out")" = "In the beginning" ]; then
				pass "detokenize(tokenize(text)) round trip"
			else
				fail "detokenize round trip gave '$(cat "$out")'"
			fi
		fi
		if run 0 "detokenize --format json" "$COLI" detokenize --model "$q" --ids "$ids" --skip-special --format json; then
			if json_valid <"$out" && [ "$(cat "$out")" = '{"text":"In the beginning"}' ]; then
				pass "detokenize --format json"
			else
				fail "detokenize --format json gave '$(cat "$out")'"
			fi
		fi
	fi
fi

# An id outside the vocabulary is a runtime failure naming the id.
if run 1 "logits with an out-of-range id" "$COLI" logits --model "$q" --prompt-ids 1,987654321; then
	if contains "$err" 987654321; then
		pass "logits with an out-of-range id names it"
	else
		fail "logits with an out-of-range id: message does not name it"
	fi
fi

# info: the numbers of config.json.
config_int() {
	tr ',{}' '\n' <"$q/config.json" |
		sed -n "s/^[[:space:]]*\"$1\"[[:space:]]*:[[:space:]]*\\([0-9][0-9]*\\).*/\\1/p" | head -n 1
}
if run 0 "info --format json" "$COLI" info --model "$q" --format json; then
	if json_valid <"$out"; then
		ok=1
		for key in num_hidden_layers:n_layers hidden_size:hidden_size num_attention_heads:n_heads \
			num_key_value_heads:n_kv_heads vocab_size:vocab_size num_experts:n_experts \
			num_experts_per_tok:n_experts_active moe_intermediate_size:moe_intermediate_size; do
			ck=${key%%:*}
			ik=${key#*:}
			want=$(config_int "$ck")
			if [ -z "$want" ] && [ "$ck" = num_experts ]; then
				want=$(config_int num_local_experts)
			fi
			got=$(json_int "$out" "$ik")
			if [ -z "$want" ] || [ "$want" != "$got" ]; then
				ok=0
				fail "info: $ik is '$got', config.json's $ck is '$want'"
			fi
		done
		[ "$ok" = 1 ] && pass "info --format json agrees with config.json"
	else
		fail "info --format json: not valid JSON"
	fi
fi
if run 0 "info (text)" "$COLI" info --model "$q"; then
	if contains "$out" "architecture:" && contains "$out" "Qwen3Moe"; then
		pass "info (text)"
	else
		fail "info (text): no architecture line"
	fi
fi
# The end-of-sequence ids: eos_token_id of config.json and
# generation_config.json, each a number or a list of numbers.
eos=$(cat "$q/config.json" "$q/generation_config.json" 2>/dev/null | tr -d ' \t\r\n' |
	sed 's/"eos_token_id":/\n&/g' | sed -n 's/^"eos_token_id":\[\{0,1\}\([0-9,]*\).*/\1/p' |
	tr ',' ' ')

# Greedy generation equals the reference continuation (a prefix of it when
# the model stops at its end-of-sequence token).
ref=$q/reference.txt
p=$(awk '$1 == "greedy" { print $2; exit }' "$ref" 2>/dev/null)
if [ -z "$p" ]; then
	fail "qwen3_moe: no greedy line in $ref"
else
	ids=$(awk -v p="$p" '$1 == "prompt" && $2 == p { s = ""; for (i = 4; i <= NF; i++) s = s (i > 4 ? "," : "") $i; print s; exit }' "$ref")
	want=$(awk -v p="$p" '$1 == "greedy" && $2 == p { s = ""; for (i = 4; i <= NF; i++) s = s (i > 4 ? "," : "") $i; print s; exit }' "$ref")
	nwant=$(awk -v p="$p" '$1 == "greedy" && $2 == p { print $3; exit }' "$ref")
	if run 0 "generate greedy" "$COLI" generate --model "$q" --prompt-ids "$ids" --temperature 0 \
		--max-tokens "$nwant" --weights f32 --format json; then
		if ! json_valid <"$out"; then
			fail "generate --format json: not valid JSON: $(cat "$out")"
		else
			got=$(json_array "$out" tokens | paste -sd, -)
			got_prompt=$(json_array "$out" prompt_ids | paste -sd, -)
			verdict=$(awk -v got="$got" -v want="$want" -v eos="$eos" 'BEGIN {
				ng = split(got, g, ","); nw = split(want, w, ",")
				ne = split(eos, e, " "); for (i = 1; i <= ne; i++) is_eos[e[i]] = 1
				if (ng == 0) { print "no tokens"; exit }
				for (i = 1; i <= ng; i++)
					if (i > nw || g[i] != w[i]) { printf "token %d differs\n", i - 1; exit }
				if (ng < nw && !(g[ng] in is_eos) && !(w[ng + 1] in is_eos)) { printf "stopped after %d tokens without end-of-sequence\n", ng; exit }
				print "ok"
			}')
			if [ "$verdict" = ok ]; then
				pass "generate greedy equals the reference"
			else
				fail "generate greedy: $verdict: got $got, want $want"
			fi
			if [ "$got_prompt" = "$ids" ]; then
				pass "generate json prompt_ids"
			else
				fail "generate json prompt_ids '$got_prompt', expected '$ids'"
			fi
			ok=1
			for key in '"model":' '"text":' '"prefill_tok_s":' '"decode_tok_s":' \
				'"prefill_tokens":' '"decode_tokens":' '"seed":'; do
				contains "$out" "$key" || { ok=0; fail "generate json lacks $key"; }
			done
			[ "$ok" = 1 ] && pass "generate json has every member"
		fi
	fi
fi

# Text output streams the tokens, then a newline; speeds go to stderr.
# The same seed gives the same text.
if run 0 "generate (text, sampled)" "$COLI" generate --model "$q" --prompt "In the beginning" \
	--max-tokens 8 --seed 7 --temperature 1; then
	cp "$out" "$tmp/first"
	if grep '^prefill: [0-9]* tok, .* tok/s; decode: [0-9]* tok, .* tok/s$' "$err" >/dev/null; then
		pass "generate (text) reports speeds on stderr"
	else
		fail "generate (text): no speed line on stderr"
	fi
	if run 0 "generate (text, same seed)" "$COLI" generate --model "$q" --prompt "In the beginning" \
		--max-tokens 8 --seed=7 --temperature=1; then
		if cmp -s "$tmp/first" "$out"; then
			pass "generate: same seed, same text"
		else
			fail "generate: same seed, different text"
		fi
	fi
fi

# Without --model the demo model is found (here: the one in the source tree,
# or $COLI_DEMO_MODEL).
if run 0 "generate with the demo model" "$COLI" generate --prompt "In the beginning" \
	--max-tokens 8 --temperature 0 --format json; then
	if json_valid <"$out" && grep '"model":"[^"]*/demo"' "$out" >/dev/null &&
		[ -n "$(json_array "$out" tokens)" ]; then
		pass "generate with the demo model"
	else
		fail "generate with the demo model: $(cat "$out")"
	fi
fi

# ---- coli bench ------------------------------------------------------------------

# A short run on the fixture: every member present, the speeds and the probe
# positive, the decode speed timed around coli_eval no faster than the
# library's own timing inside it.
if run 0 "bench --format json" "$COLI" bench --model "$q" --prompt-tokens 16 --gen-tokens 8 \
	--repetitions 2 --probe-mib 64 --format json; then
	if ! json_valid <"$out"; then
		fail "bench --format json: not valid JSON: $(cat "$out")"
	else
		ok=1
		for key in model weights threads prompt_tokens gen_tokens repetitions prefill_tok_s \
			prefill_tok_s_sd decode_tok_s decode_tok_s_sd weight_bytes_per_token \
			weight_bytes_source mem_bw_gbs achieved_gbs bw_fraction; do
			contains "$out" "\"$key\":" || { ok=0; fail "bench json lacks $key"; }
		done
		[ "$ok" = 1 ] && pass "bench json has every member"
		ok=1
		for key in threads prefill_tok_s decode_tok_s weight_bytes_per_token mem_bw_gbs \
			achieved_gbs bw_fraction; do
			v=$(json_number "$out" "$key")
			positive "$v" || { ok=0; fail "bench json: $key is '$v', expected a positive number"; }
		done
		for key in prefill_tok_s_sd decode_tok_s_sd; do
			v=$(json_number "$out" "$key")
			if [ -z "$v" ] || ! awk -v v="$v" 'BEGIN { exit !(v + 0 >= 0) }'; then
				ok=0
				fail "bench json: $key is '$v', expected a number >= 0"
			fi
		done
		[ "$ok" = 1 ] && pass "bench json: speeds, bytes and bandwidth are positive"
		if [ "$(json_int "$out" prompt_tokens)" = 16 ] && [ "$(json_int "$out" gen_tokens)" = 8 ] &&
			[ "$(json_int "$out" repetitions)" = 2 ] && [ "$(json_int "$out" mem_bw_mib)" = 64 ] &&
			[ "$(json_array "$out" decode_samples | wc -l)" -eq 2 ] &&
			[ "$(json_array "$out" prefill_samples | wc -l)" -eq 2 ]; then
			pass "bench json echoes its settings, one sample per repetition"
		else
			fail "bench json settings or samples: $(cat "$out")"
		fi
		# achieved = decode tok/s * bytes per token; fraction = achieved / bandwidth.
		verdict=$(awk -v tg="$(json_number "$out" decode_tok_s)" \
			-v lib="$(json_number "$out" decode_tok_s_lib)" \
			-v wb="$(json_number "$out" weight_bytes_per_token)" \
			-v ach="$(json_number "$out" achieved_gbs)" -v bw="$(json_number "$out" mem_bw_gbs)" \
			-v fr="$(json_number "$out" bw_fraction)" 'BEGIN {
				if (!(lib + 0 > 0)) { print "no library decode speed"; exit }
				if (tg > lib * 1.01 + 0.01) { print "decode faster than the library timed it"; exit }
				want = tg * wb / 1e9
				if (ach < want * 0.99 - 0.001 || ach > want * 1.01 + 0.001) { print "achieved_gbs " ach " vs " want; exit }
				want = ach / bw
				if (fr < want * 0.99 - 0.0001 || fr > want * 1.01 + 0.0001) { print "bw_fraction " fr " vs " want; exit }
				print "ok"
			}')
		if [ "$verdict" = ok ]; then
			pass "bench json: decode speed, achieved bandwidth and fraction agree"
		else
			fail "bench json: $verdict: $(cat "$out")"
		fi
		src=$(sed -n 's/.*"weight_bytes_source":"\([a-z]*\)".*/\1/p' "$out")
		case $src in
		measured | estimated) pass "bench json: weight_bytes_source is $src" ;;
		*) fail "bench json: weight_bytes_source '$src'" ;;
		esac
	fi
fi
if run 0 "bench (text, no probe)" "$COLI" bench --model "$q" --prompt-tokens 4 --gen-tokens 2 \
	--repetitions 1 --no-probe; then
	if grep -E '^\| qwen3_moe +\|.*\| +pp4 \| +[0-9.]+ ' "$out" >/dev/null &&
		grep -E '^\| qwen3_moe +\|.*\| +tg2 \| +[0-9.]+ ' "$out" >/dev/null &&
		contains "$out" "not measured"; then
		pass "bench (text) prints the table"
	else
		fail "bench (text): $(cat "$out")"
	fi
fi
if run 0 "bench (decode only, json)" "$COLI" bench --model "$q" --prompt-tokens 0 --gen-tokens 3 \
	--repetitions 1 --no-probe --format json; then
	if json_valid <"$out" && contains "$out" '"prefill_tok_s":null' &&
		contains "$out" '"mem_bw_gbs":null' && positive "$(json_number "$out" decode_tok_s)"; then
		pass "bench without prefill or probe reports null for them"
	else
		fail "bench (decode only): $(cat "$out")"
	fi
fi
if run 1 "bench with a missing model" "$COLI" bench --model "$missing" --no-probe \
	--prompt-tokens 1 --gen-tokens 1 --repetitions 1; then
	if contains "$err" "$missing"; then
		pass "bench with a missing model names it"
	else
		fail "bench with a missing model: message does not name $missing"
	fi
fi

# ---- make-synthetic ----------------------------------------------------------

# A tiny random checkpoint: coli must see exactly its dimensions, count its
# parameters as computed here, and run it.
synth=$builddir/tools/make-synthetic
if [ ! -x "$synth" ]; then
	fail "$synth is not built"
elif run 0 "make-synthetic (tiny)" "$synth" --out "$tmp/synthetic" --hidden 64 --layers 2 \
	--experts 4 --active 2 --moe-inter 32 --heads 4 --kv-heads 2 --head-dim 16 --vocab 100 \
	--seed 3; then
	sdir=$tmp/synthetic
	if [ -s "$sdir/config.json" ] && [ -s "$sdir/generation_config.json" ] &&
		[ -s "$sdir/model.safetensors" ] && [ ! -e "$sdir/model.safetensors.partial" ]; then
		pass "make-synthetic writes config.json, generation_config.json, model.safetensors"
	else
		fail "make-synthetic: files missing in $sdir: $(ls "$sdir")"
	fi
	# embedding and output V*H; per layer: two norms H, q and o 2*H*heads*hd,
	# k and v 2*H*kv*hd, q/k norms 2*hd, router E*H, experts E*3*I*H; final norm H.
	want_params=$(awk 'BEGIN {
		H = 64; L = 2; E = 4; I = 32; nh = 4; kv = 2; hd = 16; V = 100
		layer = 2 * H + 2 * H * nh * hd + 2 * H * kv * hd + 2 * hd + E * H + E * 3 * I * H
		printf "%d\n", 2 * V * H + L * layer + H
	}')
	# bf16: two bytes a parameter, after the 8-byte length and the header.
	hlen=$(od -An -tu1 -N8 "$sdir/model.safetensors" |
		awk '{ for (i = NF; i >= 1; i--) v = v * 256 + $i } END { printf "%d\n", v }')
	size=$(wc -c <"$sdir/model.safetensors" | tr -d ' ')
	if [ "$((size - 8 - hlen))" -eq "$((2 * want_params))" ] && [ "$((hlen % 8))" -eq 0 ]; then
		pass "make-synthetic: safetensors size matches $want_params bf16 parameters"
	else
		fail "make-synthetic: file of $size bytes, header $hlen, for $want_params parameters"
	fi
	if run 0 "info on the synthetic model" "$COLI" info --model "$sdir" --format json; then
		ok=1
		for kv in n_layers:2 n_moe_layers:2 hidden_size:64 n_heads:4 n_kv_heads:2 head_dim:16 \
			vocab_size:100 n_experts:4 n_experts_active:2 moe_intermediate_size:32 \
			n_params_total:"$want_params"; do
			k=${kv%%:*}
			want=${kv#*:}
			got=$(json_int "$out" "$k")
			[ "$got" = "$want" ] || { ok=0; fail "synthetic info: $k is '$got', expected $want"; }
		done
		contains "$out" '"architecture":"Qwen3MoeForCausalLM"' ||
			{ ok=0; fail "synthetic info: architecture"; }
		[ "$ok" = 1 ] && pass "info reports the synthetic model's dimensions and parameters"
	fi
	if run 0 "generate on the synthetic model" "$COLI" generate --model "$sdir" \
		--prompt-ids 1,2,3 --max-tokens 4 --temperature 0 --format json; then
		n=$(json_array "$out" tokens | wc -l)
		bad=$(json_array "$out" tokens | awk '$1 < 0 || $1 >= 100' | wc -l)
		if json_valid <"$out" && [ "$n" -ge 1 ] && [ "$n" -le 4 ] && [ "$bad" -eq 0 ]; then
			pass "generate runs the synthetic model"
		else
			fail "generate on the synthetic model: $(cat "$out")"
		fi
		cp "$out" "$tmp/synthetic.gen"
		# The same seed gives the same checkpoint, so the same tokens.
		if run 0 "make-synthetic (same seed)" "$synth" --out "$tmp/synthetic2" --hidden 64 \
			--layers 2 --experts 4 --active 2 --moe-inter 32 --heads 4 --kv-heads 2 \
			--head-dim 16 --vocab 100 --seed 3 &&
			cmp -s "$sdir/model.safetensors" "$tmp/synthetic2/model.safetensors"; then
			pass "make-synthetic is deterministic"
		else
			fail "make-synthetic: the same seed gave a different file"
		fi
	fi
	rm -rf "$tmp/synthetic2"
fi
usage_error "make-synthetic without --out" --out "$synth" --layers 2
usage_error "make-synthetic: more active than experts" --active "$synth" --out "$tmp/x" \
	--experts 2 --active 3
usage_error "make-synthetic: bad dtype" f16 "$synth" --out "$tmp/x" --dtype f16
usage_error "make-synthetic: unknown option" --frob "$synth" --out "$tmp/x" --frob 1
if run 1 "make-synthetic into a file" "$synth" --out "$err" --layers 1; then
	pass "make-synthetic fails when --out is not a directory"
fi

# ---- compare ----------------------------------------------------------------
# A format against itself agrees everywhere with zero divergence; q8 against
# f32 reports sane numbers; a missing --weights is a usage error.
if run 0 "compare f32 against f32" "$COLI" compare --model "$data/qwen3_moe" --weights f32 \
	--against f32 --prompt-tokens 12 --gen-tokens 6 --format json; then
	if json_valid <"$out" && [ "$(json_number "$out" top1_agreement)" = "1.0000" ] &&
		[ "$(json_number "$out" mean_kl)" = "0" ] && [ "$(json_int "$out" greedy_agreement)" = "6" ]; then
		pass "compare: a format agrees with itself"
	else
		fail "compare f32 against f32: $(cat "$out")"
	fi
fi
if run 0 "compare q8 against f32" "$COLI" compare --model "$data/olmoe" --weights q8 \
	--prompt-ids 1,5,9,200,31,7,7,64 --gen-tokens 4 --format json; then
	t=$(json_number "$out" top1_agreement)
	k=$(json_number "$out" mean_kl)
	if json_valid <"$out" && [ "$(json_int "$out" positions)" = "8" ] &&
		awk -v t="$t" -v k="$k" 'BEGIN { exit !(t >= 0 && t <= 1 && k > 0 && k < 1) }'; then
		pass "compare: q8 against f32 gives an agreement in [0, 1] and a small positive KL"
	else
		fail "compare q8: $(cat "$out")"
	fi
fi
usage_error "compare without --weights" --weights "$COLI" compare --model "$data/olmoe"
usage_error "compare: bad --against" --against "$COLI" compare --model "$data/olmoe" --weights q4 \
	--against q3

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
