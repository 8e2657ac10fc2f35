#!/bin/sh
# install-hygiene.sh - `make install` into a scratch DESTDIR installs what it
# should and no libtool archive, and `make uninstall` takes all of it away
# again, our own directories included.
#
# Usage: install-hygiene.sh LIBDIR INCLUDEDIR PKGDATADIR
# (run by `make installcheck` in the build directory). Environment: MAKE
# (default make), COLI_DEMO_INSTALLED (yes or no: configure --disable-demo).
set -eu

if [ $# -ne 3 ]; then
	echo "usage: $0 LIBDIR INCLUDEDIR PKGDATADIR" >&2
	exit 2
fi
libdir=$1
includedir=$2
pkgdatadir=$3
MAKE=${MAKE:-make}
demo_installed=${COLI_DEMO_INSTALLED:-yes}
LC_ALL=C
export LC_ALL

tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-hygiene.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
failures=0
fail() {
	failures=$((failures + 1))
	echo "install-hygiene: FAIL: $1" >&2
}

if ! $MAKE install DESTDIR="$stage" >"$tmp/install.log" 2>&1; then
	cat "$tmp/install.log" >&2
	echo "install-hygiene: FAIL: make install DESTDIR=$stage failed" >&2
	exit 1
fi

# The library is there, its libtool archive is not.
[ -e "$stage$libdir/libcolibri.so" ] || fail "no $libdir/libcolibri.so installed"
[ ! -e "$stage$libdir/libcolibri.la" ] || fail "$libdir/libcolibri.la is installed"
[ -f "$stage$includedir/colibri/colibri.h" ] || fail "no $includedir/colibri/colibri.h installed"

# The demo models: all of their files, or (configure --disable-demo) none.
for d in demo demo-glm; do
	demo=$stage$pkgdatadir/$d
	if [ "$demo_installed" = no ]; then
		[ ! -e "$demo" ] || fail "configured --disable-demo, yet $pkgdatadir/$d is installed"
	else
		for f in chat_template.jinja config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
			[ -f "$demo/$f" ] || fail "demo model file $pkgdatadir/$d/$f not installed"
		done
	fi
done

if ! $MAKE uninstall DESTDIR="$stage" >"$tmp/uninstall.log" 2>&1; then
	cat "$tmp/uninstall.log" >&2
	echo "install-hygiene: FAIL: make uninstall DESTDIR=$stage failed" >&2
	exit 1
fi

# Nothing but directories is left, and none of those is ours: the shared
# ones (bin, lib, pkgconfig, include, share) may stay, as they are the
# system's. Ours: pkgdatadir and the header directory, and any empty
# directory with our name.
find "$stage" ! -type d >"$tmp/left"
while IFS= read -r f; do
	fail "left after make uninstall: ${f#"$stage"}"
done <"$tmp/left"
for d in "$pkgdatadir" "$includedir/colibri"; do
	[ ! -e "$stage$d" ] || fail "directory left after make uninstall: $d"
done
find "$stage" -type d -empty >"$tmp/empty"
while IFS= read -r d; do
	case ${d##*/} in
	*colibri*) fail "empty directory left after make uninstall: ${d#"$stage"}" ;;
	esac
done <"$tmp/empty"

if [ "$failures" -ne 0 ]; then
	echo "install-hygiene: $failures failures" >&2
	exit 1
fi
echo "install-hygiene: ok: no .la installed, demo installed: $demo_installed; uninstall left no file and no directory of ours"
