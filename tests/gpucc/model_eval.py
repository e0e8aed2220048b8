"""The speed model's evaluation (tests/gpucc/speedmodel.py, docs/gpu-model.md): a kernel's SASS tied
to its source loops (Analysis), the trips of its SASS loops from a launch description, the counts by
class, the load waits, occupancy, and the bounds on an H200 (timing) under the calibration CAL."""
import collections
import math

import sass
import srcloops

# ---- the H200 (sm_90) -----------------------------------------------------------------------------
SMS = 132
CLOCK = 1.98e9                 # boost clock, Hz
ISSUE = 4.0                    # warp-instructions issued per clock per SM (4 schedulers)
DRAM_BW = 4.26e12              # bytes/s: the copy kernel's read + written on the H200 (torch, same call)
REGS_SM, THREADS_SM, WARPS_SM, BLOCKS_SM = 65536, 2048, 64, 32
SMEM_SM = 233472               # 228 KiB of shared memory per SM (the driver's largest carve-out)
SMEM_RESERVED = 1024           # per block, the driver's (CUDA reserves 1 KiB per block on sm_8x/9x)
REG_UNIT = 256                 # registers are allocated per warp in units of 256
# lanes per clock per SM of the pipes other than FP32 (CUDA C Programming Guide, arithmetic
# instruction throughput, compute capability 9.0): 32-bit integer add, multiply, shift, compare,
# logic 64; MUFU (ex2, lg2, rcp, rsq, sin, cos) 16; type conversions 16. Shared memory: 128 bytes
# per clock per SM.
PIPE_LANES = {'int': 64.0, 'mufu': 16.0, 'conv': 16.0}
SHARED_BYTES_CLK = 128.0
LAUNCH_GAP = 5e-6              # s per kernel launch in an in-order queue (an assumption, not fitted)

# Calibrated constants (fit of today's kernels to the H200 measurements, `speedmodel.py --fit`):
CAL = {'issue_eff': 0.48, 'latency': 0.18e-6}


def conv_pipe(op):
    # I2FP, F2FP (Ampere's ALU forms) are left out: they run on the full-rate pipes
    return op.split('.')[0] in ('F2F', 'F2I', 'I2F', 'I2I', 'FRND')


# ---- the analysis of one launch -----------------------------------------------------------------

PAYLOAD = ('ffma', 'falu', 'lds', 'sts', 'ldg', 'stg', 'mufu', 'conv')


class Analysis:
    """One kernel's SASS tied to its source loops (independent of the shape)."""

    def __init__(self, name, listing, text, where=lambda line: 'line %s' % line):
        self.where = where
        funcs = sass.parse_listing(listing)
        if name not in funcs:
            raise ValueError('%s: not in the SASS listing' % name)
        self.name = name
        self.k = sass.Kernel(name, *funcs[name])
        self.text = text
        self.src = srcloops.loops(text, name)
        if self.src is None:
            raise ValueError('%s: kernel not found in the source' % name)
        span = srcloops.kernel_lines(text, name)
        self.span = span
        k = self.k
        # tie each SASS loop to its source loop: the deepest one holding the line of the loop's
        # back edge (LLVM gives the latch branch the line of the `for`; checked on every loop of
        # today's kernels), else the deepest holding at least half of its own instructions' kernel
        # lines (inlined helpers' lines are outside the kernel and left out)
        for lp in k.loops:
            lp.src = None
            latch = collections.Counter(k.block_ins(u)[-1].line for u in lp.body
                                        if lp.header in k.blocks[u].succ and k.block_ins(u)[-1].line is not None)
            line = latch.most_common(1)[0][0] if latch else None
            if line is not None and span[0] <= line <= span[1]:
                lp.src = self._deepest(lambda s: s.contains(line))
            if lp.src is not None:
                continue
            lines = [ln for ln in k.lines_of(lp.own) if span[0] <= ln <= span[1]]
            if lines:
                lp.src = self._deepest(lambda s: sum(1 for ln in lines if s.contains(ln)) >= 0.5 * len(lines))
        # unroll factors: the SASS loops of one source loop under the same parent, by their payload
        groups = collections.defaultdict(list)
        for lp in k.loops:
            if lp.src is not None:
                groups[(id(lp.src), id(lp.parent))].append(lp)
        for g in groups.values():
            pay = []
            for lp in g:
                ins = [x for b in lp.own for x in k.block_ins(b)]
                p = sum(1 for x in ins if x.cls in PAYLOAD and x.line is not None and lp.src.contains(x.line))
                pay.append(p or len(ins))
            lo = min(pay) or 1
            for lp, p in zip(g, pay):
                lp.unroll = max(1, int(round(p / lo)))
        for lp in k.loops:
            if not hasattr(lp, 'unroll'):
                lp.unroll = 1

    def _deepest(self, pred):
        best = None
        for s in self.src:
            if pred(s) and (best is None or s.depth() > best.depth()):
                best = s
        return best


