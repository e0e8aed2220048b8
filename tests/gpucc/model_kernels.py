"""The speed model's cases (tests/gpucc/speedmodel.py): the bench shapes, each the kernel launches the
host makes for it, and what an H200 measured (../shared/gpu/README.md, issue 29's table).

A launch (speedmodel.Launch) is: the kernel, the gpucc_variants program it is compiled from, the
work-groups and their size (as src/opencl/*.c computes them), per source loop of the kernel its
iterations per warp and entry of the loop (keyed by a snippet of a line inside that loop,
whitespace-insensitive; 'snippet#2' for its second occurrence), the DRAM bytes it moves, the unit of
work the tables count per, and the hot loop whose mix and FFMA share are reported. Every loop the
kernel keeps in its SASS needs an entry (the model refuses a loop it cannot count); loops the
compilers unroll completely may have one. `c` holds the program's numeric #defines and -D knobs
(RQ_PTK, RQ_GA_BM, ...), so the counts follow the constants.

Iterations per warp: a loop `for (e = lid; e < N; e += wg)` runs N / wg times in every warp; a loop
that only the first warp runs (N <= 32) runs 1 / warps-per-group times on average.

To add a kernel (a new decode or prefill kernel): a function returning its Launch list for a shape
(a few lines: grid from the host code, the loop table), a Case in CASES with the measured time where
one exists, and in BUDGETS its budget lines (without a TODO reason they are hard budgets)."""


class Launch:
    """A kernel launch as the host makes it (model_kernels.py builds these)."""

    def __init__(self, kernel, program, wgs, wg, trips, dram, unit=None, hot=None, uniform=True, note='', branches=None):
        self.kernel, self.program, self.wgs, self.wg = kernel, program, wgs, wg
        self.trips, self.dram, self.unit, self.hot, self.uniform, self.note = trips, dram, unit, hot, uniform, note
        # {snippet of an if line (or 'else:' + snippet): the fraction of its entries that take that
        # part}: the part's code is counted that many times (else both parts of every branch count);
        # '@helper snippet' names an if of an inlined helper function, '@helper' all of it (srcloops.resolve_branch)
        self.branches = branches or {}


SMS = 132  # CL_DEVICE_MAX_COMPUTE_UNITS of the H200 (and the H100)


