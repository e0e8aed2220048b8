#!/usr/bin/env bash
# Compiles the exact OpenCL program the library builds with Debian's clang as a strict OpenCL C
# compiler, for every build-option set the library can choose, as OpenCL C 1.2 and 3.0 with
#   -pedantic -Wall -Werror
# so that no Clang extension (variadic macros, builtins) slips into the portable source: NVIDIA's
# compiler rejects them although it defines __clang__. The library's own -cl-std and -w (pocl's
# quiet first build, src/core/tuning.c) are dropped: here every warning counts.
# Sources: tests/clc/clc_variants (no device needed) and, when an OpenCL platform exists,
# `ropeqk devices --dump-program` under ROPEQK_PROFILE=cpu and gpu (what a user attaches to a bug
# report). Output: TAP.
# usage: check_clc.sh CLANG CLC_VARIANTS [ROPEQK]
set -u
clang=$1 variants=$2 ropeqk=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/variants"
"$variants" "$dir/variants" || { echo "Bail out! clc_variants failed"; exit 1; }
files=("$dir"/variants/*.cl)
if [ -n "$ropeqk" ] && "$ropeqk" devices >/dev/null 2>&1; then
  for prof in cpu gpu; do
    mkdir -p "$dir/dump-$prof"
    ROPEQK_PROFILE=$prof "$ropeqk" devices --dump-program "$dir/dump-$prof" >/dev/null ||
      { echo "Bail out! ropeqk devices --dump-program failed (profile $prof)"; exit 1; }
    files+=("$dir/dump-$prof"/*.cl)
  done
fi
n=0 fail=0
echo "1..$((${#files[@]} * 2))"
for f in "${files[@]}"; do
  opts=$(sed -e 's/-cl-std=[^ ]*//g' -e 's/\(^\| \)-w\( \|$\)/ /g' "${f%.cl}.options")
  name=${f#"$dir"/}
  for std in CL1.2 CL3.0; do
    n=$((n + 1))
    # shellcheck disable=SC2086 # the options are a word list
    if out=$("$clang" -x cl -cl-std=$std -Xclang -finclude-default-header -fsyntax-only \
          -pedantic -Wall -Werror $opts "$f" 2>&1); then
      echo "ok $n - $name $std ($opts)"
    else
      fail=$((fail + 1))
      echo "not ok $n - $name $std ($opts)"
      printf '%s\n' "$out" | head -20 | sed 's/^/# /'
    fi
  done
done
[ "$fail" = 0 ]