def cascade(total, factors):
    """Iterations of each SASS loop of a source loop run `total` times per entry, the loops being
    unrolled by `factors` (a main loop, then remainder loops): the largest factor first."""
    res, rem = {}, total
    for f in sorted(set(factors), reverse=True):
        res[f] = rem // f
        rem -= res[f] * f
    return res


def loop_trips(an, trips):
    """{SASS loop: iterations per warp and entry}, from the description's {snippet: iterations}.
    Raises ValueError for a SASS loop with no description (or a description naming no loop)."""
    by_src = {}
    for snip, n in trips.items():
        s = srcloops.resolve(an.text, an.name, an.src, snip)
        by_src[id(s)] = (n, snip)
    k = an.k
    out = {}
    sib = collections.defaultdict(list)
    for lp in k.loops:
        if lp.src is None:
            raise ValueError('%s: SASS loop at 0x%x has no line of the kernel (an inlined helper\'s loop?)' % (
                an.name, k.ins[k.blocks[lp.header].start].addr))
        if id(lp.src) not in by_src:
            raise ValueError('%s: no trip count for the loop at %s: %s' % (an.name, an.where(lp.src.head), lp.src.text))
        sib[(id(lp.src), id(lp.parent))].append(lp)
    for g in sib.values():
        n = by_src[id(g[0].src)][0]
        whole = math.ceil(n) if n > 0 else 0
        scale = n / whole if whole else 0.0
        c = cascade(int(whole), [lp.unroll for lp in g])
        for lp in g:
            out[lp] = c[lp.unroll] * scale
    return out


def load_waits(k):
    """Latency exposures, per block: how many times an instruction of the block reads the result of
    a global load (first count) or a shared load (second) still outstanding, scanning the blocks in
    address order (so a load's use may lie in a later block; loads issued before such a wait count
    as arrived with it, a barrier ends the shared ones). Also the most global bytes per lane in
    flight at once."""
    pend_g, pend_s, cur, most = set(), set(), 0, 0
    waits = {}
    for i in k.live:
        wg = ws = 0
        for x in k.block_ins(i):
            src = x.srcs()
            if pend_g & src:
                wg += 1
                pend_g, cur = set(), 0
            if pend_s & src:
                ws += 1
                pend_s = set()
            if x.cls == 'bar':
                pend_s = set()
            if x.cls == 'ldg':
                pend_g |= x.dests()
                cur += sass.width_bytes(x.op)
                most = max(most, cur)
            elif x.cls == 'lds':
                pend_s |= x.dests()
            else:
                pend_g -= x.dests()
                pend_s -= x.dests()
        waits[i] = (wg, ws)
    return waits, most


