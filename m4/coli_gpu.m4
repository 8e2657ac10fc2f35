# coli_gpu.m4 - the opt-in GPU tier: --with-cuda or --with-hip (docs/gpu.md).
#
# COLI_GPU_TIER sets, for Makefile.am: GPU_CUDA, GPU_HIP, GPU_ANY (conditionals);
# NVCC, NVCC_FLAGS, HIPCC, HIPCC_FLAGS (the compiler of lib/gpu/backend.cu and
# its flags, without the PIC flag the rule adds); GPU_LIBS (the runtime, for
# the link); GPU_PC_LIBS (for colibri.pc's Libs.private, with a leading blank,
# empty without a tier); GPU_LT_MODE (-shared or -static: libtool compiles
# once); coli_gpu_summary (for configure's last lines). config.h gets
# COLI_GPU_CUDA or COLI_GPU_HIP, and COLI_GPU_TARGETS ("cuda sm_80,sm_90").
# Without either option nothing here runs a compiler or changes a flag.

# _COLI_GPU_TRY(COMPILER FLAGS...): compiles conftest.cu to conftest.o, all
# output to config.log.
AC_DEFUN([_COLI_GPU_TRY], [
  echo "$as_me:$LINENO: $1" >&AS_MESSAGE_LOG_FD
  AS_IF([$1 -c conftest.cu -o conftest.$ac_objext >&AS_MESSAGE_LOG_FD 2>&1],
    [coli_gpu_ok=yes], [coli_gpu_ok=no; sed 's/^/| /' conftest.cu >&AS_MESSAGE_LOG_FD])
  rm -f conftest.$ac_objext
])

AC_DEFUN([COLI_GPU_TIER], [
AC_ARG_VAR([NVCC], [CUDA compiler (default: DIR/bin/nvcc of --with-cuda)])
AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])
AC_ARG_VAR([HIPCC], [HIP compiler (default: DIR/bin/hipcc of --with-hip)])
AC_ARG_VAR([HIPCCFLAGS], [extra flags for hipcc])
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the GPU tier for NVIDIA with the CUDA toolkit in DIR (default: $CUDA_HOME, else /usr/local/cuda); the default is no GPU tier])],
  [], [with_cuda=no])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [NVIDIA targets, a comma list of sm_NN, or native for the GPUs nvidia-smi reports (default: sm_80,sm_90, or sm_90 where nvcc has no sm_80)])],
  [], [with_cuda_arch=])
AC_ARG_WITH([hip],
  [AS_HELP_STRING([--with-hip@<:@=DIR@:>@],
    [build the GPU tier for AMD with the ROCm/HIP installation in DIR (default: $ROCM_HOME, else $ROCM_PATH, else /opt/rocm, else /usr where /usr/bin/hipcc is: Debian); needs --with-hip-arch])],
  [], [with_hip=no])
AC_ARG_WITH([hip-arch],
  [AS_HELP_STRING([--with-hip-arch=LIST],
    [AMD targets, a comma list of gfxNNNN, or native for the GPUs rocm_agent_enumerator finds; required with --with-hip (hipcc alone would build gfx803)])],
  [], [with_hip_arch=])

AS_IF([test "x$with_cuda" != xno && test "x$with_hip" != xno],
  [AC_MSG_ERROR([choose one GPU vendor: --with-cuda or --with-hip, not both])])
AS_IF([test "x$with_cuda" = xno && test -n "$with_cuda_arch"],
  [AC_MSG_ERROR([--with-cuda-arch=$with_cuda_arch needs --with-cuda])])
AS_IF([test "x$with_hip" = xno && test -n "$with_hip_arch"],
  [AC_MSG_ERROR([--with-hip-arch=$with_hip_arch needs --with-hip])])

coli_gpu=none
coli_gpu_summary=none
coli_gpu_targets=
NVCC_FLAGS=
HIPCC_FLAGS=
GPU_LIBS=
GPU_PC_LIBS=
AS_IF([test "x$enable_shared" = xno], [GPU_LT_MODE=-static], [GPU_LT_MODE=-shared])

AS_IF([test "x$with_cuda" != xno], [_COLI_GPU_CUDA])
AS_IF([test "x$with_hip" != xno], [_COLI_GPU_HIP])

AS_IF([test "x$coli_gpu" != xnone], [
  AC_DEFINE_UNQUOTED([COLI_GPU_TARGETS], ["$coli_gpu_targets"],
    [Vendor and targets of the GPU tier compiled in.])
  GPU_PC_LIBS=" $GPU_LIBS"
])
AC_SUBST([NVCC_FLAGS])
AC_SUBST([HIPCC_FLAGS])
AC_SUBST([GPU_LIBS])
AC_SUBST([GPU_PC_LIBS])
AC_SUBST([GPU_LT_MODE])
AM_CONDITIONAL([GPU_CUDA], [test "x$coli_gpu" = xcuda])
AM_CONDITIONAL([GPU_HIP], [test "x$coli_gpu" = xhip])
AM_CONDITIONAL([GPU_ANY], [test "x$coli_gpu" != xnone])
])

