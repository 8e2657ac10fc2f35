#!/bin/sh
# test_man_lint.sh - the manual pages format without a warning, by groff
# (-ww: all warnings) and by mandoc (-T lint).
#
# Without groff or mandoc the check cannot run: it is reported as skipped
# (exit status 77) on a developer's machine, and as a failure when CI=true,
# since CI installs both (.ci/run).
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
pages="$builddir/man/coli.1 $srcdir/man/libcolibri.3 $srcdir/man/coli-make-synthetic.1"

missing=
for tool in groff mandoc; do
	command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL:$missing not found: CI must install it (Debian: groff-base, mandoc)"
		exit 1
	fi
	echo "SKIP: the manual pages were NOT linted:$missing not found" \
		"(Debian: apt-get install groff-base mandoc)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_man_lint.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

failures=0
for page in $pages; do
	if [ ! -f "$page" ]; then
		echo "FAIL: $page is missing"
		failures=$((failures + 1))
		continue
	fi
	# groff's exit status is 0 even after warnings: its output is the verdict.
	groff -man -ww -z "$page" >"$tmp/out" 2>&1
	status=$?
	if [ "$status" -ne 0 ] || [ -s "$tmp/out" ]; then
		echo "FAIL: groff -man -ww -z $page (exit status $status):"
		sed 's/^/    /' "$tmp/out"
		failures=$((failures + 1))
	else
		echo "ok: groff -man -ww -z $page"
	fi
	mandoc -T lint "$page" >"$tmp/out" 2>&1
	status=$?
	if [ "$status" -ne 0 ] || [ -s "$tmp/out" ]; then
		echo "FAIL: mandoc -T lint $page (exit status $status):"
		sed 's/^/    /' "$tmp/out"
		failures=$((failures + 1))
	else
		echo "ok: mandoc -T lint $page"
	fi
done
[ "$failures" -eq 0 ]