def occupancy(regs, smem, wg):
    """Resident blocks per SM and what limits them."""
    warps = -(-wg // 32)
    per_warp = -(-max(regs, 1) * 32 // REG_UNIT) * REG_UNIT
    lim = {'threads': THREADS_SM // (warps * 32), 'warps': WARPS_SM // warps, 'blocks': BLOCKS_SM,
           'registers': REGS_SM // (per_warp * warps)}
    if smem:
        lim['shared'] = SMEM_SM // (smem + SMEM_RESERVED)
    n = min(lim.values())
    return n, min(lim, key=lambda x: (lim[x], x))


def evaluate(an, res, L):
    """The model of one launch: counts, occupancy, and the bounds' parts that do not depend on the
    calibration (timing() adds those). res: ptxas' figures."""
    k = an.k
    trips = loop_trips(an, L.trips)
    weights = [(srcloops.resolve_branch(an.text, an.name, snip), w) for snip, w in L.branches.items()]
    mult = {}
    for i in k.live:
        m, lp = 1.0, k.innermost(i)
        while lp is not None:
            m *= trips[lp]
            lp = lp.parent
        if weights:  # a block in a weighted part of a branch: most of its kernel lines lie there (a
            # helper's part: most of all its lines, the helper inlined among the kernel's code)
            for ((a, b), span), w in weights:
                lines = [x.line for x in k.block_ins(i) if x.line is not None and (span is None or span[0] <= x.line <= span[1])]
                if lines and sum(1 for ln in lines if a <= ln <= b) * 2 > len(lines):
                    m *= w
        mult[i] = m
    warps = -(-L.wg // 32)
    cls = collections.Counter()
    pipe = collections.Counter()
    waits_g = waits_s = 0.0
    waits, inflight = load_waits(k)
    for i in k.live:
        ins = k.block_ins(i)
        m = mult[i]
        if m == 0:
            continue
        for x in ins:
            cls[x.cls] += m
            if x.cls == 'int' and not x.op.startswith('U'):
                pipe['int'] += m
            elif x.cls == 'mufu':
                pipe['mufu'] += m
            elif x.cls == 'conv' and conv_pipe(x.op):
                pipe['conv'] += m
            elif x.cls in ('lds', 'sts'):
                pipe['shared'] += m * sass.width_bytes(x.op) * 32
        waits_g += waits[i][0] * m
        waits_s += waits[i][1] * m
    per_wg = {c: n * warps for c, n in cls.items()}
    total_wg = sum(per_wg.values())
    regs = res.get('regs', 0)
    smem = res.get('local', 0)
    blocks, limiter = occupancy(regs, smem, L.wg)
    wgs_sm = L.wgs / SMS
    sm_wgs = math.ceil(wgs_sm) if L.uniform else wgs_sm   # work-groups of the busiest SM
    resident = max(1, min(blocks, math.ceil(wgs_sm)))     # blocks at once on an SM
    waves = math.ceil(sm_wgs / resident) if L.uniform else sm_wgs / resident
    issue1 = sm_wgs * total_wg / (ISSUE * CLOCK)   # at full issue
    pipes = {'int': sm_wgs * warps * pipe['int'] * 32 / PIPE_LANES['int'] / CLOCK,
             'mufu': sm_wgs * warps * pipe['mufu'] * 32 / PIPE_LANES['mufu'] / CLOCK,
             'conv': sm_wgs * warps * pipe['conv'] * 32 / PIPE_LANES['conv'] / CLOCK,
             'shared': sm_wgs * warps * pipe['shared'] / SHARED_BYTES_CLK / CLOCK}
    pname = max(pipes, key=pipes.get)
    t_mem = L.dram / DRAM_BW
    # Little's law: a warp's waits on global loads follow each other; the resident warps overlap
    lat1 = waves * waits_g                         # times the latency
    hot = None
    if L.hot:
        s = srcloops.resolve(an.text, an.name, an.src, L.hot)
        top = [lp for lp in k.loops if lp.src is s]
        if top:
            body = set().union(*[lp.body for lp in top])
            it = sum(trips[lp] * lp.unroll * math.prod(trips[p] for p in _ancestors(lp)) for lp in top)
            hc = collections.Counter()
            for i in body:
                for x in k.block_ins(i):
                    hc[x.cls] += mult[i]
            n = sum(hc.values())
            hot = {'line': an.where(s.head), 'text': s.text, 'iters': it, 'per_iter': {c: v / it for c, v in hc.items()} if it else {},
                   'ffma_share': hc['ffma'] / n if n else 0.0}
    return {
        'kernel': an.name, 'wgs': L.wgs, 'wg': L.wg, 'regs': regs, 'smem': smem, 'blocks_sm': blocks,
        'limiter': limiter, 'occupancy': blocks * warps / WARPS_SM, 'waves': waves, 'resident': resident,
        'per_wg': dict(per_wg), 'total': total_wg * L.wgs, 'waits_g': waits_g, 'waits_s': waits_s,
        'inflight_lane_bytes': inflight, 'inflight_sm': resident * warps * 32 * inflight, 'issue1': issue1, 'lat1': lat1, 'pipe': (pname, pipes[pname]),
        'memory': t_mem, 'hot': hot, 'unit': L.unit, 'dram': L.dram,
        'loops': [{'where': an.where(lp.src.head), 'text': lp.src.text, 'depth': lp.depth(), 'unroll': lp.unroll,
                   'trips': trips[lp], 'runs': mult[lp.header], 'waits': sum(waits[b][0] for b in lp.own),
                   'mix': collections.Counter(x.cls for b in lp.own for x in k.block_ins(b))} for lp in k.loops],
        'sub_ins': k.sub_ins,
    }


def timing(r, cal):
    """The bounds of an evaluated launch under the calibration, the winner and the predicted time."""
    b = {'issue': r['issue1'] / cal['issue_eff'], 'pipe ' + r['pipe'][0]: r['pipe'][1], 'memory': r['memory'],
         'latency': r['lat1'] * cal['latency']}
    win = max(b, key=b.get)
    return dict(r, bounds=b, bound=win, time=b[win] + LAUNCH_GAP)


def _ancestors(lp):
    p = lp.parent
    while p:
        yield p
        p = p.parent


def evaluate_cases(progs, cases):
    """{case: [(Launch, evaluation or error message)]}; progs: program -> compile."""
    out, cache = {}, {}
    for cs in cases:
        rows = []
        for L in cs.launches:
            key = (L.program, L.kernel)
            try:
                if key not in cache:
                    p = progs[L.program]
                    cache[key] = Analysis(L.kernel, p['listing'], p['text'], p['where'])
                rows.append((L, evaluate(cache[key], progs[L.program]['res'].get(L.kernel, {}), L)))
            except ValueError as e:
                rows.append((L, str(e)))
        out[cs.name] = rows
    return out


def run_cases(ev, cal=CAL):
    """{case: {'launches': [(Launch, result or error)], 'time': s or None, 'err': first error}}."""
    out = {}
    for name, rows in ev.items():
        res = [(L, timing(x, cal) if isinstance(x, dict) else x) for L, x in rows]
        err = next((x for L, x in res if not isinstance(x, dict)), None)
        out[name] = {'launches': res, 'err': err,
                     'time': None if err else sum(x['time'] for L, x in res)}
    return out


def part_time(res, case, what):
    """A case's predicted time of its last launch ('last') or of the others ('rest')."""
    rows = [r for L, r in res[case]['launches']]
    if any(not isinstance(r, dict) for r in rows):
        return None
    sel = rows[-1:] if what == 'last' else rows[:-1]
    return sum(r['time'] for r in sel)
