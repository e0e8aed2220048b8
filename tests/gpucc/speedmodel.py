#!/usr/bin/env python3
"""Static speed model of the GPU-profile kernels on an NVIDIA H200 (TAP, suite gpucc), from their
SASS: no GPU needed. docs/gpu-model.md explains it and gives its tables.

For each case of tests/gpucc/model_kernels.py (a bench shape: its kernel launches as the host makes
them, and the time an H200 measured, where one did):
  1. the program the library builds (gpucc_variants writes it) is compiled as tests/gpucc/gpucc.py
     compiles it for sm_90 (clang-15 + libclc, opt, llc, ptxas), with line information: the kernels
     that macros define expanded in place (srcloops.demacro), `-gline-tables-only`, the PTX's
     `.target ..., debug` dropped (ptxas would compile it unoptimised), `ptxas -lineinfo`. The SASS of
     this compile must equal the plain compile's opcode for opcode (a TAP line checks it);
  2. `nvdisasm -g` lists the SASS with source lines; sass.py finds the basic blocks, the loops (back
     edges to a dominating block) and the instruction classes; each SASS loop is tied to the source
     loop (srcloops.loops) holding the line of its latch branch (model_eval.Analysis), and loops that one source loop
     became (an unrolled main loop and its remainders) get its iterations by their unroll factor,
     found from their loads, stores and arithmetic per iteration;
  3. the launch description gives every source loop's iterations per warp and entry, so every block's
     executions per warp, and the instruction counts per class per work-group, per unit of work (a
     key and KV head, a tile, ...) and per iteration of the hot loop;
  4. occupancy from ptxas' registers and local memory and the work-group size (sm_90: 64K registers,
     2048 threads, 64 warps, 32 blocks and 228 KiB of shared memory per SM, registers allocated per
     warp in units of 256), waves of work-groups over 132 SMs;
  5. bounds per launch: issue (4 warp-instructions per clock per SM at 1.98 GHz, times a fitted
     efficiency), pipes (integer ops 64 lanes/clock, MUFU and conversions 16, shared memory 128
     bytes/clock), DRAM (bytes / the copy kernel's 4.26 TB/s), and latency (Little's law from the
     SASS: each wait on global loads costs a fitted latency, overlapped across the resident warps);
     the prediction is the largest bound plus a fixed launch gap, summed over a case's launches.
The two fitted constants (issue efficiency, load latency) come from today's kernels against the
H200 measurements (the cases' figures and model_kernels.PARTS) and are fixed in model_eval.CAL;
`--fit` prints the fit again. Files: sass.py, srcloops.py, model_eval.py, model_report.py (tables,
self-tests), model_kernels.py (the cases).

usage: speedmodel.py --variants GPUCC_VARIANTS [--table] [--fit] [--keep DIR] [--json FILE] [--only CASE]
  (no --table: TAP for the suite; --table: the tables only, for people and the bench)
"""
import argparse
import concurrent.futures as cf
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucc  # noqa: E402  (Tools, run, gpu_options, cl_flags, parse_ptxas, parse_defines)
import model_kernels  # noqa: E402  (the cases)
import sass  # noqa: E402
import srcloops  # noqa: E402
from model_eval import evaluate_cases, part_time, run_cases  # noqa: E402
from model_report import budget, calibration_lines, fmt_ms, hot_lines, loop_tables, selftest, tables  # noqa: E402

# ---- the compile --------------------------------------------------------------------------------

def _compile(tools, d, tag, src, opts):
    """One compile to a cubin: (cubin, ptxas log, error or None). tag 'g': with line information."""
    cl = os.path.join(d, tag + '.cl')
    with open(cl, 'w') as f:
        f.write(src)
    b = os.path.join(d, tag)
    extra = ['-gline-tables-only'] if tag == 'g' else []
    steps = [[tools.clang] + gpucc.cl_flags(opts) + extra + ['-target', 'nvptx64-nvidia-nvcl', '-emit-llvm', '-c',
                                                              cl, '-o', b + '.bc'],
             [tools.llvm_link, b + '.bc', tools.libclc, '-o', b + '.l.bc'],
             [tools.opt, '-O3', b + '.l.bc', '-o', b + '.o.bc'],
             [tools.llc, '-O3', '-march=nvptx64', '-mcpu=sm_86', '-mattr=+ptx75', b + '.o.bc', '-o', b + '.ptx']]
    for c in steps:
        rc, log = gpucc.run(c)
        if rc:
            return None, None, '%s failed: %s' % (os.path.basename(c[0]), log[-2000:])
    with open(b + '.ptx') as f:
        ptx = f.read()
    # debug info in the PTX makes llc write `.target sm_86, ..., debug`, and ptxas then compiles
    # without optimisation (255 registers and spills for qk_attention_gpu_f32 instead of 102)
    ptx = re.sub(r'^(\.target [^\n]*?), debug$', r'\1', ptx, flags=re.M)
    with open(b + '.ptx', 'w') as f:
        f.write(ptx)
    rc, log = gpucc.run([tools.ptxas, '-arch=sm_90', '-v', '-maxrregcount=%d' % gpucc.NV_MAXREG] +
                        (['-lineinfo'] if tag == 'g' else []) +
                        [b + '.ptx', '-o', b + '.cubin'])
    if rc:
        return None, None, 'ptxas failed: ' + log[-2000:]
    return b + '.cubin', log, None


