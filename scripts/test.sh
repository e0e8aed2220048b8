#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs
#   1. the test suite on the default OpenCL device (pocl on a machine without a GPU), including the
#      strict-compiler check of the OpenCL program (tests/clc) and suite gpucc (tests/gpucc: the
#      GPU drivers' compilers with per-kernel budgets, and the GPU-profile kernels under oclgrind),
#      and the Vulkan suites on lavapipe with the validation layer;
#   2. the suites whose work depends on the OpenCL kernel configuration again with
#      ROPEQK_PROFILE=gpu: the GPU kernel configuration (work-group shapes, vector widths, no CPU
#      decode kernel) checked against fp64 on the CPU device. Not again: suite gpucc (it sets its
#      profiles itself), suite vulkan (the Vulkan backend's configuration is the same on either
#      profile) and suite one_profile (the scalar path, the API and .npy checks, and attn_gpu and
#      tiled, which choose their profiles through the API): the same work twice;
#   3. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer runs
#      after every test; pocl's own allocations are suppressed by tests/lsan.supp), the big case
#      sweeps on every 4th case (ROPEQK_TEST_STRIDE=4, tests/harness.h: host code's memory use; the
#      whole sweeps ran in stage 1), less suite shader_variants (Vulkan suites rerun with other
#      shader configurations: the same host code);
#   4. short libFuzzer runs of the .npy parser and the API's argument validation (scripts/fuzz.sh),
#      FUZZ_SECONDS each (default 60; 0 skips).
# Each stage prints its wall time at its end, and the whole at the end (CI's limit: 45 minutes on a
# 2-core AVX2 host).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# lavapipe compiles every Vulkan pipeline with LLVM (the attention shader's: about 1.7 s each) and
# Mesa caches the result on disk: one cache for the three stages, so the second and third reuse the
# first's pipelines (the SPIR-V and specialization constants are the same in every build)
export MESA_SHADER_CACHE_DIR="$PWD/build/mesa-shader-cache"
t_all=$SECONDS
stage_done() { echo "== $1: $(( (SECONDS - $2) / 60 )) min $(( (SECONDS - $2) % 60 )) s (since the start: $(( (SECONDS - t_all) / 60 )) min) =="; }

t0=$SECONDS
meson test -C build --print-errorlogs
stage_done "stage 1, the suite" "$t0"

echo "== the suites that depend on the kernel configuration, under the GPU profile (ROPEQK_PROFILE=gpu) =="
t0=$SECONDS
ROPEQK_PROFILE=gpu meson test -C build --print-errorlogs --no-suite gpucc --no-suite vulkan --no-suite one_profile
stage_done "stage 2, the GPU profile" "$t0"

echo "== sanitizer build (address, undefined) =="
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dbench=disabled >/dev/null
fi
ninja -C build-asan
# the same OpenCL programs as stage 1 (same text and options): pocl's compiled kernels are reused
# rather than compiled again (pocl keys its cache by program, device and options)
if [ ! -e build-asan/pocl-cache ] && [ -d build/pocl-cache ]; then
  ln -s ../build/pocl-cache build-asan/pocl-cache
fi
t0=$SECONDS
# intercept_tls_get_addr=0: GCC <= 13's sanitizer runtime (Debian 12 has GCC 12, glibc 2.36) takes a
# dynamic TLS block whose address happens to be 16 mod 4096 for a pre-2.25 glibc one, reads a bogus
# range before it, and LeakSanitizer's tracer dies with SIGSEGV after a test passed ("Tracer caught
# signal 11", "DTLS ... at 0x...-0x..." with log_threads=1); which block lands there depends on
# allocation patterns (the failing-build test in tests/neutral/test_config.c hit it once the program grew).
# LSan then skips dynamic TLS blocks only: heap, stacks, globals and static TLS are still scanned.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
ROPEQK_TEST_STRIDE=4 \
  meson test -C build-asan --print-errorlogs --timeout-multiplier 3 --no-suite shader_variants
stage_done "stage 3, the sanitizer build" "$t0"

if [ "${FUZZ_SECONDS:-60}" != 0 ] && [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing, ${FUZZ_SECONDS:-60} s per target =="
  t0=$SECONDS
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
  stage_done "stage 4, fuzzing" "$t0"
fi
echo "== scripts/test.sh: all stages passed in $(( (SECONDS - t_all) / 60 )) min $(( (SECONDS - t_all) % 60 )) s" \
  "on $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
  "$(grep -o -m1 -w 'avx512f' /proc/cpuinfo || grep -o -m1 -w 'avx2' /proc/cpuinfo || echo 'no AVX2') =="
