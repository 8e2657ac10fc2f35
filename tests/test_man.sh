#!/bin/sh
# test_man.sh - the manual pages say what the tool and the header have.
#
# coli(1): the commands `coli --help' lists are the page's commands (its
# .SS "coli NAME" subsections of COMMANDS), and for every command the options
# `coli NAME --help' lists are the options the page lists for it (the tag
# lines of its .TP entries), short form, long form and value name alike; the
# same for the options of `coli --help' and the page's OPTIONS section.
# The page names the configured demo model directory.
# libcolibri(3): every COLI_API function of the header is named in the page
# as a function and every function named there is in the header; every
# enumerator and macro of the header is in the page, and every coli_/COLI_
# name of the page is in the header; the example is README.md's hello.c and
# it compiles against the header.
# coli-make-synthetic(1): the options of `coli-make-synthetic --help' are
# those the page lists.
#
# Both sides are parsed, not listed here, so the test follows the tool and
# the header as they change and fails when a page falls behind.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=${COLI:-$builddir/coli}
page1=${COLI_MAN1:-$builddir/man/coli.1}
page3=${COLI_MAN3:-$srcdir/man/libcolibri.3}
header=$srcdir/include/colibri/colibri.h
readme=$srcdir/README.md
CC=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/lib.sh" # pass, fail

for f in "$COLI" "$page1" "$page3" "$header" "$readme"; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f is missing"
		exit 1
	fi
done

# Option lines of --help output on stdin, one per line on stdout as
# "-x --long VALUE" (short form and value only when there are any). An
# option line is indented 2 to 6 columns: "  -x, --long VALUE  text",
# "      --long VALUE  text" or "  --long VALUE  text"; the value follows
# the name after one blank, the text after two or more (or on the next
# line). Continuation lines are indented further and are not read.
help_options() {
	sed -n -E 's/^ {2,6}(-[A-Za-z0-9], )?(--[A-Za-z0-9][A-Za-z0-9-]*)( ([^ ]+))?( {2,}.*)?$/\1\2 \4/p' |
		sed 's/^\(-[A-Za-z0-9]\), /\1 /' | awk '{ $1 = $1; print }' | sort
}

# The roff text on stdin as plain text: font escapes dropped, \- and \e
# resolved, the quotes of macro arguments removed.
unroff() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\f(CW//g' -e 's/\\-/-/g' -e 's/\\&//g' \
		-e 's/\\(aq/'"'"'/g' -e 's/\\(dq/"/g' -e 's/\\e/\\/g'
}

# The tag lines of the .TP entries that name options, in the part of page
# $1 that awk program $2 selects (it sets sel), as help_options prints them.
page_options() {
	awk "$2"'
		/^\.(SH|SS)/ { tp = 0 }
		sel && tp { if ($0 ~ /^\\fB\\-/) print; tp = 0; next }
		sel && /^\.TP/ { tp = 1 }' "$1" | unroff | sed 's/^/  /' | help_options
}

# Compares sorted lists $2 (from the tool or header) and $3 (from the page);
# $1 says what they are.
compare() {
	comm -23 "$2" "$3" >"$tmp/only_a"
	comm -13 "$2" "$3" >"$tmp/only_b"
	if [ -s "$tmp/only_a" ] || [ -s "$tmp/only_b" ]; then
		fail "$1 differ"
		sed 's/^/    missing from the page: /' "$tmp/only_a"
		sed 's/^/    only in the page:      /' "$tmp/only_b"
	else
		pass "$1 agree ($(wc -l <"$2" | tr -d ' '))"
	fi
}

# ---- coli(1) -------------------------------------------------------------

if ! "$COLI" --help >"$tmp/main.help" 2>"$tmp/err"; then
	fail "'coli --help' failed"
	cat "$tmp/err"
fi
# Commands: the lines after "Commands:" up to the first blank line.
awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
     on && /^  [a-z]/ { print $1 }' "$tmp/main.help" | sort >"$tmp/cmds.tool"