# ---- CUDA ------------------------------------------------------------------
AC_DEFUN([_COLI_GPU_CUDA], [
  AS_CASE([$with_cuda],
    [yes], [coli_cuda_dir=${CUDA_HOME:-/usr/local/cuda}],
    [coli_cuda_dir=$with_cuda])
  AS_IF([test -z "$NVCC"], [NVCC=$coli_cuda_dir/bin/nvcc])
  AC_MSG_CHECKING([for nvcc])
  AS_IF([test -x "$NVCC" || command -v "$NVCC" >/dev/null 2>&1], [AC_MSG_RESULT([$NVCC])], [
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([--with-cuda: no nvcc at $NVCC: pass --with-cuda=DIR (the CUDA toolkit's root) or NVCC=/path/to/nvcc])])
  coli_nvcc_version=`$NVCC --version 2>/dev/null | sed -n 's/^Cuda compilation tools, //p'`
  AS_IF([test -z "$coli_nvcc_version"], [coli_nvcc_version=`$NVCC --version 2>&1 | tail -n 1`])

  # The architectures nvcc knows, as sm_NN.
  coli_nvcc_archs=`$NVCC --list-gpu-arch 2>/dev/null | sed -n 's/^compute_/sm_/p' | tr '\n' ' '`
  AS_CASE([$with_cuda_arch],
    [native], [
      AC_MSG_CHECKING([for the compute capability of the GPUs here (nvidia-smi)])
      coli_caps=`nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep '^[[0-9]][[0-9]]*$' | sort -n -u | sed 's/^/sm_/' | tr '\n' ',' | sed 's/,$//'`
      AS_IF([test -z "$coli_caps"], [
        AC_MSG_RESULT([none])
        AC_MSG_ERROR([--with-cuda-arch=native: nvidia-smi reports no GPU here (no driver or no device); name the targets instead, such as --with-cuda-arch=sm_80,sm_90])])
      AC_MSG_RESULT([$coli_caps])
      with_cuda_arch=$coli_caps],
    [""|yes], [
      with_cuda_arch=sm_90
      AS_CASE([" $coli_nvcc_archs "], [*" sm_80 "*], [with_cuda_arch=sm_80,sm_90])],
    [no], [AC_MSG_ERROR([--without-cuda-arch: the GPU tier needs at least one target])])

  # The host side is C++ built by the host compiler: the same contract
  # (-ffp-contract=off) and visibility as the C library. --fmad=false:
  # device code must not fuse multiply-add either.
  NVCC_FLAGS="-std=c++14 -O3 --fmad=false -Xcompiler=-ffp-contract=off -Xcompiler=-fvisibility=hidden"
  coli_gencode=
  coli_last=
  for coli_arch in `echo "$with_cuda_arch" | tr ',' ' '`; do
    AS_CASE([$coli_arch], [sm_[[0-9]][[0-9]]|sm_[[0-9]][[0-9]][[0-9]]|sm_[[0-9]][[0-9]]a|sm_[[0-9]][[0-9]][[0-9]]a|sm_[[0-9]][[0-9]][[0-9]]f], [],
      [AC_MSG_ERROR([--with-cuda-arch: '$coli_arch' is not an NVIDIA target: use sm_NN (sm_80, sm_90), separated by commas])])
    coli_cc=`echo "$coli_arch" | sed 's/^sm_//'`
    AC_MSG_CHECKING([whether nvcc builds $coli_arch])
    cat >conftest.cu <<_COLI_EOF
#include <cuda_runtime.h>
__global__ void conftest_kernel(float *y, const float *x) { y[[threadIdx.x]] = x[[threadIdx.x]] * 2.0f + 1.0f; }
int conftest_launch(float *y, const float *x) { conftest_kernel<<<1, 32>>>(y, x); return (int)cudaGetLastError(); }
_COLI_EOF
    _COLI_GPU_TRY([$NVCC $NVCC_FLAGS $NVCCFLAGS -gencode arch=compute_$coli_cc,code=sm_$coli_cc])
    AC_MSG_RESULT([$coli_gpu_ok])
    rm -f conftest.cu
    AS_IF([test "x$coli_gpu_ok" = xno],
      [AC_MSG_ERROR([--with-cuda-arch: $NVCC ($coli_nvcc_version) cannot build $coli_arch; it knows: $coli_nvcc_archs(see config.log)])])
    coli_gencode="$coli_gencode -gencode arch=compute_$coli_cc,code=sm_$coli_cc"
    coli_last=$coli_cc
  done
  AS_IF([test -z "$coli_last"], [AC_MSG_ERROR([--with-cuda-arch: no target given])])
  # PTX of the newest target as well, so that newer GPUs can run the tier.
  NVCC_FLAGS="$NVCC_FLAGS$coli_gencode -gencode arch=compute_$coli_last,code=compute_$coli_last"

  coli_cuda_libdir=
  for coli_d in "$coli_cuda_dir/lib64" "$coli_cuda_dir/lib"; do
    AS_IF([test -z "$coli_cuda_libdir" && test -d "$coli_d"], [coli_cuda_libdir=$coli_d])
  done
  coli_save_LDFLAGS=$LDFLAGS
  AS_IF([test -n "$coli_cuda_libdir"], [LDFLAGS="$LDFLAGS -L$coli_cuda_libdir"])
  AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [:],
    [AC_MSG_ERROR([--with-cuda: cannot link -lcudart (cudaGetDeviceCount) from ${coli_cuda_libdir:-the default paths}: see config.log])])
  LDFLAGS=$coli_save_LDFLAGS
  # nvcc's host objects need the C++ runtime (__gxx_personality_v0).
  GPU_LIBS="-lcudart -lstdc++"
  AS_IF([test -n "$coli_cuda_libdir"], [GPU_LIBS="-L$coli_cuda_libdir $GPU_LIBS"])

  coli_gpu=cuda
  coli_gpu_targets="cuda $with_cuda_arch"
  coli_gpu_summary="CUDA, targets $with_cuda_arch ($NVCC, $coli_nvcc_version)"
  AC_DEFINE([COLI_GPU_CUDA], [1], [Define to 1 for the CUDA GPU tier (--with-cuda).])
])

# ---- HIP -------------------------------------------------------------------
AC_DEFUN([_COLI_GPU_HIP], [
  # Debian installs ROCm under /usr; exporting ROCM_PATH=/opt/rocm there
  # breaks its hipcc, so the root found here is only used to find hipcc
  # and the library, never exported.
  AS_IF([test "x$with_hip" = xyes], [
    coli_hip_dir=
    for coli_d in "$ROCM_HOME" "$ROCM_PATH" /opt/rocm /usr; do
      AS_IF([test -z "$coli_hip_dir" && test -n "$coli_d" && test -x "$coli_d/bin/hipcc"], [coli_hip_dir=$coli_d])
    done
    AS_IF([test -z "$coli_hip_dir"], [coli_hip_dir=${ROCM_HOME:-${ROCM_PATH:-/opt/rocm}}])
  ], [coli_hip_dir=$with_hip])
  AS_IF([test -z "$HIPCC"], [HIPCC=$coli_hip_dir/bin/hipcc])
  AC_MSG_CHECKING([for hipcc])
  AS_IF([test -x "$HIPCC" || command -v "$HIPCC" >/dev/null 2>&1], [AC_MSG_RESULT([$HIPCC])], [
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([--with-hip: no hipcc at $HIPCC: pass --with-hip=DIR (the ROCm root: /opt/rocm, or /usr on Debian) or HIPCC=/path/to/hipcc (Debian: apt-get install hipcc libamdhip64-dev rocm-device-libs)])])
  # hipcc --version also runs rocm_agent_enumerator, whose traceback on a
  # machine without a GPU goes to config.log only.
  coli_hipcc_version=`$HIPCC --version 2>&AS_MESSAGE_LOG_FD | sed -n -e 's/^HIP version: /HIP /p' -e '/clang version/p' | tr '\n' ',' | sed -e 's/,$//' -e 's/,/, /g'`
  AS_IF([test -z "$coli_hipcc_version"], [coli_hipcc_version="version unknown"])

  AS_CASE([$with_hip_arch],
    [""|yes], [AC_MSG_ERROR([--with-hip needs --with-hip-arch=gfxNNNN@<:@,gfxMMMM...@:>@ (such as gfx1030 for RDNA2, gfx90a for MI200) or --with-hip-arch=native; without a target hipcc silently builds gfx803, which no current GPU runs])],
    [no], [AC_MSG_ERROR([--without-hip-arch: the GPU tier needs at least one target])],
    [native], [
      AC_MSG_CHECKING([for the AMD GPUs here (rocm_agent_enumerator)])
      coli_enum=
      for coli_d in "$coli_hip_dir/bin/rocm_agent_enumerator" rocm_agent_enumerator; do
        AS_IF([test -z "$coli_enum" && command -v "$coli_d" >/dev/null 2>&1], [coli_enum=$coli_d])
      done
      coli_agents=
      AS_IF([test -n "$coli_enum"], [
        coli_agents=`$coli_enum 2>&AS_MESSAGE_LOG_FD | grep '^gfx[[0-9a-f]]*$' | grep -v -x gfx000 | sort -u | tr '\n' ',' | sed 's/,$//'`])
      AS_IF([test -z "$coli_agents"], [
        AC_MSG_RESULT([none])
        AC_MSG_ERROR([--with-hip-arch=native: ${coli_enum:-rocm_agent_enumerator (not found)} reports no AMD GPU here (no device, or no /dev/kfd access); name the targets instead, such as --with-hip-arch=gfx1030,gfx90a])])
      AC_MSG_RESULT([$coli_agents])
      with_hip_arch=$coli_agents])

  HIPCC_FLAGS="-std=c++14 -O3 -ffp-contract=off -fvisibility=hidden"
  coli_offload=
  for coli_arch in `echo "$with_hip_arch" | tr ',' ' '`; do
    AS_CASE([$coli_arch], [gfx[[0-9]]*], [],
      [AC_MSG_ERROR([--with-hip-arch: '$coli_arch' is not an AMD target: use gfxNNNN (gfx1030, gfx90a), separated by commas])])
    AC_MSG_CHECKING([whether hipcc builds $coli_arch])
    cat >conftest.cu <<_COLI_EOF
#include <hip/hip_runtime.h>
__global__ void conftest_kernel(float *y, const float *x) { y[[threadIdx.x]] = x[[threadIdx.x]] * 2.0f + 1.0f; }
int conftest_launch(float *y, const float *x) { conftest_kernel<<<1, 32>>>(y, x); return (int)hipGetLastError(); }
_COLI_EOF
    _COLI_GPU_TRY([$HIPCC $HIPCC_FLAGS $HIPCCFLAGS --offload-arch=$coli_arch])
    AC_MSG_RESULT([$coli_gpu_ok])
    rm -f conftest.cu
    AS_IF([test "x$coli_gpu_ok" = xno], [
      AS_CASE([$coli_arch],
        [gfx120[[0-9]]], [coli_need="RDNA4 needs a ROCm whose compiler is LLVM 18 or newer, officially ROCm 6.4"],
        [gfx942], [coli_need="MI300 (CDNA3) needs ROCm 6.0 or newer"],
        [gfx950], [coli_need="MI355 (CDNA4) needs ROCm 7.0 or newer (LLVM 20)"],
        [gfx110[[0-3]]], [coli_need="RDNA3 needs ROCm device libraries of ROCm 5.7 or newer; Debian 12 ships 5.2"],
        [coli_need="this compiler does not know it"])
      AC_MSG_ERROR([--with-hip-arch: $HIPCC ($coli_hipcc_version) cannot build $coli_arch: $coli_need (see config.log)])])
    coli_offload="$coli_offload --offload-arch=$coli_arch"
  done
  AS_IF([test -z "$coli_offload"], [AC_MSG_ERROR([--with-hip-arch: no target given])])
  HIPCC_FLAGS="$HIPCC_FLAGS$coli_offload"

  coli_hip_libdir=
  AS_IF([test "x$coli_hip_dir" != x/usr], [
    for coli_d in "$coli_hip_dir/lib" "$coli_hip_dir/lib64"; do
      AS_IF([test -z "$coli_hip_libdir" && test -d "$coli_d"], [coli_hip_libdir=$coli_d])
    done])
  coli_save_LDFLAGS=$LDFLAGS
  AS_IF([test -n "$coli_hip_libdir"], [LDFLAGS="$LDFLAGS -L$coli_hip_libdir"])
  AC_CHECK_LIB([amdhip64], [hipGetDeviceCount], [:],
    [AC_MSG_ERROR([--with-hip: cannot link -lamdhip64 (hipGetDeviceCount) from ${coli_hip_libdir:-the default paths} (Debian: apt-get install libamdhip64-dev): see config.log])])
  LDFLAGS=$coli_save_LDFLAGS
  GPU_LIBS="-lamdhip64 -lstdc++"
  AS_IF([test -n "$coli_hip_libdir"], [GPU_LIBS="-L$coli_hip_libdir $GPU_LIBS"])

  coli_gpu=hip
  coli_gpu_targets="hip $with_hip_arch"
  coli_gpu_summary="HIP, targets $with_hip_arch ($HIPCC, $coli_hipcc_version)"
  AC_DEFINE([COLI_GPU_HIP], [1], [Define to 1 for the HIP GPU tier (--with-hip).])
])