def compile_program(tools, work, name, text, opts):
    """Compiles the program for sm_90 twice, at once: with line information (demacroed) and plainly.
    Returns a dict: listing (nvdisasm -g), text (the demacroed source), res (ptxas -v per kernel),
    same (the kernels whose SASS opcodes differ between the two compiles), err (a message or None)."""
    out = {'err': None}
    d = os.path.join(work, 'model-' + name)
    os.makedirs(d, exist_ok=True)
    dm, origin = srcloops.demacro(text, tools.clang, opts)
    out['text'] = dm
    porig = srcloops.program_origins(os.path.join(ROOT, 'cl', 'program.cl'), text)

    def where(line):
        """'file.cl:line' of a line of the demacroed text (the program's line where the cl/ files
        at hand are not the program's)."""
        if not line or line > len(origin):
            return 'line %s' % line
        pl = origin[line - 1]
        return '%s:%d' % porig[pl - 1] if porig and pl <= len(porig) else 'program line %d' % pl
    out['where'] = where
    with cf.ThreadPoolExecutor(2) as ex:
        g, p = ex.map(lambda a: _compile(tools, d, a[0], a[1], opts), (('g', dm), ('p', text)))
    out['err'] = g[2] or p[2]
    if out['err']:
        return out
    out['res'] = gpucc.parse_ptxas(g[1])
    rc, lst = gpucc.run([tools.nvdisasm, '-g', '-c', g[0]])
    rc2, plain = gpucc.run([tools.nvdisasm, '-c', p[0]])
    if rc or rc2:
        out['err'] = 'nvdisasm failed: ' + (lst if rc else plain)[-2000:]
        return out
    out['listing'] = lst

    def ops(listing):
        return {k: [x.op for x in v[0]] for k, v in sass.parse_listing(listing).items()}
    a, b = ops(lst), ops(plain)
    out['same'] = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return out


# ---- the cases ---------------------------------------------------------------------------------

def constants(text, opts):
    """The program's numeric #defines (contract.h's RQ_PTK, ...) and the -D knobs of its options."""
    c = {}
    for m in re.finditer(r'^\s*#\s*define\s+(RQ_\w+)\s+\(?(\d+)\)?\s*(?:/\*.*)?$', text, re.M):
        c.setdefault(m.group(1), int(m.group(2)))
    for k, v in gpucc.parse_defines(opts).items():
        if re.fullmatch(r'-?\d+', v):
            c[k] = int(v)
    return c


