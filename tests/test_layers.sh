#!/bin/sh
# test_layers.sh - the folders of lib/ are layers, and nothing runs upward
# or in a circle (docs/architecture.md, "Folders and what they may use").
#
# 1. Every #include in lib/ names its folder, and a file includes only its
#    own folder or a lower layer: base < cpu < io < store, gpu, chat <
#    decoder < model < tier < context < the public face (lib/*.c). store,
#    gpu and chat do not use each other.
# 2. tools/ include only the public header, config.h and their own files.
# 3. The calls between the built objects (nm) go the same way: an object
#    uses symbols of its own folder or of a lower layer only.
# 4. No two files call each other in a circle, directly or through others:
#    neither the library's objects nor the tool's, nor lib/'s includes.
set -u

LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
builddir=${builddir:-.}
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_layers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# The rank of a folder of lib/; store, gpu and chat share a rank but are apart.
rank() {
	case $1 in
	base) echo 0 ;;
	cpu) echo 1 ;;
	io) echo 2 ;;
	store | gpu | chat) echo 3 ;;
	decoder) echo 4 ;;
	model) echo 5 ;;
	tier) echo 6 ;;
	context) echo 7 ;;
	top) echo 8 ;;
	*) echo "" ;;
	esac
}
# lib/decoder/forward.c -> model; lib/api.c -> top
folder_of() {
	case $1 in
	lib/*/*) echo "$1" | cut -d/ -f2 ;;
	lib/*) echo top ;;
	*) echo "" ;;
	esac
}
# 0 when a file of folder $1 may use folder $2
may_use() {
	[ "$1" = "$2" ] && return 0
	ra=$(rank "$1")
	rb=$(rank "$2")
	[ -n "$ra" ] && [ -n "$rb" ] && [ "$rb" -lt "$ra" ]
}

# ---- 1. includes in lib/ ---------------------------------------------
(cd "$srcdir" && find lib -name '*.[ch]' -o -name '*.cu') | sort >"$tmp/libfiles"
[ -s "$tmp/libfiles" ] || fail "no sources found under $srcdir/lib"
: >"$tmp/incgraph"
while IFS= read -r f; do
	from=$(folder_of "$f")
	[ -n "$(rank "$from")" ] || fail "$f: lib/$from is not a known folder"
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$srcdir/$f" >"$tmp/incs"
	while IFS= read -r inc; do
		case $inc in
		colibri/colibri.h | config.h) continue ;;
		*/*) ;;
		*)
			fail "$f includes \"$inc\" without its folder"
			continue
			;;
		esac
		to=$(echo "$inc" | cut -d/ -f1)
		if [ ! -f "$srcdir/lib/$inc" ]; then
			fail "$f includes \"$inc\", which is not lib/$inc"
		elif ! may_use "$from" "$to"; then
			fail "$f ($from) includes $inc ($to): includes go downward only"
		fi
		echo "$f lib/$inc" >>"$tmp/incgraph"
	done <"$tmp/incs"
done <"$tmp/libfiles"

# ---- 2. includes in tools/ -------------------------------------------
# tools/serve/ (coli serve and coli chat) is a folder of tools/: its files
# include their own, those of tools/ ("../options.h") and the library's JSON
# reader, which is compiled into coli ("io/json.h"); tools/ include their
# own files and those of tools/serve/.
for f in "$srcdir"/tools/*.[ch] "$srcdir"/tools/serve/*.[ch]; do
	[ -f "$f" ] || continue
	case $f in
	*/tools/serve/*) here=$srcdir/tools/serve name=tools/serve/${f##*/} ;;
	*) here=$srcdir/tools name=tools/${f##*/} ;;
	esac
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" >"$tmp/incs"
	while IFS= read -r inc; do
		case $here:$inc in
		*:colibri/colibri.h | *:config.h) ;;
		*/tools/serve:../*/* | */tools/serve:serve/*) fail "$name includes \"$inc\": not a file of tools/" ;;
		*/tools/serve:../*) [ -f "$srcdir/tools/${inc#../}" ] || fail "$name includes \"$inc\", not a file of tools/" ;;
		*/tools/serve:io/json.h) ;;
		*/tools:serve/*) [ -f "$srcdir/tools/$inc" ] || fail "$name includes \"$inc\", not a file of tools/serve/" ;;
		*:*/*) fail "$name includes \"$inc\": tools use the public header only" ;;
		*) [ -f "$here/$inc" ] || fail "$name includes \"$inc\", not a file of its folder" ;;
		esac
	done <"$tmp/incs"
