#!/bin/sh
# test_debian.sh - the Debian packaging agrees with the source: the symbols
# file of libcolibri0 lists exactly the functions the public header declares,
# and debian/changelog's version is the package version of configure.ac (the
# packaging is native, so the two are one number).
#
# dpkg-gensymbols checks the symbols file against the built library when the
# packages are built (.ci/run); this catches a new API function without its
# symbols line at `make check` time.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
symbols=$srcdir/debian/libcolibri0.symbols
header=$srcdir/include/colibri/colibri.h
changelog=$srcdir/debian/changelog

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_debian.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/lib.sh" # fail

sed -n 's/^COLI_API[^(]*[ *]\(coli_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u >"$tmp/declared"
# Symbol lines are " name@Base version"; the first line names the library.
sed -n 's/^ \([A-Za-z0-9_]*\)@Base [0-9][0-9.~+]*$/\1/p' "$symbols" | sort >"$tmp/listed"
if [ "$(head -n 1 "$symbols")" != "libcolibri.so.0 libcolibri0 #MINVER#" ]; then
	fail "$symbols does not start with 'libcolibri.so.0 libcolibri0 #MINVER#'"
fi
if [ "$(wc -l <"$tmp/declared")" -lt 30 ]; then
	fail "only $(wc -l <"$tmp/declared") COLI_API functions found in $header: the parse is broken"
fi
# Every line of the file is the header, a * field or a symbol line.
grep -v -e '^libcolibri\.so\.0 ' -e '^\* [A-Za-z-]*: ' -e '^ [A-Za-z0-9_]*@Base [0-9][0-9.~+]*$' \
	"$symbols" >"$tmp/odd"
while IFS= read -r line; do
	fail "line of $symbols not understood: '$line'"
done <"$tmp/odd"
uniq -d "$tmp/listed" >"$tmp/dup"
while read -r sym; do
	fail "listed twice in $symbols: $sym"
done <"$tmp/dup"
sort -u "$tmp/listed" >"$tmp/names"
comm -13 "$tmp/names" "$tmp/declared" >"$tmp/missing"
comm -23 "$tmp/names" "$tmp/declared" >"$tmp/extra"
while read -r sym; do
	fail "declared in the public header but not in $symbols: $sym (add ' $sym@Base VERSION')"
done <"$tmp/missing"
while read -r sym; do
	fail "in $symbols but not declared in the public header: $sym"
done <"$tmp/extra"

# The version of the top changelog entry is configure's PACKAGE_VERSION.
want=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h)
got=$(sed -n '1s/^libcolibri (\([^)]*\)) .*/\1/p' "$changelog")
if [ -z "$want" ]; then
	fail "no PACKAGE_VERSION in ./config.h"
elif [ "$got" != "$want" ]; then
	fail "debian/changelog is at version '$got', configure.ac at '$want'"
fi

if [ "$failures" -ne 0 ]; then
	echo "$failures failures"
	exit 1
fi
echo "ok: $(wc -l <"$tmp/listed") symbols in $symbols, all declared; changelog at $got"
exit 0
