#!/usr/bin/env bash
# Runs tests/gpucc/oclgrind_run (the GPU-profile kernels on small shapes, results against fp64)
# under oclgrind, which simulates every work-item of a work-group and reports data races
# (--data-races), invalid memory accesses, barrier divergence and OpenCL API errors (--check-api):
# anything on its standard error fails the test (the library prints nothing there).
# pocl runs a work-group's items in lock-step loops, so a missing barrier around local memory passes
# there and fails on a GPU; here it is a report. The uninitialised-value plugin (--uninitialized) is
# not used: it fails on LLVM's freeze instruction. --inst-counts lists the kernels that ran, so the
# test also fails if one of them did not (a fallback taken without notice).
# Output: TAP (the program's own lines, then these checks). usage: oclgrind.sh OCLGRIND_RUN
set -u
exe=$1
expected=(rope_rotate_f32 rope_rotate_f16 qk_scores_tiled qk_scores qk_decode_gpu_f16 qk_attention_fa2_f16 qk_attention_gpu_f16
  qk_attention_f16 paged_append paged_attn_gpu paged_combine paged_attn_fast4 paged_attn_fast8)
if ! command -v oclgrind >/dev/null; then
  echo "1..1"
  echo "not ok 1 - oclgrind not found (scripts/setup.sh installs the Debian package oclgrind)"
  exit 1
fi
# the configuration is the program's own (the GPU profile, oclgrind's device): no overrides
while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^ROPEQK_')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
t0=$(date +%s.%N)
# 48 KiB of local memory, as NVIDIA's OpenCL (oclgrind's default 32 KiB is too little for qk_decode_gpu_*)
# Its reports go to stderr (not --log: each new OpenCL context truncates the log file, and the program
# makes two), the program's TAP lines and the instruction counts to stdout.
# One worker thread: oclgrind 21.10's instruction counter (--inst-counts) is not thread-safe, and
# with its default of one thread per core it aborted ("double free or corruption") in 3 of 4 runs
# once the kernels held the variants' code (soft-capping, M-RoPE); with one thread, never (4 of 4).
OCLGRIND_NUM_THREADS=1 oclgrind --data-races --check-api --inst-counts --max-errors 40 --local-mem-size 49152 "$exe" \
  >"$dir/out" 2>"$dir/log"
rc=$?
t1=$(date +%s.%N)
n=0 fail=0
while IFS= read -r line; do
  case $line in
    "ok "* | "not ok "*)
      n=$((n + 1))
      [[ $line == "not ok"* ]] && fail=$((fail + 1))
      echo "$line" ;;
    "#"* | "Bail out!"*) echo "$line" ;;
  esac
done <"$dir/out"
ran=$(sed -n "s/^Instructions executed for kernel '\([A-Za-z0-9_]*\)':.*/\1/p" "$dir/out" | sort -u | tr '\n' ' ')
missing=()
for k in "${expected[@]}"; do
  [[ " $ran" == *" $k "* ]] || missing+=("$k")
done
n=$((n + 1))
if [ ${#missing[@]} -eq 0 ]; then
  echo "ok $n - kernels run under oclgrind: $ran"
else
  fail=$((fail + 1))
  echo "not ok $n - kernels run under oclgrind: $ran; missing: ${missing[*]}"
fi
n=$((n + 1))
if [ "$rc" = 0 ] && [ ! -s "$dir/log" ]; then
  echo "ok $n - oclgrind: no data race, invalid access, barrier divergence or API error"
else
  fail=$((fail + 1))
  echo "not ok $n - oclgrind: exit status $rc, $(grep -c -E '^[A-Z]' "$dir/log") report lines (stderr)"
  head -80 "$dir/log" | sed 's/^/#   /'
  tail -20 "$dir/out" | grep -v -E '^(ok|not ok|#) ' | sed 's/^/#   /'
fi
echo "# oclgrind run: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
echo "1..$n"
[ "$fail" = 0 ]
