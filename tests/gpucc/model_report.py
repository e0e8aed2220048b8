"""The speed model's tables (markdown) and its self-tests (tests/gpucc/speedmodel.py)."""

import model_kernels
import sass
import srcloops
from model_eval import Analysis, cascade, evaluate, occupancy, part_time


def calibration_lines(res, cases):
    """Predicted against measured, per case and per measured part (markdown table lines)."""
    out = ['| case | predicted ms | measured ms | predicted / measured |', '|---|---|---|---|']
    for cs in cases:
        t = res[cs.name]['time']
        if cs.measured and t:
            out.append('| %s | %s | %.2f | %.2f |' % (cs.name, fmt_ms(t), cs.measured, t * 1e3 / cs.measured))
    for (case, what), ms in model_kernels.PARTS.items():
        t = part_time(res, case, what) if case in res else None
        if t:
            out.append('| %s (%s) | %s | %.2f | %.2f |' % (case, model_kernels.PART_NAMES.get(what, what), fmt_ms(t), ms,
                                                           t * 1e3 / ms))
    return out


def budget(res, case, check, kernel):
    """(ok, description) of one budget line (model_kernels.BUDGETS) on the results."""
    r = res[case]
    if check.startswith('time'):
        want = float(check.split()[1])
        t = r['time']
        return t is not None and t * 1e3 <= want, '%s: predicted %s ms <= %g ms' % (
            case, fmt_ms(t) if t is not None else '?', want)
    if check.startswith('rope-share'):
        want = float(check.split()[1])
        rope = sum(x['time'] for L, x in r['launches'] if isinstance(x, dict) and L.kernel.startswith('rope_rotate'))
        share = rope / r['time'] if r['time'] else 1.0
        return share <= want, '%s: the RoPE launches %.1f%% of the call <= %.0f%%' % (case, 100 * share, 100 * want)
    x = next((x for L, x in r['launches'] if L.kernel == kernel and isinstance(x, dict)), None)
    if x is None:
        return False, '%s: %s of %s: no result' % (case, check, kernel)
    if check == 'memory-bound':
        b = x['bounds']
        return x['bound'] == 'memory', '%s: %s predicted memory-bound (memory %s ms; issue %s, latency %s; bound: %s)' % (
            case, kernel, fmt_ms(b['memory']), fmt_ms(b['issue']), fmt_ms(b['latency']), x['bound'])
    if check.startswith('ffma-share'):
        want = float(check.split()[1])
        share = x['hot']['ffma_share'] if x['hot'] else 0.0
        return share >= want, '%s: %s hot loop FFMA share %.2f >= %.2f' % (case, kernel, share, want)
    return False, '%s: unknown budget check %s' % (case, check)


def fmt_ms(s):
    return '%.3f' % (s * 1e3) if s < 0.01 else '%.2f' % (s * 1e3)


MIX = ['ffma', 'falu', 'int', 'lds', 'sts', 'ldg', 'stg', 'mufu', 'bar', 'conv', 'branch', 'other']