def cdiv(a, b):
    return -(-a // b)


# ---- RoPE pass (cl/rope_gpu.cl, RQ_RUB 1: the GPU profile) ----------------------------------------

def rope(c, dtype, rows, bh, D, R=None, what='RoPE pass', tpose=False):
    """rope_rotate_<dtype> over `rows` rows of `bh` heads (src/opencl/cl_launch.c rq_rotate_grid, GPU
    form): work-groups of RQ_RGX x RQ_RGY work-items, each a tile of RQ_RGX units x RQ_RTR rows for
    RQ_RHC heads. tpose: the output is Kt ([d][key], through the local-memory transpose)."""
    R = D if R is None else R
    units = R // 2 + (D - R)
    wgs = cdiv(units, c['RQ_RGX']) * cdiv(rows, c['RQ_RTR']) * cdiv(bh, c['RQ_RHC'])
    es = {'f32': 4, 'f16': 2, 'bf16': 2}[dtype]
    return Launch('rope_rotate_' + dtype, 'gpu', wgs, c['RQ_RGX'] * c['RQ_RGY'],
                  {'for (int h = 0; h < RQ_RHC; h++)': min(bh, c['RQ_RHC']),
                   'for (int u = ly; u < RQ_RGX; u += RQ_RGY)': c['RQ_RGX'] / c['RQ_RGY'] if tpose else 0},
                  dram=rows * bh * D * (es + 4), unit=('row x head', rows * bh), hot='for (int h = 0; h < RQ_RHC; h++)',
                  note=what)


# ---- paged decode before issue 29 (cl/paged_gpu.cl paged_attn_gpu: today the fallback of fast_decode) --

def paged_split(tasks, longest_pages, page_size, min_keys=256):
    """src/core/paged_call.c rq_paged_pages_per_split with src/opencl/cl_paged_run.c's GPU arguments."""
    target = SMS * 8
    want = cdiv(target, tasks)
    pps = max(cdiv(longest_pages, want), cdiv(min_keys, page_size))
    return pps


def decode_call(c, p1, n, hq, D, nsplit, part, dense):
    """A decode call's launches around its pass 1 `p1` (either kernel): Q's rotation before it,
    paged_combine of its `nsplit` partial rows (`part` bytes) after it."""
    rows = n * hq
    comb = Launch('paged_combine', 'gpu', cdiv(D, c['RQ_PCWG']) * rows, c['RQ_PCWG'], {
        'M = fmax(M, ml[2 * i])': nsplit,
        'o = fma(part[(r0 + i) * a.Dv + dv], w, o)': nsplit,
    }, dram=part + rows * D * 4, unit=('row', rows), note='%d splits' % nsplit)
    q = rope(c, 'f16' if dense else 'f32', n, hq, D, what='Q rotation')
    return [q, p1, comb]


def paged_decode(c, tokens, hq, hkv, D, kv_es, n=1, page=16, q8=False, dense=False):
    """A decode call over `n` sequences (or dense rows) of `tokens` keys each: Q's rotation,
    paged_attn_gpu, paged_combine (src/opencl/cl_paged_run.c rq_cl_paged_run, GPU shape)."""
    G = hq // hkv
    wg = 128  # rq_cl_paged_gpu_fit: 128 work-items for Dv <= 128 * RQ_PVT
    warps = wg // 32
    ngc, gpg = cdiv(G, c['RQ_PGH']), min(G, c['RQ_PGH'])
    groups = hkv * ngc
    kq = 1
    while kq < c['RQ_PKQ'] and wg // (2 * kq) >= 1 and wg // (2 * kq) * c['RQ_PVT'] >= D:
        kq *= 2
    ndvc = cdiv(D, wg // kq * c['RQ_PVT'])
    pages = cdiv(tokens, page)
    pps = paged_split(n * groups * ndvc, pages, page)
    nsplit, kps = cdiv(pages, pps), pps * page
    tiles = sum(cdiv(min(kps, tokens - s * kps), c['RQ_PTK']) for s in range(nsplit)) / nsplit
    ng = gpg
    nst = cdiv(D // 2, c['RQ_PDC'] // 2)  # full rotary: every stage holds rotation pairs
    kv = n * tokens * hkv * 2 * D * kv_es + (n * tokens * hkv * 2 * 4 if q8 else 0)
    part = n * hq * nsplit * (D + 2) * 4
    p1 = Launch('paged_attn_gpu', 'gpu', nsplit * groups * ndvc * n, wg, {
        'for (int e = lid; e < RQ_PGH * RQ_PQD; e += wg)': c['RQ_PGH'] * c['RQ_PQD'] / wg,  # Q staged once
        'for (int g = lid; g < RQ_PGH; g += wg)': 1 / warps,
        'for (int c = lid; c < 256; c += wg)': 256 / wg if q8 else 0,
        'for (int t0 = jbeg; t0 < jend; t0 += RQ_PTK)': tiles,
        'sc[e] = t < nt &&': c['RQ_PGH'] * c['RQ_PTK'] / wg,
        'for (int t = lid; t < RQ_PTK; t += wg)': 1 / warps,
        'for (int st = 0; st < nst; st++)': nst,
        'qs[g * RQ_PQD + c] = q[g * D': 0,                                  # qonce: D <= 256
        'for (int e = lid; e < RQ_PTK * (RQ_PDC / 2); e += wg)': c['RQ_PTK'] * c['RQ_PDC'] // 2 / wg,
        'for (int e = lid; e < RQ_PTK * RQ_PDC; e += wg)': 0,               # no pass-through dims
        'for (int sl = lid; sl < RQ_PTK * RQ_PSQ; sl += wg)#1': c['RQ_PTK'] * c['RQ_PSQ'] / wg,
        's1 = fma(qs[q1 + c], x, s1)': c['RQ_PDC'] if ng > c['RQ_PSQ'] else 0,   # two heads a slot
        's0 = fma(qs[q0 + c], kt[kr0 + c], s0)': c['RQ_PDC'] if ng <= c['RQ_PSQ'] else 0,
        'sc[e] = RQ_SOFTCAP(sc[e]': 0,
        'for (int sl = lid; sl < RQ_PTK * RQ_PSQ; sl += wg)#2': c['RQ_PTK'] * c['RQ_PSQ'] / wg,
        'for (int k = 0; k < 2; k++)': 1 if ng <= c['RQ_PSQ'] else 2,
        'm0 = fmax(m0, sg[tt])': c['RQ_PTK'] // 4 - 1,
        'for (int tt0 = klane; tt0 < nt; tt0 += RQ_PUN * kq)': c['RQ_PTK'] / (c['RQ_PUN'] * kq),
        'for (int g = lid; g < ng; g += wg)': 1 / warps,
        's0 += pg[tt]': c['RQ_PTK'] // 4 - 1,
        'for (int r = 0; r < kq - 1; r++)': kq - 1,
    }, dram=kv + part, unit=('key x KV head', n * tokens * hkv), hot='for (int t0 = jbeg; t0 < jend; t0 += RQ_PTK)',
        note='%d splits of %d keys, %d head groups, %d rows' % (nsplit, kps, groups, n))
    return decode_call(c, p1, n, hq, D, nsplit, part, dense)


# ---- the GPU profile's decode today (cl/paged_fast.cl, cl/paged_fast_task.tpl.cl paged_attn_fast4/8) --

def fast_dtype(dt):
    """Branch weights of the fast kernel's K and V loads (cl/paged_fast.cl rq_fast_ld, rq_fast_ld4,
    rq_fast_q8, inlined: the cache's dtype is a run-time argument, uniform) for caches of dtype dt:
    only that dtype's code counts."""
    order = ['F16', 'BF16', 'F32']
    w = {}
    for fn in ('rq_fast_ld', 'rq_fast_ld4'):
        for d in order[:order.index(dt) if dt in order else 3]:
            w['@%s if (dt == RQ_DT_%s)' % (fn, d)] = 0                     # the dtypes before it
        if dt in order:
            w['else:@%s if (dt == RQ_DT_%s)' % (fn, dt)] = 0               # and after it (returns)
    if dt in order:
        w['@rq_fast_q8'] = 0
    else:  # an 8-bit cache: rq_fast_q8's own branches
        w['else:@rq_fast_q8 if (dt == RQ_DT_I8)' if dt == 'I8' else '@rq_fast_q8 if (dt == RQ_DT_I8)'] = 0
    return w


def fast_decode(c, tokens, hq, hkv, D, kv_es, n=1, page=16, q8=False, dense=False):
    """A decode call as the GPU profile makes it where the fast pass 1 takes the shape (D = Dv = R, full
    interleaved rotary, no soft-capping, no window): Q's rotation, paged_attn_fast4 or _fast8,
    paged_combine (src/opencl/cl_paged_run.c rq_cl_paged_run with src/opencl/cl_paged_fast.c rq_cl_pfast_geometry).
    Paged: `n` sequences of one row and `tokens` keys each (pages of `page`); dense: one batch entry
    of Sq = `n` rows at the end of `tokens` keys (src/opencl/cl_dense.c: pages of RQ_DENSE_PAGE 64, the
    rows sharing one page list, grouped: rq_cl_pfast_groups)."""
    G = hq // hkv
    wg, warps = c['RQ_FWG'], c['RQ_FWG'] // 32
    # rq_cl_pfast_groups / rq_cl_pfast_rows: the longest run of rows sharing a page list (a dense call's Sq
    # rows, up to RQ_FM), the kernel for G x that many query vectors, rows per group
    most = min(n, c['RQ_FM']) if dense else 1
    cap = 8 if 8 * D <= c['RQ_FQF'] else 4
    fm = 4 if G * most <= 4 or cap == 4 else 8
    gpg = min(G, fm)
    rpg = fm // gpg
    ngroups = cdiv(n, rpg) if dense else n
    nr = min(rpg, n) if dense else 1
    M = nr * gpg
    nmb = cdiv(M, 4)
    # rq_cl_pfast_geometry: head chunks, V chunks, the split (whole tiles where the page size divides one)
    ngc = cdiv(G, gpg)
    dvch = min(D, wg // cdiv(fm, 4) * c['RQ_FVD'])
    ndvc = cdiv(D, dvch)
    tasks = ngroups * hkv * ngc * ndvc
    pages = cdiv(tokens, page)
    want = cdiv(SMS * c['RQ_FSPLITS'], tasks)
    pps = max(cdiv(pages, want), cdiv(wg, page))
    if wg % page == 0:
        tp = cdiv(wg, page)
        pps = cdiv(pps, tp) * tp
    nsplit, kps = cdiv(pages, pps), pps * page
    tiles = sum(cdiv(min(kps, tokens - s * kps), wg) for s in range(nsplit)) / nsplit
    R = D
    dr = 32 if R <= 128 else 16  # rq_pfast_dr
    cells = nmb * (min(dvch, D) // c['RQ_FVD'])
    KL = wg // cells
    kern = 'paged_attn_fast%d' % fm
    # DRAM: K and V once (a dense call's row groups read the same keys at the same time, adjacent in
    # the grid: L2 serves all but the first), 8-bit scales, the partial outputs; Q and the R(delta)
    # table (16 KiB, 17 KiB) are re-read by every work-group from L2
    seqs = 1 if dense else n
    kv = seqs * tokens * hkv * 2 * (D * kv_es + (4 if q8 else 0))
    part = n * hq * nsplit * (D + 2) * 4
    p1 = Launch(kern, 'gpu', ngroups * nsplit * hkv * ngc * ndvc, wg, {
        'for (int ri = 0; ri < nr; ri++)#1': nr,                            # the group's rows' lengths
        'for (int e = lid; e < D * 4 * nmb0; e += RQ_FWG)': D * 4 * nmb / wg,  # Q staged once
        'for (int e = lid; e < (r4 + 1) * a.dr; e += RQ_FWG)': (R // 4 + 1) * dr / wg,  # the R(delta) table
        'for (int m = lid; m < RQ_FM; m += RQ_FWG)': 1 / warps,
        'for (int t0 = jbeg; t0 < tci[RQ_FTC_JEND]; t0 += RQ_FWG)': tiles,
        'for (int ww = 0; ww < RQ_FWG / dr; ww++)': wg // dr,               # anchors: warps with lid < R/2
        'for (int ri = 0; ri < nr; ri++)#2': nr,                            # a key's mask bits
        'for (int u = 0; u < nru; u++)': R // 16,                           # the score loop, 16 dims a unit
        'for (int c = 0; c < npt; c++)': (D - R) // 8,                      # no pass-through dims
        'for (int m = 0; m < M; m++)#1': 0,                                 # soft-capping: not in the bench
        'for (int m = 0; m < M; m++)#2': M,                                 # P = e^(S - m) per vector
        'for (int tt = 0; tt < RQ_FWG; tt += 4)': wg // 4 // 2,             # flagged: unroll 2 (_Pragma), lid < M
        'for (int m = 0; m < M; m++)#3': M,                                 # flagged: P again
        'RQ_FAST_PV(': wg / (c['RQ_FPU'] * KL),                            # P.V: RQ_FPU keys of the lane a round
        'for (int k = 1; k < KL; k++)': KL - 1,                             # key lanes summed (kl == 0)
    }, dram=kv + part, unit=('key x KV head', tokens * hkv), hot='for (int t0 = jbeg; t0 < tci[RQ_FTC_JEND]; t0 += RQ_FWG)',
        branches={
            'if (lid < R / 2) {': min(1.0, cdiv(R // 2, 32) * 32 / wg),     # the anchors' warps
            'if (a.softcap > 0.0f) {': 0,
            # the flagged path: the first tile of a split (m = -inf), then only a score past m + 8 (none
            # in the bench's random data after the first tile)
            'if (flag[par]) {': 1 / tiles,
            'if (lid < M) {': 1 / warps,                                    # M <= 32: the first warp
            'if (kl > 0 && kl < KL) {': (KL - 1) / KL,
            'if (kl == 0) {': 1 / KL,
            **fast_dtype('I8' if q8 else {2: 'F16', 4: 'F32'}[kv_es]),
        }, note='%d row groups of %d, %d splits of %d keys, %d KV heads; KL %d' % (ngroups, nr, nsplit, kps, hkv, KL))
    return decode_call(c, p1, n, hq, D, nsplit, part, dense)


# ---- attention (cl/attention_fa2.cl qk_attention_fa2_*, cl/attention_gpu.cl qk_attention_gpu_*) --

def attention_fa2(c, dtype, prog, q0, n, S, H, D):
    """qk_attention_fa2_<dtype> over query rows q0 .. q0+n-1 (positions = rows) of a causal call with
    S keys, Hq = Hkv = H, D = Dv (src/opencl/cl_attn.c: a work-group per RQ_GA_BM rows and KV head)."""
    bm, bn, tk, rb = c['RQ_GA_BM'], c['RQ_GA_BN'], c['RQ_GA_TK'], c['RQ_GA_RB']
    nt = (bm // rb) * (bn // 4)
    warps = nt // 32
    blocks = cdiv(n, bm)
    visited = mixed = 0
    for b in range(blocks):
        r0, r1 = q0 + b * bm, q0 + min(n, (b + 1) * bm) - 1
        jend = min(S, r1 + 1)  # keys up to the last row's position (the kernel's jend)
        for j in range(0, jend, bn):
            visited += 1
            mixed += (j + bn - 1 > r0) or j + bn > S  # some row masks some key, or keys past S
    tiles, frac = visited / blocks, mixed / visited
    es = {'f32': 4, 'f16': 2, 'bf16': 2}[dtype]
    return Launch('qk_attention_fa2_' + dtype, prog, blocks * H, nt, {
        'for (int t = lid; t < RQ_GA_BM; t += RQ_FA_NT)': bm / nt,              # lanes below BM
        'for (int t = 0; t < nrow; t++)': min(bm, n) / warps,                    # work-item 0 only
        'for (int j0 = jbeg; j0 < jend; j0 += RQ_GA_BN)': tiles,
        'for (int t = lid; t < RQ_GA_BN; t += RQ_FA_NT)': 0, 'for (int t = 0; t < nk; t++)': 0,  # no key array
        'for (int st = 0; st < nst; st++)': D / tk,
        # the loops below are unrolled by 8 (_Pragma) with no remainder loop (TK a constant): their SASS
        # loop runs an eighth of the source iterations
        'for (int d = 0; d < RQ_GA_TK; d++)': tk / 8,
        'for (int r = lid; r < RQ_GA_BM; r += RQ_FA_NT)#1': bm / nt,            # the row owners
        'for (int t = 0; t < 4; t++)#1': 4, 'for (int t = 0; t < 4; t++)#2': 4,
        'for (int vt = 0; vt < nv; vt++)': bn / tk,
        'for (int u = 0; u < RQ_GA_TK; u++)#1': tk / 8, 'for (int u = 0; u < RQ_GA_TK; u++)#2': tk / 8,
        'for (int r = lid; r < RQ_GA_BM; r += RQ_FA_NT)#2': bm / nt,
        'for (int t = 0; t < RQ_FA_TX; t++)': bn // 4,
    }, dram=(n * H * D * 4) + S * H * D * 4 + S * H * D * es + n * H * D * es,
        unit=('64x64 score tile', blocks * H * tiles * bm * bn / 4096), hot='for (int j0 = jbeg; j0 < jend; j0 += RQ_GA_BN)',
        uniform=False, branches={
            'if (a.softcap > 0.0f)': 0,                                            # no soft-capping
            # S 4096 is a multiple of every tile and step: the loads' edge parts never run
            'if (kfull) { /* K loads of step 0': 1, 'else:if (kfull) { /* K loads of step 0': 0,
            'if (kfull) { /* K loads of a whole tile */': 1, 'else:if (kfull) { /* K loads of a whole tile */': 0,
            'if (j0 + RQ_GA_TK <= Sk && vall) {': 1, 'else:if (j0 + RQ_GA_TK <= Sk && vall) {': 0,
            'if (j0 + (vt + 2) * RQ_GA_TK <= Sk && vall) {': 1, 'else:if (j0 + (vt + 2) * RQ_GA_TK <= Sk && vall) {': 0,
            'if (use_kpos) {': 0,
            'if (pj_min > L.rlim[1] || pj_max < L.rlim[2])': 0,                    # no tile skipped in the range
            'if (mixed) { /* masks: exact -inf */': frac,
            'if (mixed) { /* weights of a mixed tile */': frac, 'else:if (mixed) { /* weights of a mixed tile */': 1 - frac,
            'if (mixed) { /* P.V selecting masked keys away */': frac,
            'else:if (mixed) { /* P.V selecting masked keys away */': 1 - frac,
        }, note='rows %d..%d, %.1f key tiles per block, %.0f%% of them mixed' % (q0, q0 + n - 1, tiles, 100 * frac))


def attention(c, dtype, S, H, D, pass_bytes=64 << 20, prog='gpu'):
    """Causal prefill attention, Hq = Hkv = H (src/opencl/cl_attn.c rq_attn_enqueue): K's rotation into
    Kt, then per pass of query rows (attn_pass_rows: 64 MiB of Qr) Q's rotation and the kernel: the
    register-blocked one where the program has it (RQ_GA_FA2), else qk_attention_gpu_*."""
    bm, bn, tk, rb = c['RQ_GA_BM'], c['RQ_GA_BN'], c['RQ_GA_TK'], c['RQ_GA_RB']
    nt = (bm // rb) * (bn // 4)
    warps = nt // 32
    per = max(1, pass_bytes // (H * D * 4))  # attn_pass_rows: the cap counts the rows only
    passes = cdiv(S, per)
    rows = cdiv(S, passes)
    es = {'f32': 4, 'f16': 2, 'bf16': 2}[dtype]
    out = [rope(c, dtype, S, H, D, what='K rotation', tpose=True)]
    for p in range(passes):
        q0, n = p * rows, min(rows, S - p * rows)
        blocks = cdiv(n, bm)
        # key tiles not wholly masked for a block of rows at positions q0 + m0 .. q0 + m0 + bm - 1
        tiles = sum(min(cdiv(S, bn), (q0 + b * bm + min(bm, n - b * bm) - 1) // bn + 1) for b in range(blocks)) / blocks
        out.append(rope(c, dtype, n, H, D, what='Q rotation, pass %d' % (p + 1)))
        if c.get('RQ_GA_FA2'):
            out.append(attention_fa2(c, dtype, prog, q0, n, S, H, D))
            continue
        out.append(Launch('qk_attention_gpu_' + dtype, prog, blocks * H, nt, {
            'for (int t = lid; t < RQ_GA_BM; t += RQ_GA_NT)': 1 / warps,
            'for (int t = 0; t < nrow; t++)': min(bm, n) / warps,            # work-item 0 only
            'for (int j0 = 0; j0 < Sk; j0 += RQ_GA_BN)': tiles,
            'L.cpos[t] = kpos[': 0, 'pj_min = min(pj_min, L.cpos[t])': 0,    # no key position array
            'for (int d0 = 0; d0 < D; d0 += RQ_GA_TK)': D / tk,
            'for (int r = qr0; r < RQ_GA_BM; r += RQ_GA_NT / RQ_GA_Q4)': min(1.0, bm * (tk // 4) / nt),
            'for (int c = ty; c < RQ_GA_TK; c += RQ_GA_TY)': tk / (bm // rb),
            'for (int c4 = 0; c4 < RQ_GA_Q4; c4++)': tk // 4,
            'for (int t = 0; t < RQ_GA_TX / 4; t++)#1': bn // 16,
            'for (int u0 = 0; u0 < nk; u0 += RQ_GA_TK)': bn / tk,
            'for (int u = ty; u < RQ_GA_TK; u += RQ_GA_TY)': tk / (bm // rb),
            'for (int t = 0; t < RQ_GA_TX / 4; t++)#2': bn // 16,
            'RQ_GA_NF_FIX(': 0,  # the non-finite V fix-up: finite inputs never run it
        }, dram=(n * H * D * 4) + S * H * D * 4 + S * H * D * es + n * H * D * es,
            unit=('64x64 score tile', blocks * H * tiles * bm * bn / 4096), hot='for (int j0 = 0; j0 < Sk; j0 += RQ_GA_BN)',
            uniform=False, note='pass %d: rows %d..%d, %.1f key tiles per block' % (p + 1, q0, q0 + n - 1, tiles)))
    return out


# ---- scores prefill (cl/scores_tiled.cl qk_scores_tiled) -----------------------------------------

def scores(c, S, H, D):
    """Scores S = Q K^T, B 1, Hq = Hkv = H, not causal (bench/scores_bench.c prefill shapes):
    the RoPE pass over Q and K, then qk_scores_tiled (src/opencl/cl_enqueue.c)."""
    tile, tk = c['RQ_TILE'], c['RQ_TK']
    tw = tile // c['RQ_RB']
    wgs = cdiv(S, tile) ** 2 * H
    return [rope(c, 'f32', S, H, D, what='Q rotation'), rope(c, 'f32', S, H, D, what='K rotation', tpose=True),
            Launch('qk_scores_tiled', 'gpu', wgs, tw * tw, {
                'for (int t = lid; t < 2 * RQ_TILE; t += RQ_NT)': 0,            # not masked
                'for (int d0 = 0; d0 < D; d0 += RQ_TK)': D / tk,
                'for (int e = lid; e < RQ_TILE * (RQ_TK / 4); e += RQ_NT)': tile * tk / 4 / (tw * tw),
                'for (int e = lid; e < RQ_TK * (RQ_TILE / 4); e += RQ_NT)': tile * tk / 4 / (tw * tw),
                'for (int c4 = 0; c4 < RQ_TK / 4; c4++)': tk // 4,
                'for (int l = 0; l < 4 && jj + l < Sk; l++)': 0,
            }, dram=S * S * H * 4 + 2 * S * H * D * 4, unit=('64x64 score tile', wgs * (tile // 64) ** 2),
                hot='for (int d0 = 0; d0 < D; d0 += RQ_TK)', branches={
                    # no soft-capping, no mask; rows of contiguous keys, S a multiple of 4
                    'if (softcap > 0.0f && !skip)': 0, 'if (masked) { /* cpos past Sk': 0,
                    'if (onb3 == (long)sizeof(float) && jj + 4 <= Sk) {': 1,
                    'else:if (onb3 == (long)sizeof(float) && jj + 4 <= Sk) {': 0})]


# ---- the cases --------------------------------------------------------------------------------------

class Case:
    def __init__(self, name, title, launches, measured=None, source=''):
        self.name, self.title, self.launches, self.measured, self.source = name, title, launches, measured, source


H200 = '../shared/gpu/README.md, H200 2026-11-28'


def cases(cs):
    """Today's bench shapes with their H200 figures (ms); `cs`: per program (gpucc_variants' gpu: the
    GPU profile's defaults; gpu-amd: the defaults of an AMD device, qk_attention_gpu_* in its old
    default shape), its constants and knobs."""
    c = cs['gpu']
    return [
        # the decode as the GPU profile runs it today: paged_attn_fast4 / fast8 (cl/paged_fast.cl, issue 29
        # part 1): predictions only, no H200 figure yet
        Case('paged-f16', 'paged decode f16, 131072 tokens, Hq 32/Hkv 8, D 128 (--paged 131072): paged_attn_fast4',
             fast_decode(c, 131072, 32, 8, 128, 2)),
        Case('paged-f32', 'paged decode f32 pages, same shape: paged_attn_fast4', fast_decode(c, 131072, 32, 8, 128, 4)),
        Case('paged-int8', 'paged decode int8 pages, same shape: paged_attn_fast4',
             fast_decode(c, 131072, 32, 8, 128, 1, q8=True)),
        Case('dense-sq1', 'dense decode f16, 131072 keys, Sq 1 (--dense-decode 131072): paged_attn_fast4',
             fast_decode(c, 131072, 32, 8, 128, 2, n=1, page=64, dense=True)),
        Case('dense-sq8', 'dense decode f16, 131072 keys, Sq 8: paged_attn_fast8 (4 row groups of 2)',
             fast_decode(c, 131072, 32, 8, 128, 2, n=8, page=64, dense=True)),
        # the H200's decode figures are of paged_attn_gpu, the pass 1 before the fast kernels (today the
        # fallback for the shapes they do not take, and ROPEQK_PAGED_FAST=0): they stay with that kernel
        Case('paged-f16-gpu', 'paged decode f16, the same shape with paged_attn_gpu (ROPEQK_PAGED_FAST=0)',
             paged_decode(c, 131072, 32, 8, 128, 2), 2.34, H200),
        Case('paged-f32-gpu', 'paged decode f32 pages with paged_attn_gpu', paged_decode(c, 131072, 32, 8, 128, 4),
             2.25, H200),
        Case('paged-int8-gpu', 'paged decode int8 pages with paged_attn_gpu',
             paged_decode(c, 131072, 32, 8, 128, 1, q8=True), 2.26, H200),
        Case('dense-sq1-gpu', 'dense decode f16, Sq 1, with paged_attn_gpu',
             paged_decode(c, 131072, 32, 8, 128, 2, n=1, page=64, dense=True), 2.38, H200),
        Case('dense-sq8-gpu', 'dense decode f16, Sq 8, with paged_attn_gpu',
             paged_decode(c, 131072, 32, 8, 128, 2, n=8, page=64, dense=True), 23.0, H200),
        # attention: predictions only. The H200's figures (12.3 ms for the call, 8.0 ms of kernel_ms)
        # were of the kernels before issue 29's (two query passes, the old RoPE pass and exp): the
        # calibration used them at f50c6ad (docs/gpu-model.md), today's code does not run that way
        Case('attn-s4096', 'attention f32 causal, S 4096, H 32, D 128 (--attention), whole call: qk_attention_fa2_f32',
             attention(c, 'f32', 4096, 32, 128)),
        Case('attn-s4096-gpu', 'the same with qk_attention_gpu_f32 in its old default shape 32/64/16/2/128',
             attention(cs['gpu-amd'], 'f32', 4096, 32, 128, prog='gpu-amd')),
        Case('attn-s1024', 'attention f32 causal, S 1024, H 32, D 128 (--attention, first shape)',
             attention(c, 'f32', 1024, 32, 128)),
        Case('scores-s2048', 'scores prefill f32, S 2048, H 32, D 128 (16.9 TFLOP/s), whole call',
             scores(c, 2048, 32, 128), 2 * 32 * 2048 * 2048 * 128 / 16.9e12 * 1e3, H200),
    ]


# Parts of a case measured on their own: (case, 'last' or 'rest') -> ms. The attention call's split
# (kernel_ms 8.0 ms of the second query pass, 4.3 ms before it) was measured with two query passes,
# which today's code no longer makes (src/opencl/cl_attn.c attn_pass_rows): none today.
PARTS = {}
PART_NAMES = {'last': 'its last kernel: the bench\'s kernel_ms', 'rest': 'the launches before it: "RoPE pass"'}

# Budgets held by the suite: (case, check, kernel, TODO reason or '' for a hard budget). Checks:
#   memory-bound: the DRAM bound is the largest of the kernel's bounds;
#   ffma-share X: at least X of the instructions the kernel's hot loop issues are FFMA (the key-tile
#                 loop of the attention kernel, nested loops included);
#   time X: the case's predicted time at most X ms (issue 29's H200 targets);
#   rope-share X: the RoPE launches (rope_rotate_*) at most X of the case's predicted time.
# Today's kernels fail most (issue 29): each is a TODO with the reason; a new kernel that meets its
# budget gets '' (one line), and the suite then fails if it stops meeting it.
BUDGETS = [
    # the decode's pass 1 today: paged_attn_fast4 (fast_decode); paged_attn_gpu, the fallback, has no budget
    ('paged-f16', 'memory-bound', 'paged_attn_fast4',
     'TODO paged_attn_fast4: issue-bound, 0.34 ms against 0.13 ms of DRAM: 158 warp-instructions per key and KV '
     'head (score units 56, P.V 71 with the run-time dtype branches of its V loads, 30 of them integer), 128 '
     'registers under the library\'s -cl-nv-maxrregcount=128 (100 without): 4 work-groups per SM, 25%'),
    ('dense-sq1', 'memory-bound', 'paged_attn_fast4', 'TODO the dense decode runs paged_attn_fast4 as the paged one: '
     'issue-bound (0.34 ms against 0.13 ms of DRAM)'),
    # qk_attention_fa2_f32: 0.71 (its key-tile loop, nested loops included)
    ('attn-s4096', 'ffma-share 0.7', 'qk_attention_fa2_f32', ''),
    ('paged-f16', 'time 0.25', '', 'TODO issue 29 target: 0.41 ms predicted with paged_attn_fast4 (issue-bound at '
     'the fitted issue efficiency 0.48; 0.16 ms of issue at full rate; paged_attn_gpu: 2.3 ms)'),
    ('paged-int8', 'time 0.15', '', 'TODO issue 29 target: 0.46 ms predicted with paged_attn_fast4 (issue-bound: '
     'the 8-bit decode adds 25 warp-instructions per key; DRAM 0.065 ms)'),
    ('attn-s4096', 'time 4.0', '',
     'TODO issue 29 target: 6.9 ms predicted at the fitted issue efficiency 0.48, which no kernel can meet '
     '(the FFMA alone of the causal call take 4.3 ms at 0.48; docs/gpu-model.md)'),
    ('scores-s2048', 'time %.3f' % (2 * 32 * 2048 * 2048 * 128 / 40e12 * 1e3), '',
     'TODO issue 29 target, 40 TFLOP/s (today: 17)'),
    # the model's RoPE pass (0.26 ms of 6.9) is within 5%; one query pass at S 4096 since prefill29, so the
    # bench's split (device_ms - kernel_ms) is the RoPE pass on the H200 too
    ('attn-s4096', 'rope-share 0.05', '', ''),
]
