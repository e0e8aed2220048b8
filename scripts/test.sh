#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs
#   1. the test suite on the default OpenCL device (pocl on a machine without a GPU), including the
#      strict-compiler check of the OpenCL program (tests/clc) and suite gpucc (tests/gpucc: the
#      GPU drivers' compilers with per-kernel budgets, and the GPU-profile kernels under oclgrind);
#   2. the same suite again with ROPEQK_PROFILE=gpu: the GPU kernel configuration (work-group
#      shapes, vector widths, no CPU decode kernel) checked against fp64 on the CPU device (less
#      suite gpucc, which sets its profiles itself: the same result twice);
#   3. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer runs
#      after every test; pocl's own allocations are suppressed by tests/lsan.supp);
#   4. short libFuzzer runs of the .npy parser and the API's argument validation (scripts/fuzz.sh),
#      FUZZ_SECONDS each (default 60; 0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# lavapipe compiles every Vulkan pipeline with LLVM (the attention shader's: about 1.7 s each) and
# Mesa caches the result on disk: one cache for the three stages, so the second and third reuse the
# first's pipelines (the SPIR-V and specialization constants are the same in every build)
export MESA_SHADER_CACHE_DIR="$PWD/build/mesa-shader-cache"
meson test -C build --print-errorlogs

echo "== the same suite under the GPU profile (ROPEQK_PROFILE=gpu) =="
ROPEQK_PROFILE=gpu meson test -C build --print-errorlogs --no-suite gpucc

echo "== sanitizer build (address, undefined) =="
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dbench=disabled >/dev/null
fi
ninja -C build-asan
# intercept_tls_get_addr=0: GCC <= 13's sanitizer runtime (Debian 12 has GCC 12, glibc 2.36) takes a
# dynamic TLS block whose address happens to be 16 mod 4096 for a pre-2.25 glibc one, reads a bogus
# range before it, and LeakSanitizer's tracer dies with SIGSEGV after a test passed ("Tracer caught
# signal 11", "DTLS ... at 0x...-0x..." with log_threads=1); which block lands there depends on
# allocation patterns (the failing-build test in tests/test_config.c hit it once the program grew).
# LSan then skips dynamic TLS blocks only: heap, stacks, globals and static TLS are still scanned.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --timeout-multiplier 3

if [ "${FUZZ_SECONDS:-60}" != 0 ] && [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing, ${FUZZ_SECONDS:-60} s per target =="
  scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