def tables(cases, res):
    """The tables (markdown) as lines."""
    out = []
    for cs in cases:
        r = res[cs.name]
        out.append('### %s: %s' % (cs.name, cs.title))
        out.append('')
        out.append('| kernel | grid | regs | smem B | blocks/SM (limit) | occupancy | waves | in flight KiB/SM | issue | '
                   'pipe | memory | latency | bound | predicted ms |')
        out.append('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
        for L, x in r['launches']:
            if not isinstance(x, dict):
                out.append('| %s | %s | error: %s |' % (L.kernel, L.note, x))
                continue
            b = x['bounds']
            pipe = next(k for k in b if k.startswith('pipe'))
            out.append('| %s%s | %d x %d | %d | %d | %d (%s) | %.0f%% | %.2f | %.1f | %s | %s %s | %s | %s | %s | %s |' % (
                L.kernel, ' (%s)' % L.note if L.note else '', x['wgs'], x['wg'], x['regs'], x['smem'], x['blocks_sm'],
                x['limiter'], 100 * x['occupancy'], x['waves'], x['inflight_sm'] / 1024, fmt_ms(b['issue']), pipe[5:],
                fmt_ms(b[pipe]),
                fmt_ms(b['memory']), fmt_ms(b['latency']), x['bound'], fmt_ms(x['time'])))
        if r['time'] is not None:
            line = 'predicted %s ms' % fmt_ms(r['time'])
            if cs.name.startswith('attn'):
                line += ' (the last launch, the bench\'s kernel_ms: %s ms; the launches before it, its "RoPE pass": %s ms)' % (
                    fmt_ms(part_time(res, cs.name, 'last')), fmt_ms(part_time(res, cs.name, 'rest')))
            if cs.measured:
                line += ', measured %.2f ms (%s): predicted / measured %.2f' % (cs.measured, cs.source,
                                                                                r['time'] * 1e3 / cs.measured)
            out.append('')
            out.append(line)
        out.append('')
        out.append('Instructions (warp-instructions) per unit of work, by class:')
        out.append('')
        out.append('| kernel | unit | ' + ' | '.join(MIX) + ' | all | global waits / warp | hot loop: FFMA share |')
        out.append('|---|---|' + '---|' * len(MIX) + '---|---|---|')
        for L, x in r['launches']:
            if not isinstance(x, dict) or not x['unit']:
                continue
            name, n = x['unit']
            tot = {c: v * x['wgs'] / n for c, v in x['per_wg'].items()}
            hot = x['hot']
            out.append('| %s | %s | %s | %.0f | %.0f | %s |' % (
                L.kernel, name, ' | '.join('%.3g' % tot.get(c, 0) for c in MIX), sum(tot.values()),
                x['waits_g'], '%.2f (%s)' % (hot['ffma_share'], hot['line']) if hot else '-'))
        out.append('')
    return out


def loop_tables(cases, res):
    """Per kernel (its first case), its SASS loops: source loop, unroll factor, iterations per entry
    and per warp, and the instructions of one iteration (nested loops apart) by class."""
    out, done = [], set()
    for cs in cases:
        for L, x in res[cs.name]['launches']:
            if not isinstance(x, dict) or L.kernel in done:
                continue
            done.add(L.kernel)
            out.append('%s (case %s): SASS loops' % (L.kernel, cs.name))
            out.append('')
            out.append('| source loop | unroll | iterations / entry | iterations / warp | ' + ' | '.join(MIX) +
                       ' | global waits |')
            out.append('|---|---|---|---|' + '---|' * len(MIX) + '---|')
            for lp in x['loops']:
                out.append('| %s%s `%s` | %d | %.3g | %.4g | %s | %d |' % (
                    '&nbsp;&nbsp;' * (lp['depth'] - 1), lp['where'], lp['text'][:48].replace('|', '/'), lp['unroll'],
                    lp['trips'], lp['runs'], ' | '.join(str(lp['mix'].get(c, 0)) for c in MIX), lp['waits']))
            out.append('')
    return out


def hot_lines(cases, res):
    out = []
    for cs in cases:
        for L, x in res[cs.name]['launches']:
            if isinstance(x, dict) and x['hot'] and L.kernel not in [l.split()[0] for l in out]:
                h = x['hot']
                mix = ', '.join('%s %.1f' % (c, h['per_iter'].get(c, 0)) for c in MIX if h['per_iter'].get(c, 0) >= 0.05)
                out.append('%s hot loop (%s: %s), per iteration: %s; FFMA share %.2f' % (
                    L.kernel, h['line'], h['text'][:60], mix, h['ffma_share']))
    return out


_SELF_LISTING = """
.text.k:
k:
	//## File "t.cl", line 2
        /*0000*/                   MOV R1, RZ ;
.L_x_0:
	//## File "t.cl", line 4
        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0020*/                   LDG.E R6, desc[UR4][R8.64] ;
        /*0030*/                   FFMA R3, R2, R6, R3 ;
        /*0040*/                   FFMA R3, R2, R6, R3 ;
	//## File "t.cl", line 3
        /*0050*/                   IADD3 R1, R1, 0x2, RZ ;
        /*0060*/                   ISETP.NE.AND P0, PT, R1, R7, PT ;
        /*0070*/              @P0 BRA `(.L_x_0) ;
.L_x_1:
	//## File "t.cl", line 4
        /*0080*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0090*/                   FFMA R3, R2, R2, R3 ;
	//## File "t.cl", line 3
        /*00a0*/              @P1 BRA `(.L_x_1) ;
        /*00b0*/                   EXIT ;
"""
_SELF_SOURCE = """#define K(NAME) \\
__kernel void NAME(__global const float *p, int n) \\
{ float s = 0.0f; \\
    for (int i = 0; i < n; i++) \\
        s = fma(p[i], p[i], s); \\
    p[0] = s; }
K(k)
"""


def selftest(clang):
    """Checks of the model's parts on made-up input (no CUDA tool needed): [(ok, description)]."""
    out = []
    k = sass.Kernel('k', *sass.parse_listing(_SELF_LISTING)['k'])
    out.append((len(k.loops) == 2 and all(lp.parent is None for lp in k.loops),
                'sass: two sibling loops found from their back edges'))
    text, origin = srcloops.demacro(_SELF_SOURCE, clang, '') if clang else (None, None)
    if text is not None:
        lp = srcloops.loops(text, 'k')
        out.append((len(lp) == 1 and lp[0].text.startswith('for (int i = 0; i < n; i++)') and origin[lp[0].head - 1] == 4,
                    'srcloops: the macro-defined kernel expanded line by line, its loop found at its line'))
        an = Analysis('k', _SELF_LISTING.replace('line 2', 'line %d' % (lp[0].head - 1)).replace('line 3', 'line %d' % lp[0].head)
                      .replace('line 4', 'line %d' % (lp[0].head + 1)), text)
        ok = [x.unroll for x in an.k.loops] == [2, 1] and all(x.src.head == lp[0].head for x in an.k.loops)
        out.append((ok, 'analysis: both SASS loops tied to the source loop, unrolled by 2 and 1 (its remainder)'))
        r = evaluate(an, {'regs': 128, 'local': 21632}, model_kernels.Launch('k', 'gpu', 132, 128, {
            'for (int i = 0; i < n; i++)': 7}, dram=0))
        # 7 iterations: 3 of the loop unrolled by 2 (2 FFMA, 1 wait each), 1 of the remainder (1 FFMA, 1 wait)
        out.append((r['per_wg']['ffma'] == 4 * 7 and r['waits_g'] == 4 and r['blocks_sm'] == 4,
                    'evaluate: FFMA and load waits per work-group from the trips (28, 4 a warp), 4 blocks of '
                    '128 x 128 registers per SM'))
    else:
        out.append((False, 'srcloops: clang-15 not found'))
    br = srcloops.branches('__kernel void k(int n)\n{\n    if (n) {\n        a();\n        b();\n    } else\n        c();\n}', 'k')
    out.append((len(br) == 1 and (br[0].head, br[0].then, br[0].other) == (3, (4, 6), (7, 7)),
                'srcloops: an if statement and the lines of its two parts'))
    out.append((cascade(131, [32, 8, 1]) == {32: 4, 8: 0, 1: 3}, 'cascade: 131 iterations over loops unrolled by 32, 8, 1'))
    out.append((occupancy(102, 21696, 256) == (2, 'registers') and occupancy(40, 0, 16) == (32, 'blocks') and
                occupancy(32, 49152, 1024)[0] == 2, 'occupancy: the register, block and thread limits'))
    return out
