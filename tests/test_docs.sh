#!/bin/sh
# test_docs.sh - what README.md and coli(1) tell a user to do works:
#  - the coli(1) example with --stop, run as the page prints it, stops
#    there;
#  - every command of `coli --help' takes --verbose, as README says;
#  - `coli bench --help', coli(1) and the code give the disk probe the same
#    number of reads;
#  - every C block of README.md that is a whole program compiles with
#    -Wall -Wextra -Werror against the built library, and hello.c prints
#    what README says it prints;
#  - `coli generate --prompt-ids' echoes the prompt's text as --prompt does.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=${COLI:-$builddir/coli}
page1=${COLI_MAN1:-$builddir/man/coli.1}
readme=$srcdir/README.md
CC=${CC:-cc}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_docs


abs_builddir=$(cd "$builddir" && pwd)
abs_srcdir=$(cd "$srcdir" && pwd)
demo=$abs_srcdir/data/demo
# A VPATH build has no data/demo beside coli.
COLI_DEMO_MODEL=$demo
export COLI_DEMO_MODEL

# The roff text on stdin as plain text (as tests/test_man.sh reads it).
unroff() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\f(CW//g' -e 's/\\-/-/g' -e 's/\\&//g' \
		-e 's/\\(aq/'"'"'/g' -e 's/\\(dq/"/g' -e 's/\\e/\\/g'
}

# ---- coli(1): the --stop example ---------------------------------------------

# The .EX block of EXAMPLES that uses --stop, run by bash (the page says its
# quoting is bash's) in a directory holding the question.txt it reads.
awk '/^\.SH/ { ex = ($0 ~ /EXAMPLES/) } ex && /^\.EX/ { on = 1; block = ""; next }
     on && /^\.EE/ { on = 0; if (block ~ /\\-\\-stop/) { printf "%s", block; exit }; next }
     on { block = block $0 "\n" }' "$page1" | unroff >"$tmp/stop_example"
if [ ! -s "$tmp/stop_example" ]; then
	fail "no example with --stop in the EXAMPLES of $page1"
elif ! command -v bash >/dev/null 2>&1; then
	fail "bash is needed to run the --stop example of coli(1)"
else
	mkdir "$tmp/ex"
	printf 'In the beginning' >"$tmp/ex/question.txt"
	if (cd "$tmp/ex" && PATH=$abs_builddir:$PATH bash "$tmp/stop_example") >"$out" 2>"$err"; then
		if grep -F -x 'coli generate: stopped: a --stop string' "$err" >/dev/null &&
			[ "$(wc -l <"$out")" -eq 1 ] && grep '^In the beginning.' "$out" >/dev/null; then
			pass "the --stop example of coli(1) stops at the end of the first line: $(cat "$out")"
		else
			fail "the --stop example of coli(1) did not stop at a line's end:"
			sed 's/^/    /' "$out" "$err"
		fi
	else
		fail "the --stop example of coli(1) failed: $(cat "$tmp/stop_example")"
		sed 's/^/    /' "$err"
	fi
fi

# ---- --verbose in every command --------------------------------------------

if grep -F -e 'Every command takes `--format text|json` and `--verbose`' "$readme" >/dev/null; then
	"$COLI" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
		on && /^  [a-z]/ { print $1 }' >"$tmp/cmds"
	if [ "$(wc -l <"$tmp/cmds")" -lt 9 ]; then
		fail "fewer than 9 commands parsed from 'coli --help': the parse is broken"
	fi
	while read -r cmd; do
		# An unknown option is a usage error before --help is acted on.
		if run 0 "coli $cmd --verbose --format json --help" "$COLI" "$cmd" --verbose \
			--format json --help; then
			if grep -e '^      --verbose  ' "$out" >/dev/null; then
				pass "coli $cmd takes --verbose and --format, and its help lists --verbose"
			else
				fail "'coli $cmd --help' does not list --verbose"
			fi
		fi
	done <"$tmp/cmds"
else
	fail "README.md no longer says that every command takes --format and --verbose"
fi
# What --verbose says in the two commands that open no model.
if run 0 "coli gpu --verbose" "$COLI" gpu --verbose; then
	if grep -e '^coli gpu: CUDA_VISIBLE_DEVICES' "$err" >/dev/null; then
		pass "coli gpu --verbose names the variables that pick the devices"
	else
		fail "coli gpu --verbose printed no CUDA_VISIBLE_DEVICES line"
	fi
fi
if run 0 "coli convert --verbose" "$COLI" convert --verbose --weights q8 --out "$tmp/conv"; then
	if grep -F -e "coli convert: converting $demo into $tmp/conv/model.coli: weights q8" "$err" \
		>/dev/null; then
		pass "coli convert --verbose says what it converts, into what"
	else
		fail "coli convert --verbose did not say what it converts:"
		sed 's/^/    /' "$err"
	fi
