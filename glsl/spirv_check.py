#!/usr/bin/env python3
"""The suite's check of the embedded SPIR-V (meson test 'spirv_val'):

  spirv_check.py [--loops MODULE=N ...] [--no-private-arrays MODULE ...] [--target-env ENV]
                 [--spirv-val PATH --skip-reason TEXT] A.spv B.spv ...

- every module passes `spirv-val --target-env vulkan1.1` (the Khronos validator, Debian package
  spirv-tools); without spirv-val the test says so loudly and exits 77 (skipped, not passed);
- --loops: the module keeps exactly N loops (OpLoopMerge in `spirv-dis`): the host's count of an
  invocation's loop trips (llvmpipe's silent limit: src/vulkan/vk_attn.c, vk_paged_run.c) assumes the
  loops it names, and a loop glslc stops unrolling would break that bound without any other sign;
- --no-private-arrays: the module has no array in Function storage (register blocks indexed only by
  constants after glslc's unrolling: nothing a driver must keep in addressable local memory);
- --target-env (default vulkan1.1) and --spirv-val PATH (default: spirv-val on PATH; the
  cooperative-matrix modules need one that knows SPV_KHR_cooperative_matrix, found by
  glsl/find_coopmat.py): an empty PATH, or no module given, skips (exit 77) with --skip-reason.
"""
import os
import shutil
import subprocess
import sys


def main(argv):
    loops, noarr, mods = {}, set(), []
    env, val, reason = 'vulkan1.1', None, 'no spirv-val'
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == '--loops':
            name, n = argv[i + 1].split('=')
            loops[name] = int(n)
            i += 2
        elif a == '--no-private-arrays':
            noarr.add(argv[i + 1])
            i += 2
        elif a in ('--target-env', '--spirv-val', '--skip-reason'):
            if a == '--target-env':
                env = argv[i + 1]
            elif a == '--spirv-val':
                val = argv[i + 1]
            else:
                reason = argv[i + 1]
            i += 2
        else:
            mods.append(a)
            i += 1
    if val is not None and (not val or not mods):
        print(f'SKIPPED: {reason}: {len(mods)} SPIR-V modules NOT validated', file=sys.stderr)
        return 77
    dis = shutil.which('spirv-dis')
    own = os.path.join(os.path.dirname(os.path.realpath(val)), 'spirv-dis') if val else ''
    if own and os.access(own, os.X_OK):
        dis = own  # the validator's own disassembler, which knows its modules
    val = val or shutil.which('spirv-val')
    if not val:
        print('SKIPPED: spirv-val not found (Debian package spirv-tools; scripts/setup.sh installs it): '
              f'{len(mods)} SPIR-V modules NOT validated', file=sys.stderr)
        return 77
    bad = 0
    for m in mods:
        stem = os.path.splitext(os.path.basename(m))[0]
        r = subprocess.run([val, '--target-env', env, m], capture_output=True, text=True)
        if r.returncode != 0:
            print(f'FAIL {stem}: spirv-val:\n{r.stdout}{r.stderr}')
            bad += 1
            continue
        msg = f'valid ({env})'
        if stem in loops or stem in noarr:
            if not dis:
                print(f'FAIL {stem}: spirv-dis not found for the loop and private-array checks')
                bad += 1
                continue
            text = subprocess.run([dis, '--raw-id', m], capture_output=True, text=True, check=True).stdout
            if stem in loops:
                n = sum(1 for line in text.splitlines() if 'OpLoopMerge' in line)
                if n != loops[stem]:
                    print(f'FAIL {stem}: {n} loops, the host counts trips for {loops[stem]}')
                    bad += 1
                    continue
                msg += f', {n} loops'
            if stem in noarr:
                types = {}
                for line in text.splitlines():
                    p = line.split()
                    if len(p) >= 3 and p[1] == '=' and p[2] == 'OpTypePointer':
                        types[p[0]] = (p[3], p[4])
                    if len(p) >= 3 and p[1] == '=' and p[2] == 'OpTypeArray':
                        types[p[0]] = ('array',)
                arrays = []
                for line in text.splitlines():
                    p = line.split()
                    if len(p) >= 5 and p[2] == 'OpVariable' and p[4] == 'Function':
                        ptr = types.get(p[3])
                        if ptr and types.get(ptr[1]) == ('array',):
                            arrays.append(p[0])
                if arrays:
                    print(f'FAIL {stem}: private arrays {", ".join(arrays)} (a register loop was not unrolled)')
                    bad += 1
                    continue
                msg += ', no private arrays'
        print(f'ok   {stem}: {msg}')
    print(f'{len(mods) - bad}/{len(mods)} modules pass')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
