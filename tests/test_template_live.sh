#!/bin/sh
# test_template_live.sh - randomized conversations, whitespace-control
# combinations and small feature templates rendered by jinja2 (configured
# as transformers does, by
# tools/render-template-reference.py) and by libcolibri through
# tests/render_template must be the same bytes; a raise_exception()
# message must come through. Skipped (77) when /usr/bin/python3 has no
# jinja2. COLI_TEMPLATE_SEED picks other cases (the default is fixed so
# that a run is repeatable); COLI_TEMPLATE_CASES how many.
set -u

srcdir=${srcdir:-.}
builddir=${builddir:-.}
python=${COLI_PYTHON:-/usr/bin/python3}

. "$(dirname "$0")/lib.sh" # pass, fail, run, contains, scratch
scratch test_template_live

if ! "$python" -c 'import jinja2' >/dev/null 2>&1; then
	echo "SKIP: $python cannot import jinja2 (install python3-jinja2)"
	exit 77
fi
driver=$builddir/tests/render_template
if [ ! -x "$driver" ]; then
	echo "FAIL: $driver is missing (make check builds it)"
	exit 1
fi

seed=${COLI_TEMPLATE_SEED:-20261203}
cases=${COLI_TEMPLATE_CASES:-120}
if run 0 "jinja2 and libcolibri agree on $cases cases (seed $seed)" \
	"$python" "$srcdir/tools/render-template-reference.py" --live "$driver" --count "$cases" --seed "$seed"; then
	pass "jinja2 and libcolibri agree on $cases cases (seed $seed)"
else
	sed -n '1,40p' "$out"
fi
tail -n 1 "$out"

# The goldens are what jinja2 renders today: regenerate them in scratch
# and compare, so that a changed corpus without new goldens is caught.
mkdir -p "$tmp/tools" "$tmp/tests/data/templates/expected"
cp "$srcdir/tools/render-template-reference.py" "$tmp/tools/"
cp "$srcdir"/tests/data/templates/*.jinja "$srcdir/tests/data/templates/conversations.json" "$tmp/tests/data/templates/"
if run 0 "the goldens regenerate" "$python" "$tmp/tools/render-template-reference.py" &&
	cmp -s "$tmp/tests/data/templates/expected/golden.json" "$srcdir/tests/data/templates/expected/golden.json"; then
	pass "expected/golden.json is what jinja2 renders from conversations.json"
else
	fail "expected/golden.json differs from a fresh jinja2 rendering (rerun tools/render-template-reference.py)"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