fi

# ---- the disk probe's number of reads ----------------------------------------

code=$(sed -n 's/^#define DISK_PROBE_READS \([0-9][0-9]*\)$/\1/p' "$srcdir/tools/disk_probe.h")
help=$("$COLI" bench --help | tr '\n' ' ' | sed -n 's/.*at most \([0-9][0-9]*\) reads.*/\1/p')
man=$(unroff <"$page1" | tr '\n' ' ' | sed -n 's/.*until \([0-9][0-9]*\) reads are done.*/\1/p')
if [ -z "$code" ] || [ -z "$help" ] || [ -z "$man" ]; then
	fail "the disk probe's reads not found: code '$code', help '$help', page '$man'"
elif [ "$code" = "$help" ] && [ "$help" = "$man" ]; then
	pass "the disk probe's reads are $code in the code, the help and coli(1)"
else
	fail "the disk probe's reads: $code in the code, $help in 'coli bench --help', $man in coli(1)"
fi

# ---- README.md's C programs ---------------------------------------------------

# Each ```c block with a main() as its own file; hello.c is run on the demo
# model, as README runs it, and must print what README says.
awk -v dir="$tmp" '/^```c$/ { on = 1; n++; f = dir "/readme" n ".c"; next }
     on && /^```$/ { on = 0; next } on { print > f }' "$readme"
nprog=0
for f in "$tmp"/readme*.c; do
	[ -f "$f" ] || continue
	grep -e '^int main' "$f" >/dev/null || continue
	nprog=$((nprog + 1))
	exe=${f%.c}
	# shellcheck disable=SC2086 # the sanitizer flags split into words
	if $CC -std=c11 -Wall -Wextra -Werror ${COLI_SAN_CFLAGS:-} -I"$srcdir/include" -o "$exe" "$f" \
		${COLI_SAN_LDFLAGS:-} -L"$abs_builddir/.libs" -Wl,-rpath,"$abs_builddir/.libs" -lcolibri \
		>"$tmp/cc.out" 2>&1; then
		pass "README.md's C block $(sed -n 1p "$f") compiles and links ($CC -Wall -Wextra -Werror)"
	else
		fail "README.md's C block $(sed -n 1p "$f") does not compile:"
		sed 's/^/    /' "$tmp/cc.out"
		continue
	fi
	case $(sed -n 1p "$f") in
	'/* hello.c'*)
		if run 0 "README's hello on the demo model" "$exe" "$demo"; then
			said=$(sed -n 's/^It prints the prompt and one sampled line, e\.g\. `\(.*\)$/\1/p' "$readme")
			if [ "$(wc -l <"$out")" -eq 1 ] && grep -e '^In the beginning.' "$out" >/dev/null &&
				grep -e '^[0-9][0-9]* tokens, stopped: stop$' "$err" >/dev/null &&
				[ -n "$said" ] && grep -F -e "$said" "$out" >/dev/null; then
				pass "README's hello prints one line from the prompt and stops at its end: $(cat "$out")"
			else
				fail "README's hello printed other than README says:"
				sed 's/^/    /' "$out" "$err"
			fi
		fi
		if run 2 "README's hello without a model directory" "$exe"; then
			pass "README's hello without a model directory is a usage error"
		fi
		;;
	esac
done
if [ "$nprog" -lt 1 ]; then
	fail "no C program found in $readme"
fi

# ---- --prompt-ids echoes its text ----------------------------------------------

if run 0 "coli tokenize" "$COLI" tokenize --text "In the beginning"; then
	ids=$(tr ' ' ',' <"$out")
	if run 0 "coli generate --prompt" "$COLI" generate --prompt "In the beginning" --temperature 0 -n 6; then
		cp "$out" "$tmp/by_text"
		if run 0 "coli generate --prompt-ids $ids" "$COLI" generate --prompt-ids "$ids" \
			--temperature 0 -n 6; then
			if grep -e '^In the beginning' "$out" >/dev/null && cmp -s "$out" "$tmp/by_text"; then
				pass "generate --prompt-ids prints the prompt's text first, as --prompt does"
			else
				fail "generate --prompt-ids printed '$(cat "$out")', --prompt '$(cat "$tmp/by_text")'"
			fi
		fi
		if run 0 "coli generate --prompt-ids --no-echo" "$COLI" generate --prompt-ids "$ids" \
			--temperature 0 -n 6 --no-echo; then
			if [ "In the beginning$(cat "$out")" = "$(cat "$tmp/by_text")" ]; then
				pass "generate --prompt-ids --no-echo prints only the generated text"
			else
				fail "generate --prompt-ids --no-echo printed '$(cat "$out")'"
			fi
		fi
	fi
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