sed -n 's/^\.SS "\{0,1\}coli \([a-z][a-z-]*\)"\{0,1\}$/\1/p' "$page1" | sort >"$tmp/cmds.page"
if [ "$(wc -l <"$tmp/cmds.tool")" -lt 5 ]; then
	fail "fewer than 5 commands parsed from 'coli --help': the parse is broken"
fi
compare "commands of 'coli --help' and of coli(1)" "$tmp/cmds.tool" "$tmp/cmds.page"

# Options of coli itself.
help_options <"$tmp/main.help" >"$tmp/opts.tool"
page_options "$page1" '/^\.SH/ { sel = ($0 ~ /^\.SH "?OPTIONS"?$/) }' >"$tmp/opts.page"
compare "options of 'coli --help' and of the OPTIONS of coli(1)" "$tmp/opts.tool" "$tmp/opts.page"

# Options of each command, of the tool and of the page.
sort -u "$tmp/cmds.tool" "$tmp/cmds.page" >"$tmp/cmds.all"
while read -r cmd; do
	if grep -x -e "$cmd" "$tmp/cmds.tool" >/dev/null; then
		if ! "$COLI" "$cmd" --help >"$tmp/cmd.help" 2>"$tmp/err"; then
			fail "'coli $cmd --help' failed"
			cat "$tmp/err"
		fi
	else
		: >"$tmp/cmd.help"
	fi
	help_options <"$tmp/cmd.help" >"$tmp/opts.tool"
	if [ ! -s "$tmp/opts.tool" ] && [ -s "$tmp/cmd.help" ]; then
		fail "no options parsed from 'coli $cmd --help': the parse is broken"
	fi
	page_options "$page1" '/^\.SH/ { sel = 0 } /^\.SS/ { sel = ($0 ~ /^\.SS "?coli '"$cmd"'"?$/) }' \
		>"$tmp/opts.page"
	compare "options of 'coli $cmd --help' and of coli(1)" "$tmp/opts.tool" "$tmp/opts.page"
done <"$tmp/cmds.all"

# The page as built names the configured demo model, and nothing is left
# to substitute.
if grep '@[A-Za-z_]*@' "$page1" >"$tmp/left"; then
	fail "$page1 has unsubstituted variables:"
	sed 's/^/    /' "$tmp/left"
else
	pass "no @variable@ is left in $page1"
fi
if [ -n "${COLI_PKGDATADIR:-}" ]; then
	if unroff <"$page1" | grep -F -x -e ".I $COLI_PKGDATADIR/demo" >/dev/null; then
		pass "coli(1) names the demo model in $COLI_PKGDATADIR/demo"
	else
		fail "coli(1) does not name the demo model in $COLI_PKGDATADIR/demo under FILES"
	fi
fi

# ---- libcolibri(3) -------------------------------------------------------

# Functions the header declares with COLI_API (the name is on that line).
sed -n 's/^COLI_API[^(]*[ *]\(coli_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u >"$tmp/fn.header"
if [ "$(wc -l <"$tmp/fn.header")" -lt 30 ]; then
	fail "fewer than 30 COLI_API functions parsed from $header: the parse is broken"
fi
# Functions the page names: a coli_ name followed by "(" ("coli_eval()",
# ".BR coli_eval ()", a prototype).
unroff <"$page3" | tr -d '"' | grep -o 'coli_[a-z0-9_]* *(' | sed 's/ *($//' | sort -u \
	>"$tmp/fn.page"
compare "COLI_API functions of colibri.h and functions of libcolibri(3)" \
	"$tmp/fn.header" "$tmp/fn.page"

