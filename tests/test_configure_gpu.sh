#!/bin/sh
# test_configure_gpu.sh - what configure does with --with-cuda / --with-hip
# (m4/coli_gpu.m4, docs/gpu.md "Building"): the targets and flags it picks,
# and what it refuses, with which message.
#
# Usage: tests/test_configure_gpu.sh [SRCDIR]   (SRCDIR has ./configure)
# Each case runs configure in a scratch directory. Cases for a vendor whose
# compiler is absent are skipped and said so; with COLI_REQUIRE_GPU=1 (CI)
# an absent nvcc or hipcc is a failure instead. Not part of `make check`:
# it runs configure a dozen times and needs the GPU compilers to mean much.
set -u

LC_ALL=C
export LC_ALL
srcdir=${1:-${srcdir:-.}}
srcdir=$(cd "$srcdir" && pwd) || exit 1
if [ ! -x "$srcdir/configure" ]; then
	echo "FAIL: no $srcdir/configure (run autoreconf -fi first)"
	exit 1
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$cuda/bin/nvcc}
HIPCC=${HIPCC:-hipcc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_configure_gpu.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/lib.sh" # pass, fail
skips=0
skip() {
	skips=$((skips + 1))
	echo "skip: $1"
}

# Runs configure with the arguments in a fresh directory $tmp/b; its output
# in $tmp/out, its status in $rc. The environment keeps no vendor roots,
# so that the defaults are what is tested.
n=0
conf() {
	n=$((n + 1))
	rm -rf "$tmp/b"
	mkdir "$tmp/b"
	(cd "$tmp/b" && env -u ROCM_PATH -u ROCM_HOME -u HIP_PATH "$srcdir/configure" -q \
		--cache-file="$tmp/config.cache" "$@") >"$tmp/out" 2>&1
	rc=$?
	cp "$tmp/out" "$tmp/out.$n"
}

# refused WHAT ARGS...: configure must fail; then each `has TEXT` checks its
# message.
refused() {
	what=$1
	shift
	conf "$@"
	if [ "$rc" -ne 0 ]; then
		pass "$what: configure $* fails"
	else
		fail "$what: configure $* succeeded"
	fi
}
has() {
	if grep -F -e "$1" "$tmp/out" >/dev/null; then
		pass "  ... and says '$1'"
	else
		fail "  ... and does not say '$1'; it said:"
		sed 's/^/    /' "$tmp/out"
	fi
}
lacks() {
	if grep -F -e "$1" "$tmp/out" >/dev/null; then
		fail "  ... and prints '$1':"
		sed 's/^/    /' "$tmp/out"
	else
		pass "  ... and prints no '$1'"
	fi
}
# built FILE TEXT: the last configure succeeded and FILE of its build
# directory has the line TEXT.
built() {
	if [ "$rc" -ne 0 ]; then
		fail "configure failed:"
		sed 's/^/    /' "$tmp/out"
	elif grep -F -x -e "$2" "$tmp/b/$1" >/dev/null; then
		pass "  $1: $2"
	else
		fail "  $1 has no line '$2':"
		grep -e GPU -e NVCC -e HIPCC -e Libs.private "$tmp/b/$1" | sed 's/^/    /'
	fi
}
# flag FLAG: the Makefile's compile flags of the tier have FLAG.
flag() {
	if grep -E -e "^(NVCC|HIPCC)_FLAGS = " "$tmp/b/Makefile" | grep -F -e " $1" >/dev/null; then
		pass "  compiler flags have $1"
	else
		fail "  compiler flags lack $1: $(grep -E -e '^(NVCC|HIPCC)_FLAGS = ' "$tmp/b/Makefile")"
	fi
}

# ---- no compiler needed ----------------------------------------------------

conf
built config.h "/* #undef COLI_GPU_CUDA */"
built config.h "/* #undef COLI_GPU_HIP */"
built config.h "/* #undef COLI_GPU_TARGETS */"
if grep -e cudart -e amdhip -e stdc++ "$tmp/b/colibri.pc" >/dev/null; then
	fail "  colibri.pc of a CPU build names a GPU runtime"
else
	pass "  colibri.pc of a CPU build names no GPU runtime"
fi
refused "two vendors" --with-cuda --with-hip
has "choose one GPU vendor: --with-cuda or --with-hip, not both"
refused "a target without its vendor" --with-cuda-arch=sm_90
has "--with-cuda-arch=sm_90 needs --with-cuda"
refused "a target without its vendor" --with-hip-arch=gfx1030
has "--with-hip-arch=gfx1030 needs --with-hip"
refused "no toolkit there" --with-cuda=/nonexistent/cuda
has "no nvcc at /nonexistent/cuda/bin/nvcc"
refused "no ROCm there" --with-hip=/nonexistent/rocm
has "no hipcc at /nonexistent/rocm/bin/hipcc"

# ---- CUDA ------------------------------------------------------------------

if [ -x "$NVCC" ]; then
	nvcc_release=$("$NVCC" --version | sed -n 's/^Cuda compilation tools, release \([0-9.]*\),.*/\1/p')
	conf --with-cuda="$cuda"
	built config.h "#define COLI_GPU_CUDA 1"
	if "$NVCC" --list-gpu-arch | grep -x compute_80 >/dev/null; then
		built config.h '#define COLI_GPU_TARGETS "cuda sm_80,sm_90"'
	else
		built config.h '#define COLI_GPU_TARGETS "cuda sm_90"'
	fi
	for f in --fmad=false -O3 -std=c++14 -Xcompiler=-fvisibility=hidden \
		"-gencode arch=compute_90,code=sm_90" "-gencode arch=compute_90,code=compute_90"; do
		flag "$f"
	done
	if grep '^Libs.private: .*-lcudart -lstdc++$' "$tmp/b/colibri.pc" >/dev/null; then
		pass "  colibri.pc: Libs.private has -lcudart -lstdc++"
	else
		fail "  colibri.pc: $(grep Libs.private "$tmp/b/colibri.pc")"
	fi

	conf --with-cuda="$cuda" --with-cuda-arch=sm_90
	built config.h '#define COLI_GPU_TARGETS "cuda sm_90"'

	refused "a target nvcc cannot build" --with-cuda="$cuda" --with-cuda-arch=sm_90,sm_10
	has "cannot build sm_10"
	has "release $nvcc_release"
	refused "not an NVIDIA target" --with-cuda="$cuda" --with-cuda-arch=gfx1030
	has "'gfx1030' is not an NVIDIA target"
	if [ -z "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null)" ]; then
		refused "native without a GPU" --with-cuda="$cuda" --with-cuda-arch=native
		has "nvidia-smi reports no GPU here"
	else
		conf --with-cuda="$cuda" --with-cuda-arch=native
		built config.h "#define COLI_GPU_CUDA 1"
	fi
elif [ "${COLI_REQUIRE_GPU:-0}" = 1 ]; then
	fail "no nvcc at $NVCC (COLI_REQUIRE_GPU=1)"
else
	skip "CUDA cases: no nvcc at $NVCC"
fi

# ---- HIP -------------------------------------------------------------------

if command -v "$HIPCC" >/dev/null 2>&1; then
	hipdir=$(dirname "$(dirname "$(command -v "$HIPCC")")")
	clang_major=$("$HIPCC" --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\)\..*/\1/p' | head -n 1)
	conf --with-hip --with-hip-arch=gfx1030,gfx90a
	built config.h "#define COLI_GPU_HIP 1"
	built config.h '#define COLI_GPU_TARGETS "hip gfx1030,gfx90a"'
	for f in --offload-arch=gfx1030 --offload-arch=gfx90a -ffp-contract=off -fvisibility=hidden -O3; do
		flag "$f"
	done
	if grep '^Libs.private: .*-lamdhip64 -lstdc++$' "$tmp/b/colibri.pc" >/dev/null; then
		pass "  colibri.pc: Libs.private has -lamdhip64 -lstdc++"
	else
		fail "  colibri.pc: $(grep Libs.private "$tmp/b/colibri.pc")"
	fi
	conf --with-hip="$hipdir" --with-hip-arch=gfx90a
	built config.h '#define COLI_GPU_TARGETS "hip gfx90a"'

	refused "no target named" --with-hip
	has "--with-hip needs --with-hip-arch="
	has "gfx803"
	refused "not an AMD target" --with-hip --with-hip-arch=sm_90
	has "'sm_90' is not an AMD target"
	# What LLVM 15 (Debian 12) cannot build; a newer compiler may.
	if [ -n "$clang_major" ] && [ "$clang_major" -lt 18 ]; then
		refused "RDNA4 on LLVM $clang_major" --with-hip --with-hip-arch=gfx1030,gfx1201
		has "cannot build gfx1201"
		has "LLVM 18"
		has "ROCm 6.4"
		has "clang version $clang_major."
		lacks "cannot build gfx1030"
	fi
	if [ -n "$clang_major" ] && [ "$clang_major" -lt 17 ]; then
		refused "MI300 on LLVM $clang_major" --with-hip --with-hip-arch=gfx942
		has "cannot build gfx942"
		has "ROCm 6.0"
	fi
	if [ -n "$clang_major" ] && [ "$clang_major" -le 15 ]; then
		refused "RDNA3 on LLVM $clang_major" --with-hip --with-hip-arch=gfx1100
		has "cannot build gfx1100"
		has "ROCm 5.7"
	fi
	if [ ! -e /dev/kfd ]; then
		refused "native without an AMD GPU" --with-hip --with-hip-arch=native
		has "reports no AMD GPU here"
		lacks "Traceback"
	fi
elif [ "${COLI_REQUIRE_GPU:-0}" = 1 ]; then
	fail "no $HIPCC (COLI_REQUIRE_GPU=1)"
else
	skip "HIP cases: no $HIPCC"
fi

echo "$checks checks, $failures failures, $skips groups skipped ($n configure runs)"
[ "$failures" -eq 0 ]
