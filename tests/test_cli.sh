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

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_cli


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

# --version as GNU tools print it: name and version, copyright, the licence
# of COPYING, the no-warranty lines, then the features compiled in.
if run 0 "coli --version" "$COLI" --version; then
	cp "$out" "$tmp/version"
	if [ "$(sed -n 1p "$out")" = "coli (libcolibri) $hdr_string" ]; then
		pass "coli --version: first line"
	else
		fail "coli --version: first line is '$(sed -n 1p "$out")'"
	fi
	if [ "$(sed -n 1p "$srcdir/COPYING")" = "MIT License" ] &&
		sed -n 2p "$out" | grep '^Copyright (C) [0-9][0-9]* ' >/dev/null &&
		[ "$(sed -n 3p "$out")" = "License MIT: <https://opensource.org/licenses/MIT>." ] &&
		[ "$(sed -n 4p "$out")" = "This is free software: you are free to change and redistribute it." ] &&
		[ "$(sed -n 5p "$out")" = "There is NO WARRANTY, to the extent permitted by law." ]; then
		pass "coli --version: copyright, MIT licence (as COPYING), no warranty"
	else
		fail "coli --version: copyright block: $(cat "$out")"
	fi
	# No GPU tier is configured unless config.h names its vendor and
	# targets ("cuda sm_80,sm_90").
	want_tier=$(sed -n 's/^#define COLI_GPU_TARGETS "\(.*\)"$/\1/p' "$builddir/config.h" 2>/dev/null)
	want_tier=${want_tier:-none}
	if [ "$(sed -n '$=' "$out")" = 6 ] &&
		sed -n 6p "$out" | grep "^Features: CPU\(, threads\)\{0,1\} (GPU tier: $want_tier)\$" >/dev/null; then
		pass "coli --version: features line (GPU tier $want_tier)"
	else
		fail "coli --version: features line '$(sed -n 6p "$out")', expected GPU tier $want_tier"
	fi
	for v in "-V" "generate --version" "bench -V"; do
		# shellcheck disable=SC2086 # $v is split into words on purpose
		if run 0 "coli $v" "$COLI" $v && cmp -s "$out" "$tmp/version"; then
			pass "coli $v prints the same as coli --version"
		else
			fail "coli $v: $(cat "$out")"
		fi
	done
fi

# ---- help and usage errors -------------------------------------------------

if run 0 "coli --help" "$COLI" --help; then
	ok=1
	for c in generate logits tokenize detokenize info bench compare convert; do
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

# ---- help, options and short names ---------------------------------------------

commands="generate logits tokenize detokenize info bench compare convert"

# `coli help` prints what `coli --help` prints, `coli help COMMAND` what
# `coli COMMAND --help` prints.
if run 0 "coli help" "$COLI" help; then
	cp "$out" "$tmp/help_main"
	if run 0 "coli --help" "$COLI" --help && cmp -s "$out" "$tmp/help_main" &&
		contains "$out" "coli help [COMMAND]"; then
		pass "coli help prints coli --help, which mentions coli help"
	else
		fail "coli help differs from coli --help or does not mention 'coli help [COMMAND]'"
	fi
fi
for c in $commands; do
	"$COLI" "$c" --help >"$tmp/help_$c" 2>/dev/null
	if run 0 "coli help $c" "$COLI" help "$c"; then
		if [ -s "$out" ] && cmp -s "$out" "$tmp/help_$c"; then
			pass "coli help $c prints coli $c --help"
		else
			fail "coli help $c differs from coli $c --help"
		fi
	fi
done
usage_error "coli help with an unknown command" frob "$COLI" help frob
usage_error "coli help with two commands" info "$COLI" help generate info

# The option lines of a help text, one per option: "LONG SHORT META COLUMN"
# (SHORT and META "-" when there is none, COLUMN 0 when the description
# starts on the next line). An option line is "  -x, --long META  text" or
# "      --long META  text".
help_options() {
	awk '
	match($0, /^  (-[A-Za-z], |    )--[a-z0-9-]+( [A-Z][A-Z,.]*)?/) {
		head = substr($0, 1, RLENGTH)
		rest = substr($0, RLENGTH + 1)
		short = substr(head, 3, 1) == "-" ? substr(head, 3, 2) : "-"
		n = split(substr(head, 7), w, " ")
		meta = n > 1 ? w[2] : "-"
		col = 0
		if (rest != "") {
			if (match(rest, /^  +[^ ]/))
				col = length(head) + RLENGTH
			else
				col = -1
		}
		print w[1], short, meta, col
	}' "$1"
}

# The short names, as llama.cpp and GNU tools have them.
short_of() {
	case $1 in
	--model) s=-m ;;
	--prompt) s=-p ;;
	--max-tokens) s=-n ;;
	--threads) s=-t ;;
	--seed) s=-s ;;
	--context) s=-c ;;
	--prompt-file) s=-f ;;
	--help) s=-h ;;
	--version) s=-V ;;
	*) s=- ;;
	esac
	printf '%s\n' "$s"
}

: >"$tmp/all_options"
for c in $commands; do
	help_options "$tmp/help_$c" >"$tmp/opts_$c"
	cat "$tmp/opts_$c" >>"$tmp/all_options"
done
sort -u "$tmp/all_options" | awk '{ print $1, $2, $3 }' | sort -u >"$tmp/universe"

for c in $commands; do
	h=$tmp/help_$c
	o=$tmp/opts_$c
	ok=1
	# Usage names --model as optional: every command defaults to the demo.
	sed -n 1p "$h" | grep -F "Usage: coli $c [--model DIR]" >/dev/null ||
		{ ok=0; fail "coli $c --help: usage line '$(sed -n 1p "$h")' does not mark --model optional"; }
	long=$(awk 'length($0) > 80' "$h")
	[ -z "$long" ] || { ok=0; fail "coli $c --help: lines over 80 columns: $long"; }
	for must in --model --help --version; do
		grep "^$must " "$o" >/dev/null || { ok=0; fail "coli $c --help does not list $must"; }
	done
	# One column for every description, after at least two blanks.
	cols=$(awk '$4 != 0 { print $4 }' "$o" | sort -u)
	if [ "$(echo "$cols" | wc -l)" -ne 1 ] || [ "$cols" = -1 ]; then
		ok=0
		fail "coli $c --help: descriptions are not aligned in one column ($(echo "$cols" | tr '\n' ' '))"
	fi
	while read -r l s m _; do
		want=$(short_of "$l")
		[ "$s" = "$want" ] || { ok=0; fail "coli $c --help: $l has short name '$s', expected '$want'"; }
	done <"$o"
	[ "$ok" = 1 ] && pass "coli $c --help: usage, short names, alignment, width"

	# The parser takes exactly the options that the help lists, by both
	# names; any other option of the tool is unknown to this command.
	ok=0
	bad=0
	while read -r l s m; do
		if [ "$m" = - ]; then
			a1=$l
			a2=$s
		else
			a1=$l=x
			a2=${s}x
		fi
		if grep "^$l " "$o" >/dev/null; then
			"$COLI" "$c" "$a1" --help >/dev/null 2>&1 || { bad=1; fail "coli $c rejects $a1, which its help lists"; }
			if [ "$s" != - ]; then
				"$COLI" "$c" "$a2" --help >/dev/null 2>&1 || { bad=1; fail "coli $c rejects $a2, which its help lists"; }
			fi
			ok=$((ok + 1))
		else
			"$COLI" "$c" "$a1" --help >/dev/null 2>"$err"
			if [ $? -ne 2 ] || ! contains "$err" "unknown option '$l'"; then
				bad=1
				fail "coli $c accepts $l, which its help does not list"
			fi
		fi
	done <"$tmp/universe"
	for s in -m -p -n -t -s -c -f; do
		grep " $s " "$o" >/dev/null && continue
		"$COLI" "$c" "${s}1" --help >/dev/null 2>"$err"
		if [ $? -ne 2 ] || ! contains "$err" "unknown option '$s'"; then
			bad=1
			fail "coli $c accepts $s, which its help does not list"
		fi
	done
	[ "$bad" = 0 ] && [ "$ok" -gt 3 ] && pass "coli $c accepts exactly the $ok options of its help"
done

# Short options: "-x VALUE" and "-xVALUE" mean "--long VALUE".
usage_error "short option without its value" "'-p'" "$COLI" generate -p
usage_error "short option of another command" "'-p'" "$COLI" tokenize -p x
usage_error "short flag with a value" "-hx" "$COLI" info -hx
usage_error "short option: bad value" 12x "$COLI" generate --prompt-ids 1 -n 12x

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

# Short options give what the long ones give.
if run 0 "generate (long options)" "$COLI" generate --model "$q" --prompt "In the beginning" \
	--max-tokens 5 --seed 3 --temperature 1 --threads 1 --context 64 --format json; then
	cp "$out" "$tmp/long.json"
	# same_as_long DESCRIPTION: $out against the long options' output.
	same_as_long() {
		if [ "$(json_array "$out" prompt_ids)" = "$(json_array "$tmp/long.json" prompt_ids)" ] &&
			[ "$(json_array "$out" tokens)" = "$(json_array "$tmp/long.json" tokens)" ] &&
			[ "$(json_int "$out" seed)" = 3 ] && [ -n "$(json_array "$out" tokens)" ]; then
			pass "generate $1 equals the long options"
		else
			fail "generate $1: $(cat "$out") vs $(cat "$tmp/long.json")"
		fi
	}
	if run 0 "generate (short options)" "$COLI" generate -m "$q" -p "In the beginning" -n 5 \
		-s 3 --temperature 1 -t 1 -c 64 --format json; then
		same_as_long "-m DIR -p TEXT -n 5 -s 3 -t 1 -c 64"
	fi
	if run 0 "generate (short options, joined values)" "$COLI" generate "-m$q" "-pIn the beginning" \
		-n5 -s3 --temperature 1 -t1 -c64 --format json; then
		same_as_long "-mDIR -pTEXT -n5 -s3 -t1 -c64"
	fi
fi
if run 0 "tokenize -m" "$COLI" tokenize -m "$q" --text "In the beginning"; then
	cp "$out" "$tmp/short"
	if run 0 "tokenize --model" "$COLI" tokenize --model "$q" --text "In the beginning" &&
		cmp -s "$out" "$tmp/short"; then
		pass "tokenize -m equals --model"
	else
		fail "tokenize -m differs from --model"
	fi
fi
if run 0 "generate -n 2" "$COLI" generate -m "$q" --prompt-ids 1,2,3 -n 2 --temperature 0 --format json &&
	[ "$(json_int "$out" decode_tokens)" -le 2 ] && [ "$(json_array "$out" tokens | wc -l)" -le 2 ] &&
	[ "$(json_array "$out" tokens | wc -l)" -ge 1 ]; then
	pass "generate -n 2 generates at most 2 tokens"
else
	fail "generate -n 2: $(cat "$out")"
fi

# An empty prompt is a usage error, however it is given.
usage_error "empty --prompt" empty "$COLI" generate --model "$q" --prompt ""
usage_error "empty --prompt=" empty "$COLI" generate --model "$q" --prompt=
usage_error "empty -p" empty "$COLI" generate --model "$q" -p ""

# --prompt-file: the file's bytes are the prompt, trailing newline included.
printf 'In the beginning\n' >"$tmp/prompt.txt"
nl_text=$(printf 'In the beginning\nx')
nl_text=${nl_text%x}
if run 0 "tokenize (text with newline)" "$COLI" tokenize --model "$q" --text "$nl_text" --format json; then
	want_nl=$(json_array "$out" ids | paste -sd, -)
	run 0 "tokenize (text without newline)" "$COLI" tokenize --model "$q" --text "In the beginning" --format json
	want_plain=$(json_array "$out" ids | paste -sd, -)
	if [ -n "$want_nl" ] && [ "$want_nl" != "$want_plain" ]; then
		pass "the tokenizer tells the newline apart"
	else
		fail "tokenize with and without a newline: '$want_nl' vs '$want_plain'"
	fi
	if run 0 "generate --prompt-file" "$COLI" generate --model "$q" --prompt-file "$tmp/prompt.txt" \
		-n 2 --temperature 0 --format json; then
		got=$(json_array "$out" prompt_ids | paste -sd, -)
		if [ "$got" = "$want_nl" ]; then
			pass "generate --prompt-file: the prompt is the file, newline included"
		else
			fail "generate --prompt-file: prompt ids '$got', expected '$want_nl'"
		fi
	fi
	"$COLI" generate --model "$q" --prompt-file - -n 2 --temperature 0 --format json \
		<"$tmp/prompt.txt" >"$out" 2>"$err"
	status=$?
	got=$(json_array "$out" prompt_ids | paste -sd, -)
	if [ "$status" -eq 0 ] && [ "$got" = "$want_nl" ]; then
		pass "generate --prompt-file - reads standard input"
	else
		fail "generate --prompt-file -: status $status, prompt ids '$got', expected '$want_nl'"
	fi