def fit(ev, cases, parts):
    """Least squares of log(predicted / measured) over the measured cases and parts, on a grid of
    the two constants. Returns (sum of squares, calibration, figures used)."""
    best = None
    for eff in [x / 100 for x in range(20, 101, 1)]:
        for lat in [x / 100 * 1e-6 for x in range(5, 151, 1)]:
            cal = {'issue_eff': eff, 'latency': lat}
            res = run_cases(ev, cal)
            err, n = 0.0, 0
            for cs in cases:
                if cs.measured and res[cs.name]['time']:
                    err += math.log(res[cs.name]['time'] * 1e3 / cs.measured) ** 2
                    n += 1
            for (case, what), ms in parts.items():
                t = part_time(res, case, what) if case in res else None
                if t:
                    err += math.log(t * 1e3 / ms) ** 2
                    n += 1
            if best is None or err < best[0]:
                best = (err, cal, n)
    return best


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_tool(name):
    p = shutil.which(name)
    if p:
        return p
    p = os.path.join(ROOT, '.venv', 'tools', name)
    return p if os.access(p, os.X_OK) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--variants', required=True, help='the gpucc_variants executable')
    ap.add_argument('--table', action='store_true', help='print the tables only (no TAP)')
    ap.add_argument('--fit', action='store_true', help='fit the two constants to the measurements, print them')
    ap.add_argument('--keep', help='work directory to keep')
    ap.add_argument('--json', help='write the results as JSON to this file')
    ap.add_argument('--only', help='cases whose name contains this')
    args = ap.parse_args()
    t0 = time.time()
    tools = gpucc.Tools()
    tools.nvdisasm = find_tool('nvdisasm')
    tap = []

    def add(ok, desc, directive='', diag=''):
        tap.append((ok, desc, directive, diag))

    def finish():
        if not args.table:
            print('1..%d' % len(tap))
            for i, (ok, desc, directive, diag) in enumerate(tap, 1):
                print('%s %d - %s%s' % ('ok' if ok else 'not ok', i, desc.replace('#', ''),
                                         ' # ' + directive if directive else ''))
                for l in diag.splitlines():
                    print('#   ' + l)
            print('# time: %.1f s' % (time.time() - t0))
        return 0 if all(ok or d.startswith(('TODO', 'SKIP')) for ok, _, d, _ in tap) else 1

    if not args.table:
        for ok, desc in selftest(tools.clang):
            add(ok, 'self-test: ' + desc)
    missing = [n for n, p in (('ptxas (CUDA toolkit)', tools.ptxas), ('nvdisasm (scripts/pytools.sh)', tools.nvdisasm))
               if not p] + [m[0] for m in [tools.missing('nvidia')] if m]
    if missing:
        msg = 'the speed model needs %s: not found' % ', '.join(missing)
        if args.table:
            print(msg)
            return 0
        add(True, 'the speed model of the bench shapes', 'SKIP ' + msg)
        return finish()
    work = args.keep or tempfile.mkdtemp(prefix='gpumodel-')
    os.makedirs(work, exist_ok=True)
    try:
        vdir = os.path.join(work, 'variants')
        os.makedirs(vdir, exist_ok=True)
        rc, log = gpucc.run([args.variants, vdir])
        if rc:
            print('Bail out! gpucc_variants failed: ' + log)
            return 1
        progs = {}
        for prog in ('gpu', 'gpu-amd'):
            with open(os.path.join(vdir, prog + '.cl')) as f:
                text = f.read()
            with open(os.path.join(vdir, prog + '.options')) as f:
                opts = gpucc.gpu_options(f.read().strip())
            t1 = time.time()
            p = compile_program(tools, work, prog, text, opts)
            add(not p['err'], 'compile %s for sm_90 with line information and plainly (%.1f s)' % (prog, time.time() - t1),
                diag=p['err'] or '')
            if p['err']:
                return finish()
            add(not p['same'], '%s: the SASS with line information is the plain compile\'s, opcode for opcode%s' % (
                prog, ': differs in ' + ', '.join(p['same']) if p['same'] else ''))
            p['consts'] = constants(text, opts)
            progs[prog] = p
        cases = model_kernels.cases({n: p['consts'] for n, p in progs.items()})
        if args.only:
            cases = [c for c in cases if args.only in c.name]
        ev = evaluate_cases(progs, cases)
        if args.fit:
            err, cal, n = fit(ev, cases, model_kernels.PARTS)
            print('fit over %d figures: issue_eff %.2f, latency %.2f us (rms log error %.3f: x%.2f)' % (
                n, cal['issue_eff'], cal['latency'] * 1e6, math.sqrt(err / max(n, 1)), math.exp(math.sqrt(err / max(n, 1)))))
            print('\n'.join(calibration_lines(run_cases(ev, cal), cases)))
        res = run_cases(ev)
        lines = tables(cases, res) + hot_lines(cases, res) + [''] + loop_tables(cases, res)
        if args.table:
            print('\n'.join(lines))
        else:
            for l in lines:
                print('# ' + l)
        for cs in cases:
            r = res[cs.name]
            add(r['err'] is None, '%s: every SASS loop of its kernels tied to a counted source loop' % cs.name,
                diag=r['err'] or '')
            if r['time'] is None or not cs.measured:
                continue
            ratio = r['time'] * 1e3 / cs.measured
            add(1 / 3 <= ratio <= 3, '%s: predicted %s ms, measured %.2f ms on the H200: ratio %.2f within 3x' % (
                cs.name, fmt_ms(r['time']), cs.measured, ratio))
        for case, check, kernel, why in model_kernels.BUDGETS:
            if case not in res:
                continue
            ok, desc = budget(res, case, check, kernel)
            add(ok, desc, why if why and not ok else '')
            if ok and why:  # a TODO that passes: the kernel meets its budget, make it a hard one
                tap[-1] = (False, desc + ': meets its budget, remove the TODO in tests/gpucc/model_kernels.py BUDGETS',
                           '', '')
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({c: {'time': v['time'], 'err': v['err'],
                               'launches': [(L.kernel, L.note, x if isinstance(x, dict) else str(x))
                                            for L, x in v['launches']]} for c, v in res.items()}, f, indent=1, default=str)
        return finish()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