done

# ---- 3. and 4. the built objects -------------------------------------
if ! command -v nm >/dev/null 2>&1; then
	fail "nm (binutils) is needed to read the objects"
fi
# One object per source: libtool's PIC copy where there is one.
(cd "$builddir" && find lib -path '*/.libs/*.o' | sort) >"$tmp/objs"
[ -s "$tmp/objs" ] || (cd "$builddir" && find lib -name '*.o' | sort) >"$tmp/objs"
[ -s "$tmp/objs" ] || fail "no objects of the library under $builddir/lib: build it first"
(cd "$builddir" && find tools -name '*.o' ! -name 'make[-_]synthetic*' | sort) >"$tmp/tobjs"
[ -s "$tmp/tobjs" ] || fail "no objects of coli under $builddir/tools: build it first"

# symbols: "source D|U symbol", the source named as in lib/<folder>/<file>
names() {
	while IFS= read -r o; do
		b=${o##*/}
		b=${b#libcolibri_internal_la-}
		d=${o%/*}
		d=${d%/.libs}
		src=$d/${b%.o}
		nm "$builddir/$o" | awk -v s="$src" '
			NF == 3 && $2 ~ /^[TDBRCV]$/ { print s, "D", $3 }
			NF == 2 && $1 == "U" { print s, "U", $2 }'
	done
}
names <"$tmp/objs" >"$tmp/libsyms"
names <"$tmp/tobjs" >"$tmp/toolsyms"

# edges "a b": a uses a symbol b defines
edges() {
	awk '$2 == "D" { def[$3] = $1; next }
	     { use[NR] = $1 " " $3 }
	     END { for (i in use) { split(use[i], p, " ")
	               if ((p[2] in def) && def[p[2]] != p[1]) print p[1], def[p[2]] } }' "$1" | sort -u
}
edges "$tmp/libsyms" >"$tmp/libcalls"
edges "$tmp/toolsyms" >"$tmp/toolcalls"
[ -s "$tmp/libcalls" ] || fail "no calls found between the library's objects"

while read -r a b; do
	fa=$(folder_of "$a")
	fb=$(folder_of "$b")
	if ! may_use "$fa" "$fb"; then
		syms=$(awk -v a="$a" -v b="$b" '$1 == b && $2 == "D" { d[$3] = 1 }
			$1 == a && $2 == "U" { u[$3] = 1 }
			END { for (s in u) if (s in d) printf "%s ", s }' "$tmp/libsyms")
		fail "$a ($fa) calls up into $b ($fb): $syms"
	fi
done <"$tmp/libcalls"

# Prints the files that reach themselves through the edges in $1.
circles() {
	awk '{ n[$1] = 1; n[$2] = 1; r[$1, $2] = 1 }
	     END { for (k in n) for (i in n) if ((i, k) in r) for (j in n) if ((k, j) in r) r[i, j] = 1
	           for (i in n) if ((i, i) in r) { printf "%s:", i
	               for (j in n) if (j != i && ((i, j) in r) && ((j, i) in r)) printf " %s", j
	               printf "\n" } }' "$1" | sort
}
for g in libcalls toolcalls incgraph; do
	circles "$tmp/$g" >"$tmp/circles"
	while IFS= read -r line; do
		fail "in a circle ($g): $line"
	done <"$tmp/circles"
done

nl=$(wc -l <"$tmp/libcalls")
nt=$(wc -l <"$tmp/toolcalls")
ni=$(wc -l <"$tmp/incgraph")
if [ "$fails" -ne 0 ]; then
	echo "$fails failures"
	exit 1
fi
echo "PASS: $ni includes and $nl calls between the library's files go downward, without a circle;" \
	"$nt calls between coli's files, without a circle"
exit 0
