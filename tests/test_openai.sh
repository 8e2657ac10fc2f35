#!/bin/sh
# test_openai.sh - the openai npm package (major 6) against `coli serve` on
# the demo model (tests/openai_check.mjs): chat whole and streamed, the
# stream helper, stop strings, limits, seeds, errors, usage, parallel
# streams, a client that goes away.
#
# The package is found in COLI_NODE_MODULES (a node_modules directory; .ci/run
# installs openai@6 into one), else through node's own resolution. Skipped
# (77), saying why, when coli was built without libmicrohttpd or node or the
# package is missing: the test never counts as passed without running.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
COLI=$builddir/coli
demo=${COLI_DEMO_MODEL:-$srcdir/data/demo}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_openai
. "$(dirname "$0")/serve_lib.sh"
need_microhttpd

if ! command -v node >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: node and curl are needed"
	exit 77
fi
# ES modules resolve packages from the script's directory upwards: the
# check runs from $tmp, next to a link to the package's node_modules.
modules=${COLI_NODE_MODULES:-}
if [ -z "$modules" ]; then
	pkg=$(cd "$tmp" && node -e 'console.log(require.resolve("openai/package.json"))' 2>/dev/null) &&
		modules=${pkg%/openai/package.json}
fi
if [ -z "$modules" ] || [ ! -f "$modules/openai/package.json" ]; then
	echo "SKIP: the openai npm package is not installed (npm install openai@6; COLI_NODE_MODULES=DIR/node_modules)"
	exit 77
fi
major=$(sed -n 's/^ *"version": *"\([0-9]*\)\..*/\1/p' "$modules/openai/package.json" | head -n 1)
if [ "$major" != 6 ]; then
	echo "SKIP: openai $major.x found in $modules; major 6 is the one that runs on Node 20"
	exit 77
fi
ln -s "$modules" "$tmp/node_modules"
cp "$srcdir/tests/openai_check.mjs" "$tmp/"

# one slow server: a step every 20 ms, so that a client can leave mid-reply
COLI_SERVE_STEP_DELAY_MS=20
export COLI_SERVE_STEP_DELAY_MS
start slow --parallel 1 --ctx-size 512 --api-key test-key-1 || exit 1
unset COLI_SERVE_STEP_DELAY_MS
slow=$base
start main --parallel 4 --ctx-size 512 --api-key test-key-1 || exit 1
if COLI_BASE_URL=$base/v1 COLI_SLOW_BASE_URL=$slow/v1 COLI_API_KEY=test-key-1 COLI_MODEL_ID=demo \
	node --test --test-reporter=spec "$tmp/openai_check.mjs" >"$out" 2>&1; then
	sed -n 's/^/    /p' "$out" | tail -n 20
	pass "the openai package's cases against coli serve"
else
	sed 's/^/    /' "$out"
	fail "the openai package's cases against coli serve"
fi
echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
