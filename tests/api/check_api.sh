#!/usr/bin/env bash
# The public surface of the library, as a user sees it (TAP):
#   - the shared library exports only ropeqk_* symbols (nm -D --defined-only);
#   - each public header compiles alone, as C11 and as C++17, with -Wall -Wextra -pedantic -Werror;
#   - ropeqk.h (the backend-neutral header) pulls in no OpenCL or Vulkan header;
#   - no file of src/core (the backend-neutral core) pulls in an OpenCL or Vulkan header, directly or
#     through another header (each .c preprocessed with -H, every opened header listed).
# usage: check_api.sh LIBROPEQK.so CC CXX INCLUDE_SRC_DIR INCLUDE_BUILD_DIR SRC_CORE_DIR HEADER...
set -u
lib=$1 cc=$2 cxx=$3 inc_src=$4 inc_build=$5 core=$6
shift 6
headers=("$@") # the public headers of the backends built
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/# /'; }
core_files=("$core"/*.c)
echo "1..$((2 + ${#headers[@]} * 2 + ${#core_files[@]}))"

syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
others=$(printf '%s\n' "$syms" | grep -v '^ropeqk_' || true)
count=$(printf '%s\n' "$syms" | grep -c '^ropeqk_')
if [ -z "$others" ] && [ "$count" -gt 0 ]; then ok "exports: $count symbols, all ropeqk_*"
else nok "exports: symbols other than ropeqk_*" "$others"; fi

for h in "${headers[@]}"; do
  printf '#include <%s>\n#include <%s>\nint main(void) { return 0; }\n' "$h" "$h" >"$tmp/c.c"
  cp "$tmp/c.c" "$tmp/cxx.cpp"
  if out=$("$cc" -std=c11 -Wall -Wextra -pedantic -Werror -I"$inc_src" -I"$inc_build" -c "$tmp/c.c" -o "$tmp/c.o" 2>&1)
  then ok "$h alone (twice) as C11"; else nok "$h alone as C11" "$out"; fi
  if out=$("$cxx" -std=c++17 -Wall -Wextra -pedantic -Werror -I"$inc_src" -I"$inc_build" -c "$tmp/cxx.cpp" -o "$tmp/x.o" 2>&1)
  then ok "$h alone (twice) as C++17"; else nok "$h alone as C++17" "$out"; fi
done

# -H lists every header the preprocessor opens
if deps=$("$cc" -std=c11 -H -E -I"$inc_src" -I"$inc_build" -x c - <<<'#include <ropeqk.h>' 2>&1 >/dev/null); then
  cl=$(printf '%s\n' "$deps" | grep -E '/CL/|opencl|vulkan' || true)
  if [ -z "$cl" ]; then ok "ropeqk.h includes no OpenCL or Vulkan header"; else nok "ropeqk.h includes backend headers" "$cl"; fi
else
  nok "ropeqk.h does not preprocess" "$deps"
fi
for f in "${core_files[@]}"; do
  name=src/core/$(basename "$f")
  if deps=$("$cc" -std=c11 -D_POSIX_C_SOURCE=200809L -H -E -I"$inc_src" -I"$inc_build" -I"$core/../../cl" \
      -I"$core/../../glsl" "$f" 2>&1 >/dev/null); then
    be=$(printf '%s\n' "$deps" | grep -E '^\.+ .*(/CL/|/vulkan/|ropeqk_opencl\.h|ropeqk_vulkan\.h|src/opencl/|src/vulkan/)' || true)
    if [ -z "$be" ]; then ok "$name includes no OpenCL or Vulkan header"; else nok "$name includes backend headers" "$be"; fi
  else
    nok "$name does not preprocess" "$deps"
  fi
done
[ "$fail" = 0 ]