fi
if run 1 "generate --prompt-file (missing)" "$COLI" generate --model "$q" --prompt-file "$tmp/no-such-file"; then
	if grep -F "coli generate: $tmp/no-such-file: No such file or directory" "$err" >/dev/null; then
		pass "generate --prompt-file (missing) names the file and the error"
	else
		fail "generate --prompt-file (missing): $(cat "$err")"
	fi
fi
if run 1 "generate --prompt-file (a directory)" "$COLI" generate --model "$q" --prompt-file "$tmp"; then
	if contains "$err" "$tmp"; then
		pass "generate --prompt-file (a directory) names it"
	else
		fail "generate --prompt-file (a directory): $(cat "$err")"
	fi
fi
: >"$tmp/empty.txt"
usage_error "generate --prompt-file (empty)" "$tmp/empty.txt" "$COLI" generate --model "$q" \
	--prompt-file "$tmp/empty.txt"
usage_error "generate --prompt-file - (empty input)" "empty" "$COLI" generate --model "$q" --prompt-file -
usage_error "--prompt-file with --prompt" --prompt-file "$COLI" generate --prompt x --prompt-file "$tmp/prompt.txt"
usage_error "--prompt-file with --prompt-ids" --prompt-ids "$COLI" generate --prompt-file "$tmp/prompt.txt" \
	--prompt-ids 1
# 64 MiB and one byte: refused, without reading it into the model (sparse file).
if dd if=/dev/zero of="$tmp/big.txt" bs=1 count=1 seek=67108864 2>/dev/null &&
	run 1 "generate --prompt-file (too large)" "$COLI" generate --model "$q" --prompt-file "$tmp/big.txt"; then
	if contains "$err" "$tmp/big.txt" && contains "$err" "64 MiB"; then
		pass "generate --prompt-file refuses a file over 64 MiB"
	else
		fail "generate --prompt-file (too large): $(cat "$err")"
	fi
fi
rm -f "$tmp/big.txt"

# More threads than online cores: allowed, with one warning line.
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null)
if [ -z "$cores" ] || [ "$cores" -ge 1024 ]; then
	echo "SKIP: the threads warning needs fewer than 1024 online cores (have '$cores')"
else
	many=$((cores + 1))
	if run 0 "info --threads $many" "$COLI" info --model "$q" --threads "$many"; then
		if [ "$(grep -c warning "$err")" = 1 ] &&
			grep -F "coli info: warning: $many threads exceed the $cores online cores" "$err" >/dev/null; then
			pass "info --threads above the cores warns once"
		else
			fail "info --threads $many: stderr $(cat "$err")"
		fi
	fi
	if run 0 "generate -t $many" "$COLI" generate --model "$q" --prompt-ids 1 -n 1 -t "$many" &&
		grep -F "coli generate: warning: $many threads exceed the $cores online cores" "$err" >/dev/null; then
		pass "generate -t above the cores warns"
	else
		fail "generate -t $many: no warning: $(cat "$err")"
	fi
	if run 0 "info --threads $cores" "$COLI" info --model "$q" --threads "$cores" && ! contains "$err" warning; then
		pass "info --threads at the number of cores does not warn"
	else
		fail "info --threads $cores warned: $(cat "$err")"
	fi
fi

# A failed write on standard output is an error (exit 1) naming it.
if [ ! -w /dev/full ]; then
	echo "SKIP: no /dev/full to test write errors"
else
	for cmdline in "--help" "help" "help generate" "--version" "info --help" "generate --version" \
		"tokenize -m $q --text x" "generate -m $q --prompt-ids 1,2 -n 2" "info -m $q" \
		"generate -m $q --prompt-ids 1,2 -n 2 --format json"; do
		# shellcheck disable=SC2086 # the words are the arguments
		"$COLI" $cmdline >/dev/full 2>"$err"
		status=$?
		if [ "$status" -eq 1 ] && contains "$err" "standard output"; then
			pass "coli $cmdline > /dev/full fails naming standard output"
		else
			fail "coli $cmdline > /dev/full: status $status, stderr $(cat "$err")"
		fi
	done
fi

# ---- the demo model -------------------------------------------------------------

# Without --model the demo model is found: $COLI_DEMO_MODEL, the installed
# one, or the data/demo of the build tree the running coli lies in (which
# a VPATH build lacks: there the test points COLI_DEMO_MODEL at the source).
demo_src=$srcdir/data/demo
if [ -z "${COLI_DEMO_MODEL:-}" ] && [ ! -f "$builddir/data/demo/config.json" ]; then
	COLI_DEMO_MODEL=$demo_src
	export COLI_DEMO_MODEL
fi
if run 0 "generate with the demo model" "$COLI" generate --prompt "In the beginning" \
	--max-tokens 8 --temperature 0 --format json; then
	if json_valid <"$out" && grep '"model":"[^"]*/demo"' "$out" >/dev/null &&
		[ -n "$(json_array "$out" tokens)" ]; then
		pass "generate with the demo model"
	else
		fail "generate with the demo model: $(cat "$out")"
	fi
fi

# No path of the build is compiled into coli: the installed tool must not
# look into (or name) the tree it was built in. The ELF is .libs/coli (or
# .libs/lt-coli) behind the libtool wrapper, else ./coli itself. Its debug
# information names the build directory, so the whole file is checked only
# once stripped; the program's own strings are checked in any case. The
# installation's own paths may lie inside the tree (distcheck installs into
# it): the demo's pkgdatadir, and libdir as the installed run path.
abs_src=$(cd "$srcdir" && pwd)
abs_build=$(cd "$builddir" && pwd)
pkgdatadir=${COLI_TEST_PKGDATADIR:-}
libdir=${COLI_TEST_LIBDIR:-$pkgdatadir}
elf=
for f in "$builddir/.libs/lt-coli" "$builddir/.libs/coli" "$builddir/coli"; do
	if [ -f "$f" ] && [ "$(od -An -c -N4 "$f" | tr -d ' ')" = '177ELF' ]; then
		elf=$f
		break
	fi
done
# binary_strings FILE: its runs of printable characters, one per line.
binary_strings() {
	tr -c '\040-\176' '\n' <"$1" | grep '....'
}
if [ -z "$elf" ]; then
	fail "no coli ELF binary found under $builddir"
elif [ -z "$pkgdatadir" ]; then
	fail "COLI_TEST_PKGDATADIR is not set (make check sets it)"
