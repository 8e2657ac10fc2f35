# lib.sh - the helpers that the shell tests share; sourced, not run:
#   . "$(dirname "$0")/lib.sh"
# (the script's own folder, so that it is found under `make check`, under
# distcheck's read-only source tree, and when .ci/run runs a test from the
# source tree against another directory).
#
# contains FILE STRING: whether the file holds the fixed string.
# scratch NAME: $tmp, a new directory removed at exit, and the files $out
# and $err in it, which run fills.
# pass and fail count the checks and print "ok: WHAT" or "FAIL: WHAT"; a
# test ends with `echo "$checks checks, $failures failures"` and
# `[ "$failures" -eq 0 ]`.

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
# $out and stderr in $err (files the test names); returns 0 if it exited with
# EXPECTED_STATUS, else fails the check, showing the start of stderr.
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

contains() {
	grep -F -e "$2" "$1" >/dev/null 2>&1
}

scratch() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	trap 'rm -rf "$tmp"' EXIT
	out=$tmp/out
	err=$tmp/err
}
