#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang + ASan + UBSan into ./build-fuzz and runs each for
# SECONDS (default 60) on a working copy of its committed seed corpus, so runs never modify the
# repository. Exits non-zero if any target reports a crash, a leak, undefined behaviour, a failed
# check or a timeout; the input that did it is left in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment:
#   FUZZ_TARGETS      targets to run (default "fuzz_npy fuzz_validate")
#   FUZZ_ARGS         extra libFuzzer flags, e.g. "-fork=8" or "-jobs=8 -workers=8"
#   FUZZ_FRESH=1      start from the committed seeds only (default: keep what earlier runs in
#                     build-fuzz/fuzz-corpus/ found, plus the committed seeds)
#   FUZZ_VERBOSE=1    describe each input fuzz_validate decodes (see fuzz/fuzz_validate.c)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
case $seconds in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
# libFuzzer reads -max_total_time=0 as "no limit"
[ "$seconds" -eq 0 ] && { echo "fuzz: 0 seconds, nothing to do"; exit 0; }
targets=${FUZZ_TARGETS:-fuzz_npy fuzz_validate}

packages=(clang libclang-rt-14-dev meson ninja-build pkg-config ocl-icd-opencl-dev opencl-headers python3)
scripts/install-missing.sh "${packages[@]}"

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzz=enabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dtests=disabled -Dbench=disabled >/dev/null
fi
exes=()
for t in $targets; do exes+=("fuzz/$t"); done
ninja -C build-fuzz "${exes[@]}"

# UBSan findings abort (the targets are also built with -fno-sanitize-recover=all).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

work=$root/build-fuzz
mkdir -p "$work/fuzz-artifacts" "$work/fuzz-logs"
status=0
summary=()
for t in $targets; do
  seeds=$root/fuzz/corpus/${t#fuzz_}
  corpus=$work/fuzz-corpus/${t#fuzz_}
  [ "${FUZZ_FRESH:-0}" = 1 ] && rm -rf "$corpus"
  mkdir -p "$corpus"
  cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  extra=()
  [ -f "$root/fuzz/${t#fuzz_}.dict" ] && extra+=("-dict=$root/fuzz/${t#fuzz_}.dict")
  log=$work/fuzz-logs/$t.log
  echo "== $t: ${seconds} s, corpus $(find "$corpus" -type f | wc -l) files =="
  rc=0
  # run inside build-fuzz: libFuzzer writes fork/jobs logs to the working directory.
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  (cd "$work" && "$work/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 \
      -artifact_prefix="$work/fuzz-artifacts/$t-" "${extra[@]}" ${FUZZ_ARGS:-} "$corpus") >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ -z "$execs" ]; then # fork mode prints no stat:: lines, only "#N: cov: ... exec/s R ..."
    execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' "$log" | tail -1)
    rate=$(sed -n 's/^#[0-9]*:.* exec\/s:* *\([0-9]*\).*/\1/p' "$log" | tail -1)
  fi
  if [ "$rc" -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$log"; then
    status=1
    echo "   FAILED (exit $rc); last lines of $log:"
    grep -E 'runtime error|ERROR:|SUMMARY|check failed|Test unit written|artifact' "$log" | tail -15 | sed 's/^/   /'
    summary+=("$(printf '%-14s FAILED  %12s execs  %8s exec/s' "$t" "${execs:-?}" "${rate:-?}")")
  else
    summary+=("$(printf '%-14s ok      %12s execs  %8s exec/s' "$t" "${execs:-?}" "${rate:-?}")")
  fi
done

echo "== fuzzing summary (${seconds} s per target; logs in build-fuzz/fuzz-logs/) =="
printf '   %s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then
  echo "fuzz: failures; reproduce with build-fuzz/fuzz/<target> build-fuzz/fuzz-artifacts/<file>" >&2
fi
exit "$status"
