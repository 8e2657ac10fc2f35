#!/bin/sh
# test_symbols.sh - libcolibri.so exports exactly the public API.
#
# Every dynamic symbol the shared library defines must start with coli_ (and
# not with coli__, the internal prefix), must be declared COLI_API in the
# public header, and every function the header declares must be exported.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
lib=$builddir/.libs/libcolibri.so
header=$srcdir/include/colibri/colibri.h

if [ ! -f "$lib" ]; then
	echo "FAIL: $lib was not built"
	exit 1
fi
if ! command -v nm >/dev/null 2>&1; then
	echo "FAIL: nm (binutils) is needed to inspect $lib"
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_symbols.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols, without version nodes (type A) and the markers
# the linker adds to every shared object.
if ! nm -D --defined-only "$lib" >"$tmp/nm"; then
	echo "FAIL: nm -D $lib failed"
	exit 1
fi
awk 'NF >= 3 && $2 != "A" { print $3 }' "$tmp/nm" | sed 's/@.*//' |
	grep -v -x -e _init -e _fini -e _edata -e _end -e __bss_start |
	sort -u >"$tmp/exported"

# Functions the header declares with COLI_API (the name is on that line).
sed -n 's/^COLI_API[^(]*[ *]\(coli_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u >"$tmp/declared"

. "$(dirname "$0")/lib.sh" # fail

ndeclared=$(wc -l <"$tmp/declared")
nexported=$(wc -l <"$tmp/exported")
echo "$nexported symbols exported, $ndeclared functions declared in the header"
if [ "$ndeclared" -lt 30 ]; then
	fail "only $ndeclared COLI_API functions found in $header: the parse is broken"
fi

while read -r sym; do
	case $sym in
	coli__*) fail "internal symbol exported: $sym" ;;
	coli_*) ;;
	*) fail "symbol without the coli_ prefix exported: $sym" ;;
	esac
done <"$tmp/exported"

# Exported but not declared, and declared but not exported.
comm -23 "$tmp/exported" "$tmp/declared" | grep '^coli_' | grep -v '^coli__' >"$tmp/extra"
comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
while read -r sym; do
	fail "exported but not in the public header: $sym"
done <"$tmp/extra"
while read -r sym; do
	fail "declared in the public header but not exported: $sym"
done <"$tmp/missing"

# The entry points every client needs, named here independently of the header.
for sym in coli_version_number coli_version_string coli_strerror coli_status_name \
	coli_options_create coli_options_free coli_options_set coli_model_open \
	coli_model_free coli_model_errmsg coli_model_get_info coli_tokenize coli_detokenize \
	coli_context_create coli_context_free coli_eval coli_context_logits \
	coli_sampler_create coli_sample coli_generate coli_context_stats; do
	grep -x -e "$sym" "$tmp/exported" >/dev/null || fail "key symbol not exported: $sym"
done

if [ "$failures" -ne 0 ]; then
	echo "$failures failures"
	exit 1
fi
echo "ok: every exported symbol is public API, and all of it is exported"
exit 0
