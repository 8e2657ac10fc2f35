#!/bin/sh
# consumer.sh - checks an installed libcolibri from the outside: builds
# tests/consumer.c with pkg-config against the installed header and library,
# runs it on the installed demo model, and runs the installed coli tool.
#
# Usage: consumer.sh DESTDIR LIBDIR BINDIR TOP_SRCDIR PKGDATADIR
# (run by `make installcheck`; DESTDIR may be empty). Environment: CC
# (default cc), PKG_CONFIG (default pkg-config), COLI_DEMO_INSTALLED (no
# after configure --disable-demo), COLI_MANDIR and COLI_DOCDIR (the
# configured mandir and docdir; their checks are left out when unset).
#
# Also: README's hello.c, built the same way, runs on the demo model that
# `pkg-config --variable=demodir colibri` names; the installed
# coli-make-synthetic writes a model the installed coli opens, and takes
# the options its manual page lists; every document the manual pages name
# is installed.
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

# colibri.pc names the demo model's directory; README's hello.c, built with
# pkg-config, runs on it. Under DESTDIR, pkgconf puts the sysroot in front
# of the path; pkg-config 0.29 does not.
demodir=$($PKG_CONFIG --variable=demodir colibri)
case $demodir in
"$destdir$pkgdatadir/demo" | "$pkgdatadir/demo") demodir=$destdir${demodir#"$destdir"} ;;
*)
	echo "consumer: FAIL: pkg-config --variable=demodir colibri is '$demodir', not $pkgdatadir/demo" >&2
	exit 1
	;;
esac
if [ "${COLI_DEMO_INSTALLED:-yes}" = no ]; then
	demodir=$demo # the source tree's copy
elif [ ! -f "$demodir/config.json" ]; then
	echo "consumer: FAIL: no demo model in $demodir, the demodir of colibri.pc" >&2
	exit 1
fi
echo "consumer: ok: pkg-config --variable=demodir colibri: $demodir"
awk '/^```c$/ { if ((getline line) > 0 && line ~ /^\/\* hello\.c/) { f = 1; print line }; next }
     f && /^```$/ { exit } f' "$top_srcdir/README.md" >"$tmp/hello.c"
# shellcheck disable=SC2086 # the flags are meant to split into words
$CC $cflags -o "$tmp/hello" "$tmp/hello.c" $libs
"$tmp/hello" "$demodir" >"$tmp/hello.out"
cat "$tmp/hello.out"
if ! grep '^In the beginning.' "$tmp/hello.out" >/dev/null; then
	echo "consumer: FAIL: README's hello printed no text from its prompt" >&2
	exit 1
fi
echo "consumer: ok: README's hello.c with the demodir of colibri.pc"

# coli-make-synthetic is installed, and the installed coli opens its model.
synth=$destdir$bindir/coli-make-synthetic
"$synth" --out "$tmp/synthetic" --hidden 64 --layers 2 --experts 4 --active 2 --moe-inter 32 \
	--heads 4 --kv-heads 2 --head-dim 16 --vocab 100 --max-pos 64
"$coli" info --model "$tmp/synthetic" --format json >"$tmp/info.json"
if ! grep '"n_layers":2,' "$tmp/info.json" >/dev/null; then
	cat "$tmp/info.json"
	echo "consumer: FAIL: the installed coli does not see the 2 layers of coli-make-synthetic's model" >&2
	exit 1
fi
echo "consumer: ok: the installed coli opens the model of the installed coli-make-synthetic"
if [ -n "${COLI_MANDIR:-}" ]; then
	page=$destdir$COLI_MANDIR/man1/coli-make-synthetic.1
	# The long options of the help's option lines and of the page's tag lines.
	"$synth" --help | grep -e '^  *-' | grep -o -e '--[a-z-]*' | sort -u >"$tmp/synth.help"
	grep -e '^\\fB\\-' "$page" | sed 's/\\-/-/g' | grep -o -e '--[a-z-]*' | sort -u >"$tmp/synth.page"
	if [ "$(wc -l <"$tmp/synth.help")" -lt 10 ] || ! cmp -s "$tmp/synth.help" "$tmp/synth.page"; then
		diff "$tmp/synth.help" "$tmp/synth.page" >&2 || :
		echo "consumer: FAIL: the options of coli-make-synthetic --help and of $page differ" >&2
		exit 1
	fi
	echo "consumer: ok: coli-make-synthetic(1) lists the $(wc -l <"$tmp/synth.help") options of its --help"
fi

# Every document the installed manual pages name under docdir is there.
if [ -n "${COLI_MANDIR:-}" ] && [ -n "${COLI_DOCDIR:-}" ]; then
	cat "$destdir$COLI_MANDIR/man1/coli.1" "$destdir$COLI_MANDIR/man1/coli-make-synthetic.1" \
		"$destdir$COLI_MANDIR/man3/libcolibri.3" | sed 's/\\-/-/g' |
		grep -o -e "$COLI_DOCDIR/[A-Za-z0-9_.-]*" | sort -u >"$tmp/docs"
	if [ "$(wc -l <"$tmp/docs")" -lt 5 ]; then
		echo "consumer: FAIL: the manual pages name $(wc -l <"$tmp/docs") documents in $COLI_DOCDIR, not 5" >&2
		exit 1
	fi
	while IFS= read -r d; do
		if [ ! -s "$destdir$d" ]; then
			echo "consumer: FAIL: coli(1) names $d, which is not installed" >&2
			exit 1
		fi
	done <"$tmp/docs"
	echo "consumer: ok: the $(wc -l <"$tmp/docs") documents the manual pages name are installed"
fi
