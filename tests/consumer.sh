#!/bin/sh
# consumer.sh - checks an installed libcolibri from the outside: builds
# tests/consumer.c with pkg-config against the installed header and library,
# runs it on the installed demo model, and runs the installed coli tool.
#
# Usage: consumer.sh DESTDIR LIBDIR BINDIR TOP_SRCDIR PKGDATADIR
# (run by `make installcheck`; DESTDIR may be empty). Environment: CC
# (default cc), PKG_CONFIG (default pkg-config), COLI_DEMO_INSTALLED (no
# after configure --disable-demo).
set -eu

if [ $# -ne 5 ]; then
	echo "usage: $0 DESTDIR LIBDIR BINDIR TOP_SRCDIR PKGDATADIR" >&2
	exit 2
fi
destdir=$1
libdir=$2
bindir=$3
top_srcdir=$4
pkgdatadir=$5
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
LC_ALL=C
export LC_ALL

# pkg-config finds the installed colibri.pc; under DESTDIR the paths in it
# are those of the final prefix, which the sysroot maps into DESTDIR.
PKG_CONFIG_PATH=$destdir$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
if [ -n "$destdir" ]; then
	PKG_CONFIG_SYSROOT_DIR=$destdir
	export PKG_CONFIG_SYSROOT_DIR
fi
LD_LIBRARY_PATH=$destdir$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "consumer: pkg-config colibri $($PKG_CONFIG --modversion colibri)"
cflags=$($PKG_CONFIG --cflags colibri)
libs=$($PKG_CONFIG --libs colibri)
echo "consumer: $CC $cflags consumer.c $libs"
# shellcheck disable=SC2086 # the flags are meant to split into words
$CC $cflags -o "$tmp/consumer" "$top_srcdir/tests/consumer.c" $libs

demo=$destdir$pkgdatadir/demo
if [ "${COLI_DEMO_INSTALLED:-yes}" = no ]; then
	# configure --disable-demo: none installed; use the source tree's copy.
	if [ -e "$demo" ]; then
		echo "consumer: FAIL: configured --disable-demo, yet $demo exists" >&2
		exit 1
	fi
	demo=$top_srcdir/data/demo
elif [ ! -f "$demo/config.json" ]; then
	echo "consumer: FAIL: the demo model is not installed in $demo" >&2
	exit 1
fi
"$tmp/consumer" "$demo"

# The installed tool: its version (the first line of --version) is the header's.
coli=$destdir$bindir/coli
want=$(sed -n 's/^#define COLI_VERSION_STRING "\(.*\)"$/\1/p' "$top_srcdir/include/colibri/colibri.h")
got=$("$coli" --version | sed -n 1p)
if [ "$got" != "coli (libcolibri) $want" ]; then
	echo "consumer: FAIL: '$coli --version' printed '$got', expected 'coli (libcolibri) $want'" >&2
	exit 1
fi
echo "consumer: ok: $got"

# Without --model the installed coli uses the installed demo model. Its
# compiled-in data directory lies outside DESTDIR, so a staged install is
# pointed at its copy through COLI_DEMO_MODEL, as is one without a demo.
if [ -n "$destdir" ] || [ "${COLI_DEMO_INSTALLED:-yes}" = no ]; then
	COLI_DEMO_MODEL=$demo
	export COLI_DEMO_MODEL
else
	unset COLI_DEMO_MODEL
fi
"$coli" generate --prompt "In the beginning" --max-tokens 8 --temperature 0 --format json >"$tmp/gen.json"
cat "$tmp/gen.json"
if ! grep "^{\"model\":\"$demo\",.*\"tokens\":\[[0-9]" "$tmp/gen.json" >/dev/null; then
	echo "consumer: FAIL: coli generate did not use $demo or produced no tokens" >&2
	exit 1
fi
echo "consumer: ok: coli generate with the installed demo model"