else
	found=$(binary_strings "$elf" | grep -F -e "$abs_src/data" -e "$abs_build/data" |
		grep -v -F -e "$pkgdatadir" -e "$libdir")
	if [ -z "$found" ]; then
		pass "coli has no data path of the source or build tree compiled in"
	else
		fail "coli embeds a build path: $found"
	fi
	if command -v strip >/dev/null 2>&1 && cp "$elf" "$tmp/coli-stripped" && strip "$tmp/coli-stripped"; then
		found=$(binary_strings "$tmp/coli-stripped" | grep -F -e "$abs_src" -e "$abs_build" |
			grep -v -F -e "$pkgdatadir" -e "$libdir")
		if [ -z "$found" ]; then
			pass "stripped coli names neither $abs_src nor $abs_build"
		else
			fail "stripped coli embeds a build path: $found"
		fi
	else
		echo "SKIP: no strip to check the stripped binary"
	fi

	# The real binary, copied elsewhere: with no demo installed and none
	# beside it, the message names the installed path and the way out; a
	# data/demo beside it (as in a build tree) is found.
	mkdir -p "$tmp/tree/.libs" "$tmp/tree/data" "$tmp/alone"
	cp "$elf" "$tmp/alone/coli"
	cp "$elf" "$tmp/tree/.libs/coli"
	ln -s "$abs_src/data/demo" "$tmp/tree/data/demo"
	libs=$abs_build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	if [ -f "$pkgdatadir/demo/config.json" ]; then
		want_alone=$pkgdatadir/demo
		want_tree=$pkgdatadir/demo
	else
		want_alone=
		want_tree=$tmp/tree/data/demo
	fi
	(
		unset COLI_DEMO_MODEL
		LD_LIBRARY_PATH=$libs
		export LD_LIBRARY_PATH
		"$tmp/alone/coli" info --format json >"$out" 2>"$err"
	)
	status=$?
	if [ -z "$want_alone" ]; then
		if [ "$status" -eq 1 ] && contains "$err" "$pkgdatadir/demo" && contains "$err" "--model" &&
			contains "$err" COLI_DEMO_MODEL; then
			pass "no demo model: the message names $pkgdatadir/demo, --model and COLI_DEMO_MODEL"
		else
			fail "no demo model: status $status, stderr $(cat "$err")"
		fi
	elif [ "$status" -eq 0 ] && contains "$out" "\"model\":\"$want_alone\""; then
		pass "the installed demo model $want_alone is found"
	else
		fail "installed demo model: status $status, $(cat "$out") $(cat "$err")"
	fi
	(
		unset COLI_DEMO_MODEL
		LD_LIBRARY_PATH=$libs
		export LD_LIBRARY_PATH
		"$tmp/tree/.libs/coli" info --format json >"$out" 2>"$err"
	)
	status=$?
	if [ "$status" -eq 0 ] && contains "$out" "\"model\":\"$want_tree\""; then
		pass "the demo model is found at $want_tree"
	else
		fail "demo model beside the binary: status $status, $(cat "$out") $(cat "$err")"
	fi
	if (
		COLI_DEMO_MODEL=$abs_src/data/demo
		LD_LIBRARY_PATH=$libs
		export COLI_DEMO_MODEL LD_LIBRARY_PATH
		"$tmp/alone/coli" info --format json >"$out" 2>"$err"
	) && contains "$out" "\"model\":\"$abs_src/data/demo\""; then
		pass "COLI_DEMO_MODEL names the demo model"
	else
		fail "COLI_DEMO_MODEL: $(cat "$out") $(cat "$err")"
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
# The defaults pp512 + tg128 exceed the demo's positions: those not given are
# halved until the test fits, and the table names the sizes run. Sizes given
# explicitly are kept; beyond the model's positions the library refuses them.
demo_max=$(tr ',{}' '\n' <"$demo_src/config.json" |
	sed -n 's/^[[:space:]]*"max_position_embeddings"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$demo_max" ] || [ "$demo_max" -ge 640 ]; then
	fail "the demo model's max_position_embeddings '$demo_max' no longer tests the fitting"
else
	pp=512
	while [ $((pp + 2)) -gt "$demo_max" ]; do
		pp=$((pp / 2))
	done
	if run 0 "bench on the demo (default prompt size)" "$COLI" bench -m "$demo_src" --gen-tokens 2 \
		--repetitions 1 --no-probe; then
		if ! contains "$err" exceed && grep -E "^\\| demo +\\|.*\\| +pp$pp \\| +[0-9.]+ " "$out" >/dev/null &&
			grep -E '^\| demo +\|.*\| +tg2 \| +[0-9.]+ ' "$out" >/dev/null && ! contains "$out" pp512 &&
			contains "$out" "test sizes:              pp$pp + tg2"; then
			pass "bench on the demo: pp$pp fits its $demo_max positions, no warning"
		else
			fail "bench on the demo: stderr $(cat "$err"), table $(cat "$out")"
		fi
	fi
	pp=512
	tg=128
	while [ $((pp + tg)) -gt "$demo_max" ]; do
		pp=$((pp / 2))
		tg=$((tg / 2))
	done
	if run 0 "bench on the demo (default sizes, json)" "$COLI" bench -m "$demo_src" --repetitions 1 \
		--no-probe --format json; then
		if ! contains "$err" exceed && [ "$(json_int "$out" prompt_tokens)" = "$pp" ] &&
			[ "$(json_int "$out" gen_tokens)" = "$tg" ] && contains "$out" '"sizes_fitted":true' &&
			[ "$(json_int "$out" max_positions)" = "$demo_max" ]; then
			pass "bench on the demo: defaults become pp$pp + tg$tg"
		else
			fail "bench on the demo (json): stderr $(cat "$err"), $(cat "$out")"
		fi
	fi
	big=$((demo_max + 8))
	if run 1 "bench on the demo (explicit size beyond)" "$COLI" bench -m "$demo_src" --prompt-tokens "$big" \
		--gen-tokens 1 --repetitions 1 --no-probe; then
		if contains "$err" "$((big + 1)) positions exceed the model's max_position_embeddings ($demo_max)" &&
			! grep -E "\\| +pp$big \\|" "$out" >/dev/null; then
			pass "bench: an explicit pp$big beyond the model is refused, naming its maximum"
		else
			fail "bench (explicit pp$big): stderr $(cat "$err"), table $(cat "$out")"
		fi
	fi
fi
# --depth: the tests start from a cache already holding N positions (named
# "@ dN", as llama-bench names them), which counts against the model's
# positions like the test sizes: defaults not given shrink to fit around it.
usage_error "bench: negative depth" --depth "$COLI" bench --depth -1
if run 0 "bench --depth 40 (text)" "$COLI" bench --model "$q" --prompt-tokens 4 --gen-tokens 2 --depth 40 \
	--repetitions 1 --no-probe; then
	if grep -E '^\| qwen3_moe +\|.*\| +pp4 @ d40 \| +[0-9.]+ ' "$out" >/dev/null &&
		grep -E '^\| qwen3_moe +\|.*\| +tg2 @ d40 \| +[0-9.]+ ' "$out" >/dev/null &&
		grep -E '^depth: +40 positions, filled once in [0-9.]+ s' "$out" >/dev/null &&
		grep -E '^kv cache: +f32$' "$out" >/dev/null; then
		pass "bench --depth 40: the tests are pp4 @ d40 and tg2 @ d40"
	else
		fail "bench --depth 40: $(cat "$out")"
	fi
fi
if run 0 "bench --depth 40 --kv-type bf16 (json)" "$COLI" bench --model "$q" --prompt-tokens 4 --gen-tokens 2 \
	--depth 40 --kv-type bf16 --repetitions 1 --no-probe --format json; then
	if json_valid <"$out" && [ "$(json_int "$out" depth)" = 40 ] && positive "$(json_number "$out" depth_seconds)" &&
		contains "$out" '"kv_type":"bf16"' && positive "$(json_number "$out" decode_tok_s)"; then
		pass "bench --depth --kv-type bf16 (json): depth, its time and the cache's type"
	else
		fail "bench --depth (json): $(cat "$out")"
	fi
fi
if [ -n "$demo_max" ] && [ "$demo_max" -lt 640 ] &&
	run 0 "bench --depth on the demo (default sizes)" "$COLI" bench -m "$demo_src" --depth $((demo_max - 200)) \
		--repetitions 1 --no-probe --format json; then
	pp=512
	tg=128
	while [ $((pp + tg + demo_max - 200)) -gt "$demo_max" ]; do
		pp=$((pp / 2))
		tg=$((tg / 2))
	done
	if [ "$(json_int "$out" prompt_tokens)" = "$pp" ] && [ "$(json_int "$out" gen_tokens)" = "$tg" ] &&
		contains "$out" '"sizes_fitted":true'; then
		pass "bench --depth $((demo_max - 200)) on the demo: defaults become pp$pp + tg$tg around it"
	else
		fail "bench --depth on the demo: $(cat "$out" "$err")"
	fi
fi
if run 1 "bench --depth beyond the model" "$COLI" bench --model "$q" --prompt-tokens 4 --gen-tokens 2 \
	--depth 510 --repetitions 1 --no-probe; then
	if contains "$err" "516 positions exceed the model's max_position_embeddings (512)"; then
		pass "bench: a depth beyond the model with the test sizes is refused, naming its maximum"
	else
		fail "bench --depth 510: $(cat "$err")"
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
synth=$builddir/coli-make-synthetic
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
# The same for --arch glm4_moe: one dense layer (intermediate 96) and two MoE
# layers with routed, shared experts and the router's correction bias.
if [ -x "$synth" ] && run 0 "make-synthetic --arch glm4_moe (tiny)" "$synth" --arch glm4_moe \
	--out "$tmp/synthetic_glm" --hidden 64 --layers 3 --experts 8 --active 2 --moe-inter 32 \
	--heads 4 --kv-heads 2 --head-dim 16 --vocab 100 --dense-layers 1 --inter 96 --shared 1 \
	--groups 4 --topk-groups 2 --seed 5; then
	gdir=$tmp/synthetic_glm
	# per layer: two norms H, q and o 2*H*heads*hd, k and v 2*H*kv*hd, q/k/v
	# biases heads*hd + 2*kv*hd, q/k norms 2*hd; the dense layer 3*H*inter;
	# a MoE layer router E*H, correction bias E, experts E*3*I*H, the shared
	# expert 3*I*H.
	want_params=$(awk 'BEGIN {
		H = 64; L = 3; D = 1; E = 8; I = 32; nh = 4; kv = 2; hd = 16; V = 100; inter = 96
		attn = 2 * H + 2 * H * nh * hd + 2 * H * kv * hd + nh * hd + 2 * kv * hd + 2 * hd
		moe = E * H + E + E * 3 * I * H + 3 * I * H
		printf "%d\n", 2 * V * H + H + L * attn + D * 3 * H * inter + (L - D) * moe
	}')
	hlen=$(od -An -tu1 -N8 "$gdir/model.safetensors" |
		awk '{ for (i = NF; i >= 1; i--) v = v * 256 + $i } END { printf "%d\n", v }')
	size=$(wc -c <"$gdir/model.safetensors" | tr -d ' ')
	# the tensors of GLM-4.5 that Qwen3-MoE has not, each once a layer
	names=$(dd if="$gdir/model.safetensors" bs="$((8 + hlen))" count=1 2>/dev/null |
		tr ',{' '\n\n' | grep -c -E \
		-e '^"model\.layers\.[0-9]+\.self_attn\.[qkv]_proj\.bias":' \
		-e '^"model\.layers\.[12]\.mlp\.gate\.e_score_correction_bias":' \
		-e '^"model\.layers\.[12]\.mlp\.shared_experts\.(gate|up|down)_proj\.weight":' \
		-e '^"model\.layers\.0\.mlp\.(gate|up|down)_proj\.weight":')
	if [ "$((size - 8 - hlen))" -eq "$((2 * want_params))" ] && [ "$names" -eq 20 ] &&
		contains "$gdir/config.json" '"model_type": "glm4_moe"' &&
		contains "$gdir/config.json" '"first_k_dense_replace": 1' &&
		contains "$gdir/config.json" '"n_group": 4'; then
		pass "make-synthetic --arch glm4_moe: GLM-4.5 tensors and config, $want_params parameters"
	else
		fail "make-synthetic --arch glm4_moe: file of $size bytes, header $hlen," \
			"$names GLM-4.5 tensor names of 20, for $want_params parameters"
	fi
	if run 0 "info on the synthetic glm4_moe model" "$COLI" info --model "$gdir" --format json; then
		ok=1
		for kv in n_layers:3 n_moe_layers:2 hidden_size:64 n_heads:4 n_kv_heads:2 head_dim:16 \
			vocab_size:100 n_experts:8 n_experts_active:2 moe_intermediate_size:32 \
			n_params_total:"$want_params"; do
			k=${kv%%:*}
			want=${kv#*:}
			got=$(json_int "$out" "$k")
			[ "$got" = "$want" ] || { ok=0; fail "synthetic glm4_moe info: $k is '$got', expected $want"; }
		done
		contains "$out" '"architecture":"Glm4MoeForCausalLM"' ||
			{ ok=0; fail "synthetic glm4_moe info: architecture"; }
		[ "$ok" = 1 ] && pass "info reports the synthetic glm4_moe model's family, layers and parameters"
	fi
	for w in bf16 q8; do
		if run 0 "generate on the synthetic glm4_moe model ($w)" "$COLI" generate --model "$gdir" \
			--weights "$w" --prompt-ids 1,2,3 --max-tokens 4 --temperature 0 --format json; then
			n=$(json_array "$out" tokens | wc -l)
			bad=$(json_array "$out" tokens | awk '$1 < 0 || $1 >= 100' | wc -l)
			if json_valid <"$out" && [ "$n" -ge 1 ] && [ "$n" -le 4 ] && [ "$bad" -eq 0 ]; then
				pass "generate runs the synthetic glm4_moe model ($w)"
			else
				fail "generate on the synthetic glm4_moe model ($w): $(cat "$out")"
			fi
		fi
	done
	rm -rf "$gdir"
fi
# --arch deepseek_v3: DeepSeek-V3's latent attention (query LoRA 32, latent
# 32, heads of 16 + 8 for the keys and 16 for the values) with YaRN, on
# GLM-4.5's MoE; info names MLA and YaRN, and a bf16 cache holds the
# latent and the rotary key of each layer: (32 + 8) * 2 * 3 bytes.
if [ -x "$synth" ] && run 0 "make-synthetic --arch deepseek_v3 (tiny)" "$synth" --arch deepseek_v3 \
	--out "$tmp/synthetic_ds" --hidden 64 --layers 3 --experts 8 --active 2 --moe-inter 32 \
	--heads 4 --vocab 100 --dense-layers 1 --inter 96 --shared 1 --groups 4 --topk-groups 2 \
	--q-lora 32 --kv-lora 32 --nope-dim 16 --rope-dim 8 --v-dim 16 --yarn-factor 4 --yarn-orig 1024 \
	--seed 6; then
	ddir=$tmp/synthetic_ds
	# per layer: two norms H; q_a q*H, its norm q, q_b heads*(nope+rope)*q;
	# kv_a (kvl+rope)*H, its norm kvl, kv_b heads*(nope+v)*kvl; o H*heads*v
	want_params=$(awk 'BEGIN {
		H = 64; L = 3; D = 1; E = 8; I = 32; nh = 4; q = 32; kvl = 32; nope = 16; rope = 8; v = 16
		V = 100; inter = 96
		attn = 2 * H + q * H + q + nh * (nope + rope) * q + (kvl + rope) * H + kvl + nh * (nope + v) * kvl + H * nh * v
		moe = E * H + E + E * 3 * I * H + 3 * I * H
		printf "%d\n", 2 * V * H + H + L * attn + D * 3 * H * inter + (L - D) * moe
	}')
	if run 0 "info on the synthetic deepseek_v3 model" "$COLI" info --model "$ddir" --format json \
		--kv-type bf16; then
		ok=1
		for kv in n_layers:3 n_moe_layers:2 hidden_size:64 n_heads:4 head_dim:24 kv_lora_rank:32 \
			q_lora_rank:32 v_head_dim:16 rotary_dim:8 rope_original_positions:1024 \
			kv_bytes_per_position:240 n_params_total:"$want_params"; do
			k=${kv%%:*}
			want=${kv#*:}
			got=$(json_int "$out" "$k")
			[ "$got" = "$want" ] || { ok=0; fail "synthetic deepseek_v3 info: $k is '$got', expected $want"; }
		done
		for s in '"architecture":"DeepseekV3ForCausalLM"' '"attention":"mla"' '"rope_scaling":"yarn"'; do
			contains "$out" "$s" || { ok=0; fail "synthetic deepseek_v3 info: no $s"; }
		done
		[ "$ok" = 1 ] && pass "info names the synthetic deepseek_v3 model's MLA, YaRN, cache and parameters"
	fi
	if run 0 "info (text) on the synthetic deepseek_v3 model" "$COLI" info --model "$ddir"; then
		if grep -q 'latent attention (MLA)' "$out" && grep -q 'kv_lora_rank 32, rotary key 8, q_lora_rank 32' "$out" &&
			grep -q 'YaRN: factor 4 over 1024 original positions' "$out"; then
			pass "info's text names MLA and YaRN and their sizes"
		else
			fail "info's text on deepseek_v3: $(cat "$out")"
		fi
	fi
	if run 0 "generate on the synthetic deepseek_v3 model (q4)" "$COLI" generate --model "$ddir" \
		--weights q4 --prompt-ids 1,2,3 --max-tokens 4 --temperature 0 --format json; then
		n=$(json_array "$out" tokens | wc -l)
		if json_valid <"$out" && [ "$n" -ge 1 ] && [ "$n" -le 4 ]; then
			pass "generate runs the synthetic deepseek_v3 model (q4)"
		else
			fail "generate on the synthetic deepseek_v3 model: $(cat "$out")"
		fi
	fi
	rm -rf "$ddir"
fi
# --arch glm_moe_dsa: GLM-5's sparse attention on the same trunk, 4 layers,
# index_topk_freq 2 (layers 0, 1, 2 run their indexer, layer 3 shares layer
# 2's choice and has no indexer tensors); a bf16 cache row adds the
# indexer's 16-value key: (32 + 8 + 16) * 2 * 4 bytes.
if [ -x "$synth" ] && run 0 "make-synthetic --arch glm_moe_dsa (tiny)" "$synth" --arch glm_moe_dsa \
	--out "$tmp/synthetic_dsa" --hidden 64 --layers 4 --experts 8 --active 2 --moe-inter 32 \
	--heads 4 --vocab 100 --dense-layers 1 --inter 96 --shared 1 --groups 1 --topk-groups 1 \
	--q-lora 32 --kv-lora 32 --nope-dim 16 --rope-dim 8 --v-dim 16 --index-topk 4 --index-heads 2 \
	--index-dim 16 --index-freq 2 --seed 7; then
	ddir=$tmp/synthetic_dsa
	# the MLA layers' parameters as above, plus 3 indexers: wq_b 2*16*q,
	# wk 16*H, k_norm 16 + 16, weights_proj 2*H
	want_params=$(awk 'BEGIN {
		H = 64; L = 4; D = 1; E = 8; I = 32; nh = 4; q = 32; kvl = 32; nope = 16; rope = 8; v = 16
		V = 100; inter = 96
		attn = 2 * H + q * H + q + nh * (nope + rope) * q + (kvl + rope) * H + kvl + nh * (nope + v) * kvl + H * nh * v
		idx = 2 * 16 * q + 16 * H + 32 + 2 * H
		moe = E * H + E + E * 3 * I * H + 3 * I * H
		printf "%d\n", 2 * V * H + H + L * attn + 3 * idx + D * 3 * H * inter + (L - D) * moe
	}')
	if run 0 "info on the synthetic glm_moe_dsa model" "$COLI" info --model "$ddir" --format json \
		--kv-type bf16; then
		ok=1
		for kv in n_layers:4 kv_lora_rank:32 index_topk:4 index_heads:2 index_head_dim:16 index_shared_layers:1 \
			kv_bytes_per_position:448 n_params_total:"$want_params"; do
			k=${kv%%:*}
			want=${kv#*:}
			got=$(json_int "$out" "$k")
			[ "$got" = "$want" ] || { ok=0; fail "synthetic glm_moe_dsa info: $k is '$got', expected $want"; }
		done
		contains "$out" '"architecture":"GlmMoeDsaForCausalLM"' || { ok=0; fail "synthetic glm_moe_dsa info: $(cat "$out")"; }
		[ "$ok" = 1 ] && pass "info names the synthetic glm_moe_dsa model's sparse attention, cache and parameters"
	fi
	if run 0 "info (text) on the synthetic glm_moe_dsa model" "$COLI" info --model "$ddir"; then
		if grep -q 'sparse attention:   DSA, the best 4 positions a token; indexer 2 heads of 16, 1 layer shares' "$out"; then
			pass "info's text names DSA and its sizes"
		else
			fail "info's text on glm_moe_dsa: $(cat "$out")"
		fi
	fi
	if run 0 "generate on the synthetic glm_moe_dsa model (q4), past index_topk" "$COLI" generate --model "$ddir" \
		--weights q4 --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 4 --temperature 0 --format json; then
		n=$(json_array "$out" tokens | wc -l)
		if json_valid <"$out" && [ "$n" -ge 1 ] && [ "$n" -le 4 ]; then
			pass "generate runs the synthetic glm_moe_dsa model (q4)"
		else
			fail "generate on the synthetic glm_moe_dsa model: $(cat "$out")"
		fi
	fi
	rm -rf "$ddir"
fi
# Multi-token prediction: the glm4_moe fixture's MTP layer drafts, and the
# tokens are the ones without it; the statistics come in the JSON.
glm=$data/glm4_moe
if run 0 "generate on glm4_moe without --mtp" "$COLI" generate --model "$glm" --prompt-ids 40,77,258,818,264 \
	--max-tokens 24 --temperature 0 --weights q8 --format json; then
	json_array "$out" tokens >"$tmp/plain_ids"
	for k in 1 3; do
		if run 0 "generate --mtp --mtp-tokens $k" "$COLI" generate --model "$glm" --prompt-ids 40,77,258,818,264 \
			--max-tokens 24 --temperature 0 --weights q8 --format json --mtp --mtp-tokens "$k" --no-mtp-guard; then
			json_array "$out" tokens >"$tmp/mtp_ids"
			steps=$(sed -n 's/.*"mtp":{[^}]*"steps":\([0-9]*\).*/\1/p' "$out")
			per=$(sed -n 's/.*"mtp":{"drafts_per_step":\([0-9]*\).*/\1/p' "$out")
			if json_valid <"$out" && cmp -s "$tmp/plain_ids" "$tmp/mtp_ids" && positive "$steps" && [ "$per" = "$k" ]; then
				pass "generate --mtp --mtp-tokens $k: the same 24 tokens, $steps verifications in the JSON"
			else
				fail "generate --mtp --mtp-tokens $k: $(cat "$out")"
			fi
		fi
	done
	if run 0 "generate --mtp --stats" "$COLI" generate --model "$glm" --prompt-ids 40,77,258,818,264 \
		--max-tokens 8 --temperature 0 --weights q8 --mtp --stats; then
		if grep -q '^mtp: [0-9]* of [0-9]* drafts accepted' "$err"; then
			pass "generate --mtp --stats prints the drafts accepted"
		else
			fail "generate --mtp --stats: no mtp line: $(cat "$err")"
		fi
	fi
	if run 0 "generate without --mtp: no mtp statistics" "$COLI" generate --model "$glm" --prompt-ids 1,2 \
		--max-tokens 2 --stats --format json && contains "$out" '"mtp":null' && ! grep -q '^mtp:' "$err"; then
		pass "generate without --mtp reports no drafting"
	fi
fi
# The shipped GLM demo: its MTP layer drafts text it accepts in part, and
# the tokens are those without it.
gdemo=$srcdir/data/demo-glm
if run 0 "generate on the GLM demo" "$COLI" generate --model "$gdemo" --prompt "In the beginning" \
	--max-tokens 40 --temperature 0 --format json; then
	json_array "$out" tokens >"$tmp/gdemo_plain"
	if run 0 "generate --mtp on the GLM demo" "$COLI" generate --model "$gdemo" --prompt "In the beginning" \
		--max-tokens 40 --temperature 0 --format json --mtp --no-mtp-guard; then
		acc=$(sed -n 's/.*"mtp":{[^}]*"accepted":\([0-9]*\).*/\1/p' "$out")
		json_array "$out" tokens >"$tmp/gdemo_mtp"
		if cmp -s "$tmp/gdemo_plain" "$tmp/gdemo_mtp" && positive "$acc"; then
			pass "the GLM demo with --mtp: the same 40 tokens, $acc drafts accepted"
		else
			fail "the GLM demo with --mtp: $(cat "$out")"
		fi
	fi
fi
if run 1 "generate --mtp on a model without an MTP layer" "$COLI" generate --model "$data/qwen3_moe" \
	--prompt-ids 1,2 --max-tokens 2 --mtp; then
	if contains "$err" "--mtp" && contains "$err" "num_nextn_predict_layers"; then
		pass "generate --mtp on qwen3_moe: refused, naming --mtp"
	else
		fail "generate --mtp on qwen3_moe: $(cat "$err")"
	fi
fi
if run 0 "bench --mtp" "$COLI" bench --model "$glm" --prompt-tokens 4 --gen-tokens 12 --repetitions 1 \
	--no-probe --mtp --no-mtp-guard --format json; then
	steps=$(sed -n 's/.*"mtp":{[^}]*"steps":\([0-9]*\).*/\1/p' "$out")
	if json_valid <"$out" && positive "$steps"; then
		pass "bench --mtp reports its verifications ($steps)"
	else
		fail "bench --mtp: $(cat "$out")"
	fi
fi
usage_error "generate: --mtp-tokens without --mtp" --mtp "$COLI" generate --prompt-ids 1 --mtp-tokens 2
usage_error "generate: --mtp-tokens 9" --mtp-tokens "$COLI" generate --prompt-ids 1 --mtp --mtp-tokens 9
usage_error "generate: --mtp-tokens 0" --mtp-tokens "$COLI" generate --prompt-ids 1 --mtp --mtp-tokens 0
usage_error "generate: --no-mtp-guard without --mtp" --mtp "$COLI" generate --prompt-ids 1 --no-mtp-guard
usage_error "bench: --mtp with --random-decode" --random-decode "$COLI" bench --mtp --random-decode

usage_error "make-synthetic without --out" --out "$synth" --layers 2
usage_error "make-synthetic: bad arch" glm5 "$synth" --out "$tmp/x" --arch glm5
usage_error "make-synthetic: a glm4_moe option without --arch glm4_moe" --shared "$synth" \
	--out "$tmp/x" --shared 2
usage_error "make-synthetic: an MLA option without --arch deepseek_v3" --kv-lora "$synth" \
	--arch glm4_moe --out "$tmp/x" --kv-lora 64
usage_error "make-synthetic: an odd --rope-dim" --rope-dim "$synth" --arch deepseek_v3 --out "$tmp/x" --rope-dim 7
usage_error "make-synthetic: groups that do not divide the experts" --groups "$synth" \
	--arch glm4_moe --out "$tmp/x" --experts 8 --groups 3
usage_error "make-synthetic: top-k groups too few for the active experts" --topk-groups "$synth" \
	--arch glm4_moe --out "$tmp/x" --experts 8 --active 4 --groups 4 --topk-groups 1
usage_error "make-synthetic: more dense layers than layers" --dense-layers "$synth" \
	--arch glm4_moe --out "$tmp/x" --layers 2 --dense-layers 3
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
# compare --help lists every weight format of the header for --weights and
# --against, and compare takes each of them (against itself: agreement 1).
formats=$(sed -n 's/^ *COLI_WEIGHTS_\([A-Z0-9]*\) = [0-9]*,\{0,1\}$/\1/p' "$header" | tr '[:upper:]' '[:lower:]')
# help_text FILE OPTION: the description of OPTION, its lines joined.
help_text() {
	awk -v opt="$2" '
	/^  (-[A-Za-z], |    )--/ { inside = 0 }
	/^  (-[A-Za-z], |    )--/ && $0 ~ ("^  (-[A-Za-z], |    )" opt " ") { inside = 1 }
	inside { printf "%s ", $0 }' "$1"
}
if [ "$(echo "$formats" | wc -w)" -lt 6 ]; then
	fail "the header lists only these weight formats: $formats"
else
	for o in --weights --against; do
		t=$(help_text "$tmp/help_compare" "$o")
		ok=1
		for f in $formats; do
			case " $t " in
			*[\ ,]"$f"[\ ,]*) ;;
			*) ok=0; fail "coli compare --help: $o does not list $f: $t" ;;
			esac
		done
		[ "$ok" = 1 ] && pass "coli compare --help: $o lists $(echo "$formats" | paste -sd, -)"
	done
	for f in $formats; do
		if run 0 "compare $f against $f" "$COLI" compare --model "$data/qwen3_moe" --weights "$f" \
			--against "$f" --prompt-tokens 3 --gen-tokens 2 --format json; then
			if [ "$(json_number "$out" top1_agreement)" = "1.0000" ] && contains "$out" "\"weights\":\"$f\""; then
				pass "compare --weights $f --against $f agrees with itself"
			else
				fail "compare $f against $f: $(cat "$out")"
			fi
		fi
	done
fi
usage_error "compare without --weights" --weights "$COLI" compare --model "$data/olmoe"
usage_error "compare: bad --against" --against "$COLI" compare --model "$data/olmoe" --weights q4 \
	--against q3

# Why generation stopped: a full context keeps every token (the fixture's
# context set to 12 positions), a stop string, the echo of the prompt.
m=$data/olmoe
if run 0 "generate to a full context, json" "$COLI" generate -m "$m" -c 12 -p "In the beginning God created" \
	-n 1000 --temperature 0 --ignore-eos --format json; then
	if contains "$out" '"stop_reason":"context"' && [ "$(json_number "$out" prefill_tokens)" -ge 1 ]; then
		pass "full context: stop_reason context, exit 0"
	else
		fail "full context json: $(cat "$out")"
	fi
fi
if run 0 "generate --max-tokens 3" "$COLI" generate -m "$m" -p "In the beginning" -n 3 --temperature 0 \
	--ignore-eos; then
	if head -c 16 "$out" | grep -F "In the beginning" >/dev/null && contains "$err" "stopped: --max-tokens reached"; then
		pass "text mode echoes the prompt and says why it stopped"
	else
		fail "echo/notice: stdout $(cat "$out") stderr $(cat "$err")"
	fi
fi
if run 0 "generate --no-echo" "$COLI" generate -m "$m" -p "In the beginning" -n 3 --temperature 0 --no-echo; then
	if grep -F "In the beginning" "$out" >/dev/null; then fail "--no-echo still printed the prompt"; else pass "--no-echo"; fi
fi
if run 0 "one-token prompt stats" "$COLI" generate -m "$m" --prompt-ids 5 -n 5 --temperature 0 --ignore-eos \
	--format json; then
	if [ "$(json_number "$out" prefill_tokens)" = 1 ] && [ "$(json_number "$out" decode_tokens)" = 5 ]; then
		pass "one-token prompt: prefill 1, decode 5"
	else
		fail "one-token prompt stats: $(cat "$out")"
	fi
fi
# Ctrl-C: the text so far and the statistics are kept, exit 130. The signal
# is sent once the first token is out; generation to the demo's full
# context takes far longer than that, but a machine slow to deliver it gets
# three tries. (An asynchronous command starts with SIGINT ignored; coli
# installs its own handler for generation.)
interrupted=no
for try in 1 2 3; do
	: >"$tmp/int.out" # empty before the start: the last try's text is not this one's
	"$COLI" generate -m "$demo_src" -p "In the beginning" --no-echo --ignore-eos -n 100000 \
		--threads 1 --seed "$try" >"$tmp/int.out" 2>"$tmp/int.err" </dev/null &
	pid=$!
	i=0
	while [ ! -s "$tmp/int.out" ] && [ "$i" -lt 3000 ]; do
		sleep 0.01
		i=$((i + 1))
	done
	kill -INT "$pid" 2>/dev/null
	wait "$pid"
	status=$?
	if [ "$status" -eq 130 ]; then
		interrupted=yes
		break
	fi
	echo "  Ctrl-C try $try: exit $status (generation ended first?)"
done
if [ "$interrupted" = yes ]; then
	decoded=$(sed -n 's/.*decode: \([0-9]*\) tok.*/\1/p' "$tmp/int.err")
	if contains "$tmp/int.err" "stopped: interrupted (Ctrl-C)" && [ -n "$decoded" ] &&
		[ "$decoded" -ge 1 ] && [ "$(tr -d '\n' <"$tmp/int.out" | wc -c)" -gt 0 ]; then
		pass "Ctrl-C: exit 130 with the text and the statistics ($decoded tokens)"
	else
		fail "Ctrl-C: stdout $(cat "$tmp/int.out") stderr $(cat "$tmp/int.err")"
	fi
else
	fail "Ctrl-C: never exited 130: $(cat "$tmp/int.err")"
fi

usage_error "empty --stop" --stop "$COLI" generate -m "$m" -p hi --stop ""
usage_error "--min-p above 1" --min-p "$COLI" generate -m "$m" -p hi --min-p 2

# ---- the GPU expert tier ---------------------------------------------------------
# CI builds have no tier: coli gpu says so and how to get one; asked for
# anyway, the tier warns once and every expert runs on the CPU. Placement
# never changes a q8 bit, so the tokens, logits and comparisons below are
# the CPU's in any build. The options win over the environment variables.
unset COLI_CUDA COLI_GPU COLI_GPUS CUDA_EXPERT_GB CUDA_RELEASE_HOST
gpu_none=yes
grep -E '^#define [A-Z_]*(CUDA|HIP)' "$builddir/config.h" >/dev/null 2>&1 && gpu_none=no
check_help gpu --format
if run 0 "coli gpu" "$COLI" gpu; then
	if [ "$gpu_none" = yes ]; then
		if [ "$(sed -n 1p "$out")" = "tier: none" ] && contains "$out" "./configure --with-cuda" &&
			contains "$out" "--with-hip" && [ ! -s "$err" ]; then
			pass "coli gpu: tier none, and how to build one"
		else
			fail "coli gpu without a tier: $(cat "$out" "$err")"
		fi
	elif sed -n 1p "$out" | grep '^tier: [a-z]' >/dev/null && ! contains "$out" "tier: none" &&
		{ contains "$out" "no device" || grep '^device 0: .*, wave [0-9]*, [0-9]* MiB free of [0-9]* MiB$' "$out" >/dev/null; }; then
		pass "coli gpu: the tier and its devices"
	else
		fail "coli gpu with a tier: $(cat "$out")"
	fi
fi
if run 0 "coli gpu --format json" "$COLI" gpu --format json; then
	if json_valid <"$out" && { [ "$gpu_none" = no ] || [ "$(cat "$out")" = '{"tier":"none","devices":[]}' ]; } &&
		grep '^{"tier":"[a-z][^"]*","devices":\[' "$out" >/dev/null; then
		pass "coli gpu --format json"
	else
		fail "coli gpu --format json: $(cat "$out")"
	fi
fi
usage_error "coli gpu takes no --model" --model "$COLI" gpu --model "$q"

# gpu_usage DESCRIPTION WORD ARGS...: a usage error about a value (not an
# unknown option) that names WORD.
gpu_usage() {
	what=$1
	word=$2
	shift 2
	if run 2 "$what" "$@"; then
		if contains "$err" "$word" && ! contains "$err" "unknown option"; then
			pass "$what"
		else
			fail "$what: $(cat "$err")"
		fi
	fi
}
g=$data/qwen3_moe
gpu_usage "--gpu-expert-gb -1" "'-1' for --gpu-expert-gb" "$COLI" generate -m "$g" -p x --gpu-expert-gb -1
gpu_usage "--gpu-expert-gb below 1 MiB" "below 1 MiB" "$COLI" generate -m "$g" -p x --gpu-expert-gb 0.0005
gpu_usage "--gpu-expert-gb abc" "'abc' for --gpu-expert-gb" "$COLI" bench -m "$g" --gpu-expert-gb abc
gpu_usage "--gpu-devices a,b" "'a,b' for --gpu-devices" "$COLI" generate -m "$g" -p x --gpu-devices a,b
gpu_usage "--gpu-devices 0,0" "'0,0' for --gpu-devices" "$COLI" info -m "$g" --gpu-devices 0,0
gpu_usage "--gpu-devices ''" "--gpu-devices" "$COLI" logits -m "$g" --prompt-ids 1 --gpu-devices ''
gpu_usage "--gpu with --no-gpu" "--no-gpu" "$COLI" generate -m "$g" -p x --gpu --no-gpu
gpu_usage "--gpu-devices with --no-gpu" "--no-gpu" "$COLI" info -m "$g" --no-gpu --gpu-devices 0

# gen_q8 ENV ARGS...: eight greedy tokens of the fixture in q8, as JSON, with
# the environment variable assignment ENV ("-": none).
gen_q8() {
	e=$1
	shift
	[ "$e" = - ] && e=COLI_TEST_GPU=none
	env "$e" "$COLI" generate -m "$g" -p "In the beginning" -n 8 --temperature 0 --ignore-eos \
		--weights q8 --format json "$@"
}
# gpu_same DESCRIPTION WARN ENV ARGS...: the same tokens as without the
# tier; WARN yes: (without a tier) exactly one line of stderr, the warning,
# and the reason in the gpu member; WARN no: nothing about the GPU.
gpu_same() {
	what=$1
	warn=$2
	shift 2
	if run 0 "$what" gen_q8 "$@"; then
		got=$(json_array "$out" tokens | paste -sd, -)
		if [ -z "$got" ] || [ "$got" != "$want" ] || ! json_valid <"$out"; then
			fail "$what: tokens '$got', without --gpu '$want'"
		elif [ "$warn" = yes ] && [ "$gpu_none" = yes ] &&
			{ [ "$(grep -c GPU "$err")" != 1 ] ||
				! grep '^coli: warning: GPU tier not in use: .*without a GPU tier' "$err" >/dev/null ||
				! contains "$out" '"gpu":{"tier":"none","detail":"not in use: ' ||
				! contains "$out" '"devices":[]}}'; }; then
			fail "$what: the warning or the gpu member: $(cat "$err" "$out")"
		elif [ "$warn" = no ] && { contains "$err" GPU || ! contains "$out" '"detail":"off","devices":[]}}'; }; then
			fail "$what: not off, or a warning: $(cat "$err" "$out")"
		else
			pass "$what: the same tokens"
		fi
	fi
}
if run 0 "generate without --gpu" gen_q8 -; then
	want=$(json_array "$out" tokens | paste -sd, -)
	if json_valid <"$out" && [ -n "$want" ] && contains "$out" ',"gpu":{"tier":"' &&
		contains "$out" '"detail":"off","devices":[]}}' && ! contains "$err" GPU; then
		pass "generate JSON: a gpu member, off, with no device, and no warning"
	else
		fail "generate JSON gpu member: $(cat "$out" "$err")"
	fi
	gpu_same "generate --gpu" yes - --gpu
	gpu_same "generate --gpu --release-host" yes - --gpu --release-host
	gpu_same "generate --gpu-devices 0 --gpu-expert-gb 0.5" yes - --gpu-devices 0 --gpu-expert-gb 0.5
	gpu_same "generate --gpu-expert-gb 0" yes - --gpu-expert-gb 0
	gpu_same "COLI_CUDA=1 generate" yes COLI_CUDA=1
	gpu_same "COLI_CUDA=1 generate --no-gpu" no COLI_CUDA=1 --no-gpu
	gpu_same "COLI_GPUS=x generate --gpu-devices 0 (the option wins)" yes COLI_GPUS=x --gpu-devices 0
	gpu_same "CUDA_EXPERT_GB=abc generate --gpu-expert-gb 1 (the option wins)" yes CUDA_EXPERT_GB=abc \
		--gpu-expert-gb 1
	gpu_same "CUDA_RELEASE_HOST=2 generate --gpu --release-host (the option wins)" yes \
		CUDA_RELEASE_HOST=2 --gpu --release-host
fi
# A malformed variable that no option overrides fails, naming it.
if run 1 "COLI_GPUS=x generate --gpu" gen_q8 COLI_GPUS=x --gpu; then
	if contains "$err" "COLI_GPUS" && contains "$err" "'x'"; then
		pass "COLI_GPUS=x generate --gpu fails naming COLI_GPUS"
	else
		fail "COLI_GPUS=x: $(cat "$err")"
	fi
fi

# ... before any weight is read: a model without its weights file still
# fails on the variable, not on the missing file.
mkdir -p "$tmp/noweights"
cp "$data/olmoe/config.json" "$tmp/noweights/"
if run 1 "COLI_GPUS=x before the weights" env COLI_GPUS=x "$COLI" info -m "$tmp/noweights"; then
	if contains "$err" "COLI_GPUS" && ! contains "$err" "safetensors"; then
		pass "a malformed GPU variable fails before the weights are read"
	else
		fail "COLI_GPUS=x before the weights: $(cat "$err")"
	fi
fi

# --stats: after the summary, the tier's line (and one pair per device).
if run 0 "generate --stats" "$COLI" generate -m "$g" -p "In the" -n 2 --temperature 0 --stats; then
	if [ "$(tail -n 1 "$err")" = "gpu: off" ] && grep -n '^prefill: ' "$err" >/dev/null; then
		pass "generate --stats: gpu: off after the summary"
	else
		fail "generate --stats: $(cat "$err")"
	fi
fi
if [ "$gpu_none" = yes ] &&
	run 0 "generate --stats --gpu" "$COLI" generate -m "$g" -p "In the" -n 2 --temperature 0 --stats --gpu; then
	if tail -n 1 "$err" | grep '^gpu: not in use: .*without a GPU tier' >/dev/null; then
		pass "generate --stats --gpu: the reason the tier is not in use"
	else
		fail "generate --stats --gpu: $(cat "$err")"
	fi
fi

# logits and compare: the same numbers with the tier asked for.
if run 0 "logits q8" "$COLI" logits -m "$g" --prompt-ids 1,5,9 --weights q8; then
	cp "$out" "$tmp/logits_cpu"
	if run 0 "logits q8 --gpu" "$COLI" logits -m "$g" --prompt-ids 1,5,9 --weights q8 --gpu &&
		cmp -s "$out" "$tmp/logits_cpu"; then
		pass "logits --gpu: the same logits"
	else
		fail "logits --gpu: different logits or a failure"
	fi
fi
if run 0 "compare q8 --gpu against q8" "$COLI" compare -m "$g" --weights q8 --against q8 --gpu \
	--prompt-tokens 6 --gen-tokens 3 --format json; then
	if [ "$(json_number "$out" top1_agreement)" = "1.0000" ] && [ "$(json_number "$out" mean_kl)" = "0" ] &&
		[ "$(json_int "$out" greedy_agreement)" = 3 ]; then
		pass "compare: q8 with the tier asked for agrees with q8 on the CPU"
	else
		fail "compare q8 --gpu: $(cat "$out")"
	fi
fi

# --cpu and COLI_CPU: the kernel set, the same logits with the scalar one.
if [ -f "$tmp/logits_cpu" ] &&
	run 0 "logits q8 --cpu scalar" "$COLI" logits -m "$g" --prompt-ids 1,5,9 --weights q8 --cpu scalar; then
	if cmp -s "$out" "$tmp/logits_cpu"; then
		pass "logits --cpu scalar: the same logits as the best set"
	else
		fail "logits --cpu scalar: different logits"
	fi
fi
if run 0 "info --cpu scalar" "$COLI" info -m "$g" --cpu scalar; then
	if grep '^cpu kernels: *scalar, float scalar$' "$out" >/dev/null; then
		pass "info --cpu scalar: the cpu kernels line"
	else
		fail "info --cpu scalar: $(cat "$out")"
	fi
fi
if run 0 "info json, COLI_CPU=scalar" env COLI_CPU=scalar "$COLI" info -m "$g" --format json; then
	if json_valid <"$out" && contains "$out" '"cpu_kernels":"scalar, float scalar"'; then
		pass "info json: cpu_kernels from COLI_CPU"
	else
		fail "info json cpu_kernels: $(cat "$out")"
	fi
fi
if run 2 "info --cpu avx3" "$COLI" info -m "$g" --cpu avx3; then
	if contains "$err" "invalid value 'avx3' for --cpu"; then
		pass "info --cpu avx3: a usage error naming --cpu"
	else
		fail "info --cpu avx3: $(cat "$err")"
	fi
fi
if run 1 "info, COLI_CPU=AVX2" env COLI_CPU=AVX2 "$COLI" info -m "$g"; then
	if contains "$err" "environment variable COLI_CPU: 'AVX2'"; then
		pass "COLI_CPU=AVX2: an error naming the variable"
	else
		fail "COLI_CPU=AVX2: $(cat "$err")"
	fi
fi

# --kv-type and COLI_KV_TYPE: every command that runs a model takes it; a
# bf16 cache gives other logits than f32, the same on every kernel set and
# from the variable; compare's reference keeps an f32 cache.
for c in generate logits info bench compare perplexity; do
	if run 0 "$c --help" "$COLI" "$c" --help; then
		if grep -e '^      --kv-type TYPE  ' "$out" >/dev/null; then
			pass "$c --help lists --kv-type"
		else
			fail "$c --help has no --kv-type"
		fi
	fi
done
if run 0 "logits q8 --kv-type bf16" "$COLI" logits -m "$g" --prompt-ids 1,5,9,2,7 --weights q8 --kv-type bf16; then
	cp "$out" "$tmp/logits_kv_bf16"
	if run 0 "logits q8 --kv-type f32" "$COLI" logits -m "$g" --prompt-ids 1,5,9,2,7 --weights q8 --kv-type f32 &&
		! cmp -s "$out" "$tmp/logits_kv_bf16"; then
		pass "logits --kv-type bf16: other logits than f32"
	else
		fail "logits --kv-type bf16: the same logits as f32"
	fi
	if run 0 "logits bf16 KV --cpu scalar" "$COLI" logits -m "$g" --prompt-ids 1,5,9,2,7 --weights q8 --kv-type bf16 \
		--cpu scalar && cmp -s "$out" "$tmp/logits_kv_bf16"; then
		pass "logits --kv-type bf16 --cpu scalar: the same logits as the best set"
	else
		fail "logits --kv-type bf16 --cpu scalar: different logits"
	fi
	if run 0 "logits, COLI_KV_TYPE=bf16" env COLI_KV_TYPE=bf16 "$COLI" logits -m "$g" --prompt-ids 1,5,9,2,7 \
		--weights q8 && cmp -s "$out" "$tmp/logits_kv_bf16"; then
		pass "COLI_KV_TYPE=bf16: the logits of --kv-type bf16"
	else
		fail "COLI_KV_TYPE=bf16: other logits than --kv-type bf16"
	fi
fi
if run 2 "logits --kv-type f16" "$COLI" logits -m "$g" --prompt-ids 1 --kv-type f16; then
	if contains "$err" "invalid value 'f16' for --kv-type (expected f32 or bf16)"; then
		pass "--kv-type f16: a usage error naming --kv-type"
	else
		fail "--kv-type f16: $(cat "$err")"
	fi
fi
if run 0 "compare f32 --kv-type bf16" "$COLI" compare -m "$g" --weights f32 --kv-type bf16 --prompt-tokens 16 \
	--gen-tokens 4 --format json; then
	kl=$(json_number "$out" mean_kl)
	if json_valid <"$out" && [ -n "$kl" ] && awk -v k="$kl" 'BEGIN { exit !(k > 0 && k < 0.01) }'; then
		pass "compare --weights f32 --kv-type bf16: against an f32 cache, KL $kl"
	else
		fail "compare --kv-type bf16: $(cat "$out")"
	fi
fi

# info: the tier's detail.
if run 0 "info --format json (gpu)" "$COLI" info -m "$g" --format json; then
	if json_valid <"$out" && contains "$out" '"gpu_devices":0,"gpu_detail":"off"'; then
		pass "info json: gpu_devices 0, gpu_detail off"
	else
		fail "info json gpu: $(cat "$out")"
	fi
fi
if [ "$gpu_none" = yes ] && run 0 "info --gpu" "$COLI" info -m "$g" --gpu; then
	if grep '^gpu: *not in use: .*without a GPU tier' "$out" >/dev/null; then
		pass "info --gpu: the gpu line says why the tier is not in use"
	else
		fail "info --gpu: $(cat "$out")"
	fi
fi

# bench: the tier as configured, and its member and line.
if run 0 "bench --gpu --format json" "$COLI" bench -m "$g" --prompt-tokens 4 --gen-tokens 4 \
	--repetitions 1 --no-probe --gpu --format json; then
	if json_valid <"$out" && contains "$out" ',"gpu":{"tier":"' &&
		{ [ "$gpu_none" = no ] || { contains "$out" '"devices":[]}}' && contains "$err" "GPU tier not in use"; }; }; then
		pass "bench --gpu --format json: a gpu member"
	else
		fail "bench --gpu json: $(cat "$out" "$err")"
	fi
fi
if run 0 "bench (text, gpu line)" "$COLI" bench -m "$g" --prompt-tokens 4 --gen-tokens 4 \
	--repetitions 1 --no-probe; then
	if grep '^gpu: *off$' "$out" >/dev/null; then
		pass "bench text: a gpu line"
	else
		fail "bench text gpu line: $(cat "$out")"
	fi
fi

# ---- coli convert and the expert store --------------------------------------------
# A converted model computes what its checkpoint computes in that format,
# bit for bit, mapped or streamed under any budget; the store's counts
# add up; a budget too small fails naming the option; Ctrl-C leaves no
# model.coli behind.
check_help convert --model --out --weights --q4-group --threads --force --format
for c in generate logits info bench compare; do
	check_help "$c" --ram-gb --expert-slots --no-prefetch --io-threads --no-hotset
done
check_help bench --disk-probe

cv=$tmp/conv
if run 0 "convert the qwen3_moe fixture (q4)" "$COLI" convert -m "$q" --out "$cv"; then
	ok=1
	for f in config.json tokenizer.json tokenizer_config.json generation_config.json; do
		cmp -s "$q/$f" "$cv/$f" || { ok=0; fail "convert: $cv/$f is not a copy of $q/$f"; }
	done
	[ -s "$cv/model.coli" ] || { ok=0; fail "convert: no $cv/model.coli"; }
	[ -e "$cv/model.safetensors" ] && { ok=0; fail "convert: the safetensors file was copied"; }
	ls "$cv"/*.tmp-* >/dev/null 2>&1 && { ok=0; fail "convert left temporary files: $(ls "$cv")"; }
	# The magic of docs/container.md: "COLI\r\n\032\n".
	[ "$(od -An -tx1 -N8 "$cv/model.coli" | tr -d ' \n')" = 434f4c490d0a1a0a ] ||
		{ ok=0; fail "convert: model.coli does not start with the container's magic"; }
	[ "$ok" = 1 ] && pass "convert: config and tokenizer files copied, model.coli written"
	size=$(wc -c <"$cv/model.coli" | tr -d ' ')
	if [ "$(wc -l <"$out")" -eq 1 ] && contains "$out" "$cv/model.coli: q4 (groups of 32), $size bytes" &&
		grep ' MB/s$' "$out" >/dev/null; then
		pass "convert: one summary line with the bytes of model.coli ($size)"
	else
		fail "convert summary: $(cat "$out")"
	fi
	# Standard error is a file here: no progress bar, nothing at all.
	if [ ! -s "$err" ]; then
		pass "convert: no progress bar when standard error is not a terminal"
	else
		fail "convert wrote to a non-terminal standard error: $(od -c "$err" | head -n 3)"
	fi
fi

# logits_same DESCRIPTION DIR ARGS...: coli logits on DIR with ARGS gives
# $tmp/logits_ref byte for byte.
logits_same() {
	what=$1
	shift
	if run 0 "$what" "$COLI" logits --prompt-ids 1,5,9,200,31 -m "$@"; then
		if [ -s "$out" ] && cmp -s "$out" "$tmp/logits_ref"; then
			pass "$what: the same logits, byte for byte"
		else
			fail "$what: logits differ from the checkpoint's"
		fi
	fi
}
if run 0 "logits of the checkpoint in q4" "$COLI" logits -m "$q" --prompt-ids 1,5,9,200,31 --weights q4; then
	cp "$out" "$tmp/logits_ref"
	logits_same "logits of the converted model (mapped)" "$cv"
	logits_same "logits of the converted model, --weights q4" "$cv" --weights q4
	logits_same "logits streamed, --expert-slots 2" "$cv" --expert-slots 2
	logits_same "logits streamed, --expert-slots 2 --no-prefetch --io-threads 1 --no-hotset" "$cv" \
		--expert-slots 2 --no-prefetch --io-threads 1 --no-hotset
	logits_same "logits streamed, --ram-gb 1" "$cv" --ram-gb 1
fi
# Every format: the converted model is the checkpoint loaded in it.
for spec in bf16 q8 q2 q4:64; do
	f=${spec%%:*}
	gargs=
	[ "$spec" != "$f" ] && gargs="--q4-group ${spec#*:}"
	# shellcheck disable=SC2086 # $gargs is split on purpose
	if run 0 "convert --weights $f $gargs" "$COLI" convert -m "$q" --out "$tmp/conv_$f" --weights "$f" $gargs &&
		run 0 "logits --weights $f $gargs" "$COLI" logits -m "$q" --prompt-ids 1,5,9,200,31 --weights "$f" $gargs; then
		cp "$out" "$tmp/logits_ref"
		logits_same "logits converted to $f $gargs, streamed" "$tmp/conv_$f" --expert-slots 3
	fi
done
if run 1 "a converted model opened in another format" "$COLI" logits -m "$cv" --prompt-ids 1 --weights q8; then
	if contains "$err" "q4" && contains "$err" "q8"; then
		pass "a q4 conversion refuses --weights q8, naming both"
	else
		fail "converted model, other format: $(cat "$err")"
	fi
fi

# An existing model.coli is replaced only with --force.
cp "$cv/model.coli" "$tmp/model.coli.before"
if run 1 "convert into an existing output" "$COLI" convert -m "$q" --out "$cv" --weights q8; then
	if contains "$err" "--force" && contains "$err" "$cv/model.coli" && cmp -s "$cv/model.coli" "$tmp/model.coli.before"; then
		pass "convert refuses an existing model.coli without --force and leaves it alone"
	else
		fail "convert into an existing output: $(cat "$err")"
	fi
fi
if run 0 "convert --force --format json" "$COLI" convert -m "$q" --out "$cv" --force --format json; then
	size=$(wc -c <"$cv/model.coli" | tr -d ' ')
	if json_valid <"$out" && [ "$(json_int "$out" bytes)" = "$size" ] && contains "$out" '"weights":"q4"' &&
		[ "$(json_int "$out" q4_group)" = 32 ] && positive "$(json_number "$out" mb_s)" &&
		contains "$out" "\"file\":\"$cv/model.coli\""; then
		pass "convert --force replaces model.coli; JSON summary with its $size bytes"
	else
		fail "convert --force --format json: $(cat "$out")"
	fi
fi
usage_error "convert: bad --weights f32" "'f32'" "$COLI" convert -m "$q" --out "$tmp/x" --weights f32
usage_error "convert: bad --weights auto" "'auto'" "$COLI" convert -m "$q" --out "$tmp/x" --weights auto
usage_error "convert: bad --weights q5" "'q5'" "$COLI" convert -m "$q" --out "$tmp/x" --weights q5
usage_error "convert: --q4-group without q4" --q4-group "$COLI" convert -m "$q" --out "$tmp/x" --weights q8 --q4-group 64
usage_error "convert without --out" --out "$COLI" convert -m "$q"
usage_error "convert: empty --out" --out "$COLI" convert -m "$q" --out ""
[ -e "$tmp/x" ] && fail "a refused convert created $tmp/x"
if run 1 "convert a missing checkpoint" "$COLI" convert -m "$missing" --out "$tmp/x"; then
	if contains "$err" "$missing" && [ ! -e "$tmp/x/model.coli" ]; then
		pass "convert of a missing checkpoint names it and writes no model.coli"
	else
		fail "convert of a missing checkpoint: $(cat "$err")"
	fi
fi

# The progress bar on a terminal (script(1) gives one), ending cleared.
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1 </dev/null; then
	rm -rf "$tmp/conv_tty"
	script -qec "'$COLI' convert -m '$q' --out '$tmp/conv_tty' --threads 1" /dev/null >"$tmp/tty.out" 2>&1 </dev/null
	status=$?
	esc=$(printf '\033')
	if [ "$status" -eq 0 ] && contains "$tmp/tty.out" "100% [" && contains "$tmp/tty.out" "${esc}[K" &&
		[ -s "$tmp/conv_tty/model.coli" ]; then
		pass "convert draws a progress bar on a terminal"
	else
		fail "convert on a terminal: status $status, $(od -c "$tmp/tty.out" | head -n 5)"
	fi
else
	echo "SKIP: no script(1) (util-linux) with a pseudo-terminal to give convert a terminal"
fi

# info and generate say how the store holds the experts; the counts add up.
if run 0 "info on the checkpoint (json)" "$COLI" info -m "$q" --format json; then
	n_moe=$(json_int "$out" n_moe_layers)
	n_experts=$(json_int "$out" n_experts)
	routed=$((n_moe * n_experts))
	if contains "$out" "\"store_detail\":\"resident: every expert loaded at open\",\"store\":{\"mode\":\"resident\",\"direct_io\":false,\"experts\":$routed,\"slots\":$routed,"; then
		pass "info json: a checkpoint's $routed experts are resident"
	else
		fail "info json store member of a checkpoint: $(cat "$out")"
	fi
fi
if run 0 "info on the converted model" "$COLI" info -m "$cv"; then
	if grep "^store: *mapped: every expert of model.coli\$" "$out" >/dev/null; then
		pass "info: the converted model is mapped"
	else
		fail "info on the converted model: $(cat "$out")"
	fi
fi
if run 0 "info --expert-slots 3" "$COLI" info -m "$cv" --expert-slots 3; then
	if grep "^store: *streamed: 3 of $routed experts in RAM " "$out" >/dev/null; then
		pass "info --expert-slots 3: streamed, 3 of $routed experts in RAM"
	else
		fail "info --expert-slots 3: $(cat "$out")"
	fi
fi
if run 0 "generate q4 on the checkpoint" "$COLI" generate -m "$q" -p "In the beginning" -n 6 --temperature 0 \
	--ignore-eos --weights q4 --format json; then
	want=$(json_array "$out" tokens | paste -sd, -)
	if contains "$out" '"store":{"mode":"resident"'; then
		pass "generate json: a checkpoint's store member is resident"
	else
		fail "generate json store member: $(cat "$out")"
	fi
	if run 0 "generate streamed, --expert-slots 3 --stats" "$COLI" generate -m "$cv" -p "In the beginning" \
		-n 6 --temperature 0 --ignore-eos --expert-slots 3 --stats --format json; then
		got=$(json_array "$out" tokens | paste -sd, -)
		gets=$(json_int "$out" gets)
		hits=$(json_int "$out" hits)
		misses=$(json_int "$out" misses)
		reads=$(json_int "$out" disk_reads)
		line=$(grep '^store: ' "$err")
		if [ -n "$want" ] && [ "$got" = "$want" ] && json_valid <"$out" &&
			contains "$out" '"store":{"mode":"streamed","direct_io":' && [ "$(json_int "$out" slots)" = 3 ] &&
			[ -n "$gets" ] && [ "$gets" -gt 0 ] && [ "$gets" -eq $((hits + misses)) ] && [ "$reads" -ge "$misses" ]; then
			pass "generate streamed: the checkpoint's tokens; $gets gets = $hits hits + $misses misses"
		else
			fail "generate streamed: tokens '$got' (want '$want'): $(cat "$out")"
		fi
		if printf '%s\n' "$line" | grep "^store: streamed, 3 of $routed experts in RAM; $gets gets, $hits hits, $misses misses (hit rate [0-9.]*); [0-9.]* MiB read from disk; prefetch accuracy [0-9.]*; stall [0-9.]* s\$" >/dev/null &&
			[ "$(tail -n 1 "$err")" = "gpu: off" ]; then
			pass "generate --stats: the store line, then the gpu line"
		else
			fail "generate --stats store line: $(cat "$err")"
		fi
	fi
fi
if run 0 "generate --stats on a checkpoint" "$COLI" generate -m "$q" -p "In the" -n 2 --stats; then
	if contains "$err" "store:"; then
		fail "generate --stats on a checkpoint prints a store line: $(cat "$err")"
	else
		pass "generate --stats: no store line for a checkpoint"
	fi
fi
if run 0 "generate --ram-gb on a checkpoint" "$COLI" generate -m "$q" --prompt-ids 1,2 -n 2 --ram-gb 1; then
	if [ "$(grep -c 'warning' "$err")" = 1 ] && contains "$err" "converted models"; then
		pass "--ram-gb on a checkpoint: one warning that it applies to converted models"
	else
		fail "--ram-gb on a checkpoint: $(cat "$err")"
	fi
fi
if run 1 "generate with failing expert reads" env COLI_IO_FAIL_AFTER=0 "$COLI" generate -m "$cv" --prompt-ids 1,2 \
	-n 2 --expert-slots 2 --no-hotset; then
	if contains "$err" "$cv/model.coli" && contains "$err" "expert"; then
		pass "a failing expert read fails the command, naming model.coli and the expert"
	else
		fail "failing expert reads: $(cat "$err")"
	fi
fi

# Budgets too small fail naming our option; the size the library asks for is enough.
store_usage() {
	what=$1
	word=$2
	shift 2
	if run 2 "$what" "$@"; then
		if contains "$err" "$word" && ! contains "$err" "unknown option"; then
			pass "$what"
		else
			fail "$what: $(cat "$err")"
		fi
	fi
}
store_usage "--ram-gb -1" "'-1' for --ram-gb" "$COLI" info -m "$cv" --ram-gb -1
store_usage "--ram-gb abc" "'abc' for --ram-gb" "$COLI" generate -m "$cv" -p x --ram-gb abc
store_usage "--ram-gb below 1 MiB" "below 1 MiB" "$COLI" logits -m "$cv" --prompt-ids 1 --ram-gb 0.0005
store_usage "--io-threads 0" "--io-threads" "$COLI" info -m "$cv" --io-threads 0
store_usage "--io-threads 65" "--io-threads" "$COLI" bench -m "$cv" --io-threads 65
store_usage "--expert-slots -1" "--expert-slots" "$COLI" compare -m "$cv" --weights q4 --expert-slots -1
if run 1 "--expert-slots 1" "$COLI" generate -m "$cv" --prompt-ids 1 -n 1 --expert-slots 1; then
	if contains "$err" "--expert-slots 1"; then
		pass "--expert-slots below one token's experts fails naming --expert-slots"
	else
		fail "--expert-slots 1: $(cat "$err")"
	fi
fi
dv=$tmp/demo_q4
if run 0 "convert the demo model" "$COLI" convert -m "$demo_src" --out "$dv"; then
	if run 1 "--ram-gb too small" "$COLI" generate -m "$dv" -p "In the" -n 2 --ram-gb 0.001; then
		# In our option and unit: "give at least --ram-gb 0.123", not the
		# library's COLI_OPT_MEM_BUDGET_MB in MiB.
		need=$(sed -n 's/.* need \([0-9][0-9]*\) MiB; .*/\1/p' "$err")
		gb=$(sed -n 's/.*give at least --ram-gb \([0-9.]*\),.*/\1/p' "$err")
		if contains "$err" "--ram-gb 0.001 is too small" && [ -n "$need" ] && [ "$need" -gt 1 ] &&
			[ -n "$gb" ] && ! contains "$err" COLI_OPT && ! contains "$err" mem_budget; then
			pass "--ram-gb too small: exit 1 naming --ram-gb, at least $gb GiB ($need MiB) needed"
		else
			fail "--ram-gb too small: $(cat "$err")"
		fi
		if [ -n "$gb" ] && run 0 "--ram-gb $gb (the size asked for)" "$COLI" info -m "$dv" --ram-gb "$gb" --format json; then
			if contains "$out" '"store":{"mode":"streamed"' && [ "$(json_int "$out" slots)" -ge 2 ]; then
				pass "--ram-gb of the $need MiB asked for opens the model streamed"
			else
				fail "--ram-gb $gb: $(cat "$out")"
			fi
		fi
	fi
fi

# compare: the budget changes nothing (the reference maps the file).
if run 0 "compare streamed against mapped" "$COLI" compare -m "$cv" --weights q4 --against q4 --expert-slots 2 \
	--prompt-tokens 6 --gen-tokens 4 --format json; then
	if [ "$(json_number "$out" top1_agreement)" = "1.0000" ] && [ "$(json_number "$out" mean_kl)" = "0" ] &&
		[ "$(json_int "$out" greedy_agreement)" = 4 ]; then
		pass "compare: streamed under --expert-slots 2 agrees with the mapped model"
	else
		fail "compare streamed: $(cat "$out")"
	fi
fi

# bench: the disk probe, the decode disk rate against it, the resident set.
if run 0 "bench --disk-probe (json)" "$COLI" bench -m "$dv" --expert-slots 4 --io-threads 2 --disk-probe \
	--prompt-tokens 4 --gen-tokens 8 --repetitions 1 --probe-mib 64 --format json; then
	verdict=$(awk -v mbs="$(json_number "$out" disk_probe_mb_s)" -v n="$(json_int "$out" disk_probe_reads)" \
		-v rd="$(json_int "$out" disk_probe_readers)" -v rec="$(json_int "$out" disk_probe_record_bytes)" \
		-v slot="$(json_int "$out" slot_bytes)" -v dmbs="$(json_number "$out" decode_disk_mb_s)" \
		-v fr="$(json_number "$out" decode_disk_fraction)" -v peak="$(json_int "$out" rss_peak_bytes)" \
		-v now="$(json_int "$out" rss_bytes)" 'BEGIN {
			if (!(mbs > 0)) { print "disk_probe_mb_s " mbs; exit }
			if (!(n >= 1 && n <= 4096)) { print "disk_probe_reads " n; exit }
			if (rd != 2) { print "disk_probe_readers " rd ", asked for 2"; exit }
			if (rec % 4096 != 0 || rec < slot || rec >= slot + 4096) { print "record " rec " for slots of " slot; exit }
			if (!(dmbs > 0)) { print "decode_disk_mb_s " dmbs; exit }
			want = dmbs / mbs
			if (fr < want * 0.99 - 0.0001 || fr > want * 1.01 + 0.0001) { print "fraction " fr " vs " want; exit }
			if (!(peak >= 64 * 1048576)) { print "peak rss " peak " below the 64 MiB probe"; exit }
			if (!(now > 0 && now <= peak)) { print "rss " now " vs peak " peak; exit }
			print "ok"
		}')
	if json_valid <"$out" && [ "$verdict" = ok ] && contains "$out" '"store":{"mode":"streamed"'; then
		pass "bench --disk-probe: the probe, the decode disk rate and its fraction, the resident set"
	else
		fail "bench --disk-probe: $verdict: $(cat "$out")"
	fi
fi
if run 0 "bench --disk-probe (text)" "$COLI" bench -m "$dv" --expert-slots 4 --disk-probe --prompt-tokens 4 \
	--gen-tokens 8 --repetitions 1 --no-probe; then
	if grep '^disk random reads: *[0-9.]* MB/s, [0-9.]* reads/s (probe: [0-9]* reads of ' "$out" >/dev/null &&
		grep '^decode disk reads: *[0-9.]* MB/s (.*) = [0-9.]*% of the disk probe$' "$out" >/dev/null &&
		grep '^store: *streamed, 4 of ' "$out" >/dev/null && grep '^resident set: *peak [0-9.]* MiB, now ' "$out" >/dev/null; then
		pass "bench --disk-probe (text): disk, decode disk, store and resident set lines"
	else
		fail "bench --disk-probe (text): $(cat "$out")"
	fi
fi
if run 1 "bench --disk-probe on a checkpoint" "$COLI" bench -m "$q" --disk-probe --no-probe --prompt-tokens 1 \
	--gen-tokens 1 --repetitions 1; then
	if contains "$err" "--disk-probe" && contains "$err" "converted"; then
		pass "bench --disk-probe on a checkpoint fails, naming the option"
	else
		fail "bench --disk-probe on a checkpoint: $(cat "$err")"
	fi
fi

# Ctrl-C during a conversion: exit 130 and neither model.coli nor its
# temporary file is left. The signal goes once the temporary file exists;
# a machine fast enough to finish first gets three tries.
if run 0 "make-synthetic (for Ctrl-C)" "$synth" --out "$tmp/big" --hidden 256 --layers 8 --experts 32 \
	--active 2 --moe-inter 256 --heads 4 --kv-heads 2 --head-dim 64 --vocab 1000 --max-pos 256; then
	interrupted=no
	for try in 1 2 3; do
		rm -rf "$tmp/big_q2"
		"$COLI" convert -m "$tmp/big" --out "$tmp/big_q2" --weights q2 --threads 1 \
			>"$tmp/int.out" 2>"$tmp/int.err" </dev/null &
		pid=$!
		i=0
		while ! ls "$tmp/big_q2"/model.coli.tmp-* >/dev/null 2>&1 && [ "$i" -lt 3000 ]; do
			sleep 0.01
			i=$((i + 1))
		done
		kill -INT "$pid" 2>/dev/null
		wait "$pid"
		status=$?
		if [ "$status" -eq 130 ]; then
			interrupted=yes
			break
		fi
		echo "  Ctrl-C try $try: exit $status (conversion ended first?)"
	done
	if [ "$interrupted" = yes ]; then
		if contains "$tmp/int.err" "interrupted (Ctrl-C)" && [ ! -e "$tmp/big_q2/model.coli" ] &&
			! ls "$tmp/big_q2"/model.coli.tmp-* >/dev/null 2>&1 && [ ! -s "$tmp/int.out" ]; then
			pass "Ctrl-C during convert: exit 130, no model.coli and no temporary file"
		else
			fail "Ctrl-C during convert: $(cat "$tmp/int.err") / $(ls -a "$tmp/big_q2")"
		fi
	else
		fail "Ctrl-C during convert: never exited 130: $(cat "$tmp/int.err")"
	fi
	rm -rf "$tmp/big" "$tmp/big_q2"
fi

# ---- Errors that say what to do (issue 17) ----------------------------------

# Token ids as coli tokenize prints them (spaces) work where ids are taken;
# coli logits takes a text prompt too, with -p, --prompt-file and -f.
"$COLI" info -m "$q" --format json >"$tmp/qinfo.json" 2>/dev/null
qmax=$(json_int "$tmp/qinfo.json" max_positions)
ids=$("$COLI" tokenize -m "$q" --text 'hello world')
commas=$(printf '%s\n' "$ids" | tr ' ' ',')
printf 'hello world' >"$tmp/hw.txt"
if run 0 "logits --prompt-ids (spaces)" "$COLI" logits -m "$q" --prompt-ids "$ids"; then
	mv "$out" "$tmp/lg_spaces"
	if run 0 "logits -p" "$COLI" logits -m "$q" -p 'hello world' && cmp -s "$out" "$tmp/lg_spaces" &&
		run 0 "logits -f" "$COLI" logits -m "$q" -f "$tmp/hw.txt" && cmp -s "$out" "$tmp/lg_spaces" &&
		run 0 "logits --prompt-ids (commas)" "$COLI" logits -m "$q" --prompt-ids "$commas" &&
		cmp -s "$out" "$tmp/lg_spaces"; then
		pass "logits: ids apart by spaces, by commas, -p TEXT and -f FILE give the same logits"
	else
		fail "logits: the prompt forms differ ($ids / $commas)"
	fi
fi
if run 0 "detokenize --ids (spaces)" "$COLI" detokenize -m "$q" --ids " $ids " && [ "$(cat "$out")" = 'hello world' ]; then
	pass "detokenize --ids takes what tokenize printed"
else
	fail "detokenize --ids '$ids': $(cat "$out" "$err")"
fi
usage_error "an id list with a letter says the forms" "commas or spaces" "$COLI" logits --prompt-ids "1 x"

# A prompt longer than the context, and a context filled during generate:
# the numbers, and -c up to the model's maximum.
if [ -n "$qmax" ] && run 1 "logits: prompt over -c" "$COLI" logits -m "$q" --prompt-ids 1,2,3,4,5 -c 4; then
	if contains "$err" "5 tokens" && contains "$err" "4 positions" && contains "$err" "-c 5" &&
		contains "$err" "model's $qmax" && ! contains "$err" coli_eval; then
		pass "a prompt over the context: its size, the context's, -c and the model's maximum"
	else
		fail "logits: prompt over -c: $(cat "$err")"
	fi
fi
if [ -n "$qmax" ] && run 0 "generate: context fills" "$COLI" generate -m "$q" --prompt-ids 1 -c 4 -n 10 \
	--temperature 0 --ignore-eos; then
	if contains "$err" "stopped: the context is full (4 positions; -c raises it up to the model's $qmax)"; then
		pass "generate: a full context says its size, -c and the model's maximum"
	else
		fail "generate: context fills: $(cat "$err")"
	fi
fi

# Option names: ours, not the library's.
if run 1 "--weights against a converted model" "$COLI" info -m "$cv" --weights q8; then
	if contains "$err" "--weights asks for q8" && ! contains "$err" COLI_OPT && ! contains "$err" "option weights"; then
		pass "a converted model of another format: the message names --weights"
	else
		fail "--weights q8 on $cv: $(cat "$err")"
	fi
fi
if run 1 "--expert-slots 1 (names)" "$COLI" info -m "$cv" --expert-slots 1; then
	if contains "$err" "give at least 2" && ! contains "$err" COLI_OPT && ! contains "$err" expert_slots; then
		pass "--expert-slots too few: the least that works, in our option's name"
	else
		fail "--expert-slots 1: $(cat "$err")"
	fi
fi

# compare on a converted model: the reference is its own format.
if run 0 "compare on a converted model" "$COLI" compare -m "$cv" --weights q4 --prompt-tokens 4 --gen-tokens 2 \
	--format json; then
	if contains "$out" '"against":"q4"'; then
		pass "compare on a converted model compares against its format by default"
	else
		fail "compare on $cv: $(cat "$out")"
	fi
fi
if run 1 "compare --against f32 on a converted model" "$COLI" compare -m "$cv" --weights q4 --against f32; then
	if contains "$err" "--against f32" && contains "$err" "leave --against out"; then
		pass "compare --against another format on a converted model says what to do"
	else
		fail "compare --against f32 on $cv: $(cat "$err")"
	fi
fi

# Converting twice.
if run 1 "convert a converted model" "$COLI" convert -m "$cv" --out "$tmp/conv2"; then
	if contains "$err" "already converted" && contains "$err" "original checkpoint" && ! contains "$err" safetensors; then
		pass "convert of a converted directory says it is converted"
	else
		fail "convert twice: $(cat "$err")"
	fi
fi

# GGUF files and Hub names: what we read, and that we download nothing.
mkdir -p "$tmp/gguf"
: >"$tmp/gguf/model-Q4_K_M.gguf"
if run 1 "a directory of a GGUF file" "$COLI" info -m "$tmp/gguf"; then
	if contains "$err" "GGUF" && contains "$err" "config.json and *.safetensors"; then
		pass "a GGUF directory: the hint names the format we read"
	else
		fail "GGUF directory: $(cat "$err")"
	fi
fi
if run 1 "a Hub name" "$COLI" generate -m Qwen/Qwen3-30B-A3B -p x; then
	if contains "$err" "Hugging Face Hub name" && contains "$err" "downloads nothing"; then
		pass "a Hub name: the hint says we download nothing"
	else
		fail "Hub name: $(cat "$err")"
	fi
fi

# Did you mean; llama.cpp's names.
usage_error "did you mean an option" "did you mean '--temperature'" "$COLI" generate --temprature 1
usage_error "did you mean a command" "did you mean 'generate'" "$COLI" genrate
usage_error "coli help: did you mean" "did you mean 'generate'" "$COLI" help genrate
usage_error "-cnv is not -c nv" "conversation mode" "$COLI" generate -cnv
usage_error "-ngl is explained" "--gpu" "$COLI" generate -ngl 99
usage_error "-fa is explained" "flash attention" "$COLI" generate -fa
if run 0 "generate --temp" "$COLI" generate -m "$q" --prompt-ids 1,2 -n 4 --temp 0 --format json &&
	mv "$out" "$tmp/temp.json" && run 0 "generate -f" "$COLI" generate -m "$q" -f "$tmp/hw.txt" -n 1 &&
	contains "$out" "hello world" &&
	run 0 "generate --temperature" "$COLI" generate -m "$q" --prompt-ids 1,2 -n 4 --temperature 0 --format json &&
	[ "$(sed -n 's/.*"tokens":\(\[[^]]*\]\).*/\1/p' "$out")" = \
		"$(sed -n 's/.*"tokens":\(\[[^]]*\]\).*/\1/p' "$tmp/temp.json")" ]; then
	pass "llama.cpp's --temp and -f are --temperature and --prompt-file"
else
	fail "--temp / -f: $(cat "$err")"
fi

# Threads: at most 4 per online core.
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null)
if [ -n "$cores" ] && [ "$cores" -le 256 ]; then
	usage_error "--threads over 4 per core" "at most $((4 * cores))" "$COLI" info -m "$q" --threads $((4 * cores + 1))
	usage_error "convert --threads over 4 per core" "at most $((4 * cores))" "$COLI" convert -m "$q" \
		--out "$tmp/thr" --threads $((4 * cores + 1))
	if run 0 "--threads at 4 per core" "$COLI" info -m "$q" --threads $((4 * cores)); then
		pass "--threads at 4 per core is allowed"
	fi
else
	fail "the threads cap needs the number of online cores, at most 256 (have '$cores')"
fi

# Numbers: decimal only, ranges in the option's own unit.
usage_error "--ram-gb in hex" "not a decimal number" "$COLI" info -m "$cv" --ram-gb 0x10
usage_error "--temperature inf" "not a decimal number" "$COLI" generate --prompt-ids 1 --temperature inf
usage_error "--top-p nan" "not a decimal number" "$COLI" generate --prompt-ids 1 --top-p nan
usage_error "--top-k with a sign and junk" "not a decimal integer" "$COLI" generate --prompt-ids 1 --top-k 4k
if run 2 "--ram-gb -1 (range)" "$COLI" info -m "$cv" --ram-gb -1; then
	if contains "$err" "give 0 to 1073741824" && ! contains "$err" "e+"; then
		pass "--ram-gb -1: a plain range in GiB"
	else
		fail "--ram-gb -1: $(cat "$err")"
	fi
fi

# A write error on standard output stops generate, saying so.
"$COLI" generate -m "$q" -p x -n 4 --temperature 0 --ignore-eos >/dev/full 2>"$err" </dev/null
status=$?
if [ "$status" = 1 ] && contains "$err" "stopped: a write error on standard output: No space left on device" &&
	! contains "$err" callback; then
	pass "generate > /dev/full: stopped by a write error, with its reason"
else
	fail "generate > /dev/full: exit $status: $(cat "$err")"
fi

# A model without tokenizer.json: a text prompt fails saying to give ids;
# --prompt-ids prints the generated ids.
mkdir -p "$tmp/notok"
for f in config.json generation_config.json model.safetensors; do
	ln -s "$(cd "$q" && pwd)/$f" "$tmp/notok/$f"
done
if run 1 "generate -p without a tokenizer" "$COLI" generate -m "$tmp/notok" -p hello -n 2; then
	if contains "$err" "no tokenizer.json" && contains "$err" "--prompt-ids" && [ ! -s "$out" ]; then
		pass "a text prompt without a tokenizer fails, naming --prompt-ids"
	else
		fail "generate -p without a tokenizer: $(cat "$out" "$err")"
	fi
fi
if run 0 "generate --prompt-ids without a tokenizer" "$COLI" generate -m "$tmp/notok" --prompt-ids 1,2 -n 3 \
	--temperature 0 --ignore-eos; then
	if grep -x '[0-9]* [0-9]* [0-9]*' "$out" >/dev/null && contains "$err" "printing token ids"; then
		pass "--prompt-ids without a tokenizer prints the 3 generated ids"
	else
		fail "generate --prompt-ids without a tokenizer: $(cat "$out" "$err")"
	fi
fi

# An --out that cannot be made: the directory and the system's reason.
if [ -d /proc/self ] && run 1 "convert --out /proc/nope" "$COLI" convert -m "$q" --out /proc/nope; then
	if contains "$err" "cannot create the directory /proc/nope: No such file or directory" &&
		! contains "$err" "input/output error"; then
		pass "convert --out in a directory that cannot hold one: names it, with the system's reason"
	else
		fail "convert --out /proc/nope: $(cat "$err")"
	fi
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
