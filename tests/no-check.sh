#!/bin/sh
# no-check.sh - stands in for the test suite when configure did not find the
# Check unit-test library: `make check` must fail loudly, not pass empty.
cat <<'EOF'
FAIL: the Check unit-test library (check >= 0.11) was not found by configure,
so the test programs were not built.

Install it and configure again, then rerun the tests:
  Debian/Ubuntu:  apt-get install check pkg-config
  Fedora:         dnf install check-devel pkgconf
  macOS (brew):   brew install check pkg-config
  then:           ./configure && make check
EOF
exit 1