# Names of the header: every coli_/COLI_ identifier in it, and COLI_NAME for
# each X(NAME, ...) row of COLI_STATUS_MAP.
{
	grep -o '[Cc][Oo][Ll][Ii]_[A-Za-z0-9_]*' "$header"
	sed -n 's/^ *X(\([A-Z]*\),.*/COLI_\1/p' "$header"
} | sort -u >"$tmp/names.header"
# What the page must name: enumerators ("    COLI_X = ...", and the status
# rows) and macros, except names ending in "_" (internal helpers) and the
# macros of the library's own build.
{
	sed -n 's/^ *\(COLI_[A-Z0-9_]*\) = .*/\1/p' "$header"
	sed -n 's/^ *X(\([A-Z]*\),.*/COLI_\1/p' "$header"
	sed -n 's/^#define \(COLI_[A-Z0-9_]*\).*/\1/p' "$header"
} | grep -v '_$' | grep -v -x -e COLI_BUILDING_LIBRARY | sort -u >"$tmp/names.required"
if [ "$(wc -l <"$tmp/names.required")" -lt 30 ]; then
	fail "fewer than 30 enumerators and macros parsed from $header: the parse is broken"
fi
unroff <"$page3" | grep -o '[Cc][Oo][Ll][Ii]_[A-Za-z0-9_]*' | sort -u >"$tmp/names.page"
comm -23 "$tmp/names.required" "$tmp/names.page" >"$tmp/missing"
if [ -s "$tmp/missing" ]; then
	fail "enumerators or macros of colibri.h missing from libcolibri(3):"
	sed 's/^/    /' "$tmp/missing"
else
	pass "every enumerator and macro of colibri.h is in libcolibri(3) ($(wc -l <"$tmp/names.required" | tr -d ' '))"
fi
comm -13 "$tmp/names.header" "$tmp/names.page" >"$tmp/extra"
if [ -s "$tmp/extra" ]; then
	fail "names in libcolibri(3) that colibri.h does not have:"
	sed 's/^/    /' "$tmp/extra"
else
	pass "every coli_/COLI_ name of libcolibri(3) is in colibri.h"
fi

# The example: the first .EX block after .SH EXAMPLES, and README.md's first
# C block.
awk '/^\.SH/ { ex = ($0 ~ /EXAMPLES/) } ex && /^\.EX/ { on = 1; next }
     on && /^\.EE/ { exit } on' "$page3" | unroff >"$tmp/hello_page.c"
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$readme" >"$tmp/hello.c"
if [ ! -s "$tmp/hello.c" ]; then
	fail "no C example found in $readme"
elif ! grep -F -e 'hello.c' "$tmp/hello.c" >/dev/null; then
	fail "the first C block of $readme is not hello.c"
elif cmp -s "$tmp/hello.c" "$tmp/hello_page.c"; then
	pass "the example of libcolibri(3) is hello.c of README.md"
else
	fail "the example of libcolibri(3) differs from hello.c of README.md:"
	diff "$tmp/hello.c" "$tmp/hello_page.c" | sed 's/^/    /'
fi
if $CC -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$srcdir/include" "$tmp/hello_page.c" \
	>"$tmp/cc.out" 2>&1; then
	pass "the example of libcolibri(3) compiles ($CC -std=c11 -Wall -Wextra -Werror)"
else
	fail "the example of libcolibri(3) does not compile with $CC:"
	sed 's/^/    /' "$tmp/cc.out"
fi

# ---- coli-make-synthetic(1) ----------------------------------------------

# Its options are those of its --help, as for coli's commands.
synth=${COLI_MAKE_SYNTHETIC:-$builddir/coli-make-synthetic}
page_synth=$srcdir/man/coli-make-synthetic.1
if [ ! -x "$synth" ] || [ ! -f "$page_synth" ]; then
	fail "$synth or $page_synth is missing"
elif ! "$synth" --help >"$tmp/synth.help" 2>"$tmp/err"; then
	fail "'coli-make-synthetic --help' failed"
	cat "$tmp/err"
else
	help_options <"$tmp/synth.help" >"$tmp/opts.tool"
	page_options "$page_synth" '/^\.SH/ { sel = ($0 ~ /^\.SH "?OPTIONS"?$/) }' >"$tmp/opts.page"
	if [ "$(wc -l <"$tmp/opts.tool")" -lt 10 ]; then
		fail "fewer than 10 options parsed from 'coli-make-synthetic --help': the parse is broken"
	fi
	compare "options of 'coli-make-synthetic --help' and of coli-make-synthetic(1)" \
		"$tmp/opts.tool" "$tmp/opts.page"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
