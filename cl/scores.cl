/* Score pass: S = Qr . Kt over the head dim, from the rotated scratch written by rope.cl.
 *
 * Shape of the work (a register-blocked outer product, as in a GEMM micro-kernel):
 *   - a work-item owns a tile of RQ_TQ query rows x RQ_NV * RQ_VK keys and keeps it in RQ_TQ x RQ_NV
 *     accumulators of type floatRQ_VK. The keys of one d are contiguous in Kt, so each vector is
 *     one load; each query value is broadcast against the RQ_NV vectors (one FMA per row, vector
 *     and d);
 *   - CPU profile layouts (the host decides, src/opencl/cl_enqueue.c): Kt in panels of RQ_KP keys, [bk][ldk /
 *     RQ_KP][D][RQ_KP], so a work-item's keys are one contiguous run (with [bk][D][ldk] each d was
 *     a new cache line ~4 KiB on, a new page); Qr in panels of qpw rows ([bk][Mp / qpw][D][qpw]),
 *     so the RQ_TQ broadcasts of a d come from one base address. GPU profile: Kt [bk][D][ldk], Qr
 *     [bk][M][D] as before;
 *   - RQ_TQ 12 x RQ_NV 2 on AVX-512 (24 accumulators, 2 loads + 12 broadcasts per 24 FMAs): a C
 *     micro-kernel on L1-resident data ran 16x1 at 83 GFLOP/s and 12x2 at 133-142 on one core of
 *     the 2-core Xeon AVX-512 (14x2: 134-139, 8x2: 121-125); prefill S=1024 D=128 f32, this kernel:
 *     score pass 47.6 ms median at 12x2 against 66.8 at 16x1, 104 for the old kernel and layouts
 *     (interleaved runs, quiet machine, pocl 3.1);
 *   - RQ_VK > 1 is explicit SIMD for CPU drivers: pocl does not vectorise a work-item loop that holds
 *     an inner loop (the d loop here), so implicit vectorisation across work-items gave scalar code;
 *     RQ_VK = 1 is the classic GPU form (coalesced across work-items);
 *   - rows are the G query heads sharing a KV head times Sq ([bk][G*Sq][D] is exactly the [B][Hq][Sq][D]
 *     order), so GQA (and decode with Sq = 1, G = 8) still fills a tile and K is read once per group;
 *   - masks (causal, sliding window): a tile whose every score is masked skips the d loop (causal
 *     prefill S=1024 D=128: 18.3 ms against 26.5 ms unmasked; the -inf stores remain);
 *   - soft-capping (docs/conventions.md section 11) on the accumulators as they are copied out,
 *     before the masks; the rotary offset and M-RoPE are the RoPE pass's (under M-RoPE the masks
 *     follow token order: the host passes the offsets, not the arrays).
 * Tuning knobs (-D, chosen per device type on the host, see src/opencl/cl_knobs.c for the measurements): RQ_TQ,
 * RQ_VK, RQ_NV, RQ_WG (work-items per group along keys), RQ_KP. Without panels the host pads the Kt
 * row stride ldk to cover every loaded vector and to an odd multiple of 64 bytes (see src/opencl/cl_enqueue.c).
 * Prefill S=1024 D=128 f32 on the 2-core EPYC: 5.5 GFLOP/s before (RQ_VK = 1, RQ_TQ = 8), ~320
 * GFLOP/s with 16/16/16 (the 2-core Xeon: ~86 with 16/16/16 and row-major Kt, ~180 now). */

#include "contract.h"
#include "angle.cl"
#include "load.cl"
#include "variants.cl" /* RQ_SOFTCAP */

#ifndef RQ_TQ
#define RQ_TQ 16
#endif
#ifndef RQ_VK
#define RQ_VK 16
#endif
#ifndef RQ_WG
#define RQ_WG 16
#endif
#ifndef RQ_KP
#define RQ_KP 0 /* Kt panel width in keys (the host's rq_kt_panel), 0: [bk][D][ldk] */
#endif

#define RQ_CAT_(a, b) a##b
#define RQ_CAT(a, b) RQ_CAT_(a, b)
#if RQ_VK == 1
#define RQ_VT float
#define RQ_IT int
#define RQ_VLOAD(p) (*(p))
#define RQ_VSTORE(v, p) (*(p) = (v))
#define RQ_IOTA 0
#else
#define RQ_VT RQ_CAT(float, RQ_VK)
#define RQ_IT RQ_CAT(int, RQ_VK)
#define RQ_VLOAD(p) (*(__global const RQ_VT *)(p)) /* aligned: j0 and ldk are multiples of RQ_VK */
#define RQ_VSTORE(v, p) RQ_CAT(vstore, RQ_VK)((v), 0, (p))
#if RQ_VK == 4
#define RQ_IOTA ((int4)(0, 1, 2, 3))
#elif RQ_VK == 8
#define RQ_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#elif RQ_VK == 16
#define RQ_IOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#error "RQ_VK must be 1, 4, 8 or 16"
#endif
#endif

/* RQ_NV vectors of keys per work-item (1 or 2): RQ_TQ x RQ_NV accumulators, RQ_NV loads and RQ_TQ
 * broadcasts per RQ_TQ * RQ_NV FMAs. Keys of a work-item: RQ_KW. */
#ifndef RQ_NV
#define RQ_NV 1
#endif
#if RQ_NV != 1 && RQ_NV != 2
#error "RQ_NV must be 1 or 2"
#endif
#define RQ_KW (RQ_VK * RQ_NV)

/* Output stores of one vector (row segment of RQ_VK scores, 4-byte aligned). On pocl a direct store
 * through a 4-byte-aligned vector type (one instruction; pocl's vstore16 writes four pieces). */
#if defined(RQ_POCL_EXT) && RQ_POCL_EXT && RQ_VK > 1
typedef RQ_VT __attribute__((aligned(4))) rq_vtu;
#define RQ_OSTORE(v, p) (*(__global rq_vtu *)(p) = (v))
#else
#define RQ_OSTORE(v, p) RQ_VSTORE(v, p)
#endif

__kernel __attribute__((reqd_work_group_size(RQ_WG, 1, 1)))
void qk_scores(__global const float *qr, __global const float *kt, __global const int *qpos,
               __global const int *kpos, __global uchar *out, rq_scores_args a)
{
    const int M = a.M, Sq = a.Sq, Sk = a.Sk, ldk = a.ldk, D = a.D, G = a.G, Hkv = a.Hkv;
    const int use_qpos = a.use_qpos, q_base = a.q_base, use_kpos = a.use_kpos, k_base = a.k_base;
    const int causal = a.causal;
    const long qpos_off = a.qpos_off, kpos_off = a.kpos_off, window = a.window;
    const long out_off = a.out_off, onb0 = a.onb0, onb1 = a.onb1, onb2 = a.onb2, onb3 = a.onb3;
    const float softcap = a.softcap, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
    int j0 = get_global_id(0) * RQ_KW;
    int m0 = get_global_id(1) * RQ_TQ;
    int bk = get_global_id(2);
    if (j0 >= Sk) /* the padding of the last group: nothing to do (no barriers in this kernel) */
        return;
    int b = bk / Hkv, hk = bk % Hkv;

    RQ_VT acc[RQ_TQ];
#if RQ_NV == 2
    RQ_VT acc2[RQ_TQ];
#endif
#pragma unroll
    for (int r = 0; r < RQ_TQ; r++) {
        acc[r] = (RQ_VT)(0.0f);
#if RQ_NV == 2
        acc2[r] = (RQ_VT)(0.0f);
#endif
    }

    RQ_VT res[RQ_NV * RQ_TQ]; /* the tile's sums, for the epilogue */
    bool direct = false;      /* whether the d loop wrote them to res itself */
    bool skip = false;
    if (causal || window > 0) { /* is every score of the tile masked? */
        int pj_min = INT_MAX, pj_max = INT_MIN, pi_min = INT_MAX, pi_max = INT_MIN;
        for (int l = 0; l < RQ_KW && j0 + l < Sk; l++) {
            int p = use_kpos ? kpos[kpos_off + j0 + l] : k_base + j0 + l;
            pj_min = min(pj_min, p);
            pj_max = max(pj_max, p);
        }
        for (int r = 0; r < RQ_TQ && m0 + r < M; r++) {
            int i = (m0 + r) % Sq;
            int p = use_qpos ? qpos[qpos_off + i] : q_base + i;
            pi_min = min(pi_min, p);
            pi_max = max(pi_max, p);
        }
        skip = (causal && pj_min > pi_max) || (window > 0 && (long)pi_min - pj_max >= window);
    }
    if (!skip) {
#if RQ_KP
        /* Kt in panels of RQ_KP keys ([bk][ldk / RQ_KP][D][RQ_KP], RQ_KP a multiple of RQ_KW): the
         * tile is one contiguous run */
        __global const float *kp = kt + (long)bk * D * ldk + (long)(j0 / RQ_KP) * RQ_KP * D + j0 % RQ_KP;
        const long kstep = RQ_KP;
#else
        __global const float *kp = kt + (long)bk * D * ldk + j0;
        const long kstep = ldk;
#endif
        /* Qr has RQ_TQ spare rows at the end, so the last tile may read past M without a branch.
         * The second vector of keys (RQ_NV 2) is the next RQ_VK keys of the same d. */
#if RQ_KP
        if (a.qpanel) { /* the tile's rows lie in one panel: the RQ_TQ values of a d are contiguous */
            const int qpw = a.qpw;
            __global const float *qp = qr + ((long)bk * a.qpanel + m0 - m0 % qpw) * D + m0 % qpw;
            for (int d = 0; d < D; d++) {
                RQ_VT kv = RQ_VLOAD(kp + d * kstep);
#if RQ_NV == 2
                RQ_VT kv2 = RQ_VLOAD(kp + d * kstep + RQ_VK);
#endif
#pragma unroll
                for (int r = 0; r < RQ_TQ; r++) {
                    RQ_VT q = (RQ_VT)(qp[d * qpw + r]);
                    acc[r] = fma(q, kv, acc[r]);
#if RQ_NV == 2
                    acc2[r] = fma(q, kv2, acc2[r]);
#endif
                }
            }
        } else {
            /* Qr row-major on the CPU profile: only where the padded panels did not fit one
             * allocation (src/opencl/cl_enqueue.c). A plain loop into res: a second unrolled copy of the loop
             * above made pocl's cold first call ~0.5 s longer. */
            __global const float *qp = qr + ((long)bk * M + m0) * D;
            direct = true;
            for (int t = 0; t < RQ_NV * RQ_TQ; t++) {
                int r = t % RQ_TQ, v = t / RQ_TQ;
                RQ_VT s = (RQ_VT)(0.0f);
                for (int d = 0; d < D; d++)
                    s = fma((RQ_VT)(qp[r * D + d]), RQ_VLOAD(kp + d * kstep + v * RQ_VK), s);
                res[t] = s;
            }
        }
#else
        __global const float *qp = qr + ((long)bk * M + m0) * D;
        for (int d = 0; d < D; d++) {
            RQ_VT kv = RQ_VLOAD(kp + d * kstep);
#if RQ_NV == 2
            RQ_VT kv2 = RQ_VLOAD(kp + d * kstep + RQ_VK);
#endif
#pragma unroll
            for (int r = 0; r < RQ_TQ; r++) {
                RQ_VT q = (RQ_VT)(qp[r * D + d]);
                acc[r] = fma(q, kv, acc[r]);
#if RQ_NV == 2
                acc2[r] = fma(q, kv2, acc2[r]);
#endif
            }
        }
#endif
    }

    /* The epilogue (masks, stores) runs once per tile: a loop over the rows, not RQ_TQ unrolled
     * copies, keeps the kernel small for pocl's compiler (its codegen of qk_scores, cold first call:
     * 3.0-3.9 s -> 1.0-1.1 s, same runs on the loaded 2-core Xeon; prefill S=1024 D=128 f32 fused /
     * cblas 0.54-0.76x before, 0.61-1.17x after, interleaved runs: no loss beyond the noise). The
     * accumulators are copied out once with constant indices, so they stay in registers in the d
     * loop above. */
    /* On the GPU profile (no Kt panels) the epilogue's loops are unrolled: res and the lane
     * arrays are then indexed by constants and stay in registers (a loop indexed them at run time,
     * on the stack: 16-368 bytes on sm_90 for TQ 2/8 and VK 4/16, tests/gpucc). */
#if RQ_KP == 0
#define RQ_EPI_UNROLL _Pragma("unroll")
/* and the lanes of a vector are named, not stored to a private array and indexed */
#if RQ_VK == 4
#define RQ_LANES(F) F(0, s0) F(1, s1) F(2, s2) F(3, s3)
#elif RQ_VK == 8
#define RQ_LANES(F) F(0, s0) F(1, s1) F(2, s2) F(3, s3) F(4, s4) F(5, s5) F(6, s6) F(7, s7)
#elif RQ_VK == 16
#define RQ_LANES(F) F(0, s0) F(1, s1) F(2, s2) F(3, s3) F(4, s4) F(5, s5) F(6, s6) F(7, s7) \
    F(8, s8) F(9, s9) F(10, sA) F(11, sB) F(12, sC) F(13, sD) F(14, sE) F(15, sF)
#endif
#else
#define RQ_EPI_UNROLL
#endif
    if (!direct) {
#pragma unroll
        for (int r = 0; r < RQ_TQ; r++) {
            res[r] = acc[r];
#if RQ_NV == 2
            res[RQ_TQ + r] = acc2[r];
#endif
        }
    }
    /* Gemma 2's soft-capping, before the masks (which stay -inf), on the accumulators as they are
     * copied out, not in the epilogue: there, with its loops unrolled on the GPU profile, it took
     * dg2 to 128 bytes of private memory at TQ 8 / VK 4 (tests/gpucc); a GPU's wide vectors go
     * 4 lanes at a time (the temporaries of 16 lanes at once spilled there); a tile the masks hide
     * whole is not capped (its stores are -inf) */
    if (softcap > 0.0f && !skip) {
#pragma unroll
        for (int t = 0; t < RQ_NV * RQ_TQ; t++) {
#if RQ_KP == 0 && RQ_VK == 16
            res[t].s0123 = RQ_SOFTCAP(res[t].s0123, softcap, inv_cap);
            res[t].s4567 = RQ_SOFTCAP(res[t].s4567, softcap, inv_cap);
            res[t].s89ab = RQ_SOFTCAP(res[t].s89ab, softcap, inv_cap);
            res[t].scdef = RQ_SOFTCAP(res[t].scdef, softcap, inv_cap);
#elif RQ_KP == 0 && RQ_VK == 8
            res[t].lo = RQ_SOFTCAP(res[t].lo, softcap, inv_cap);
            res[t].hi = RQ_SOFTCAP(res[t].hi, softcap, inv_cap);
#elif RQ_KP > 0 && RQ_VK > 1 /* the CPU profile: the exp path only for vectors that need it */
            RQ_SOFTCAP_VEC(RQ_VT, res[t], softcap, inv_cap);
#else
            res[t] = RQ_SOFTCAP(res[t], softcap, inv_cap);
#endif
        }
    }
    RQ_EPI_UNROLL for (int v = 0; v < RQ_NV; v++) {
        int jv = j0 + v * RQ_VK;
        if (jv >= Sk)
            break;
        /* key positions of the vector; lanes past Sk repeat the last key (their results are not stored) */
        RQ_IT pj;
        if (use_kpos) {
#if RQ_VK > 1 && defined(RQ_LANES)
#define RQ_PJ_LANE(l, c) pj.c = kpos[kpos_off + min(jv + (l), Sk - 1)];
            RQ_LANES(RQ_PJ_LANE)
#else
            int t[RQ_VK > 1 ? RQ_VK : 1];
            for (int l = 0; l < RQ_VK; l++)
                t[l] = kpos[kpos_off + min(jv + l, Sk - 1)];
#if RQ_VK == 1
            pj = t[0];
#else
            pj = RQ_CAT(vload, RQ_VK)(0, t);
#endif
#endif
        } else {
            pj = (RQ_IT)(k_base + jv) + RQ_IOTA;
        }
        bool vec_store = jv + RQ_VK <= Sk && onb3 == (long)sizeof(float);
        RQ_EPI_UNROLL for (int r = 0; r < RQ_TQ && m0 + r < M; r++) {
            int m = m0 + r;
            int g = m / Sq, i = m - g * Sq;
            int pi = use_qpos ? qpos[qpos_off + i] : q_base + i;
            RQ_VT x = res[v * RQ_TQ + r];
            if (causal)
                x = select(x, (RQ_VT)(-INFINITY), pj > (RQ_IT)(pi));
            /* window: masked where pi - pj >= window, i.e. pj <= pi - window, in int without overflow */
            long lim = (long)pi - window;
            if (window > 0 && lim >= (long)INT_MIN)
                x = select(x, (RQ_VT)(-INFINITY), pj <= (RQ_IT)((int)min(lim, (long)INT_MAX)));
            long o = out_off + (long)b * onb0 + (long)(hk * G + g) * onb1 + (long)i * onb2 + (long)jv * onb3;
            if (vec_store) {
                RQ_OSTORE(x, (__global float *)(out + o));
            } else {
#if RQ_VK > 1 && defined(RQ_LANES)
#define RQ_ST_LANE(l, c)                                                                           \
    if (jv + (l) < Sk)                                                                             \
        *(__global float *)(out + o + (long)(l) * onb3) = x.c;
                RQ_LANES(RQ_ST_LANE)
#else
                float t[RQ_VK > 1 ? RQ_VK : 1];
#if RQ_VK == 1
                t[0] = x;
#else
                RQ_CAT(vstore, RQ_VK)(x, 0, t);
#endif
                for (int l = 0; l < RQ_VK && jv + l < Sk; l++)
                    *(__global float *)(out + o + (long)l * onb3) = t[l];
#endif
            }
        }
    }
}

/* ---- decode path: K rotated in registers, no Kt scratch ---------------------------------------
 * When a KV head has few query rows (M = G*Sq <= RQ_DM, e.g. GQA decode), qk_scores is bound by
 * memory, and the two-pass scheme moves K three times (read K, write Kt, read Kt). qk_decode_* reads K
 * once from the caller's buffer, rotates it in registers and writes the scores: the only other
 * traffic is Qr (tiny) and S. Written for CPUs (the host enables it there only):
 *   - vectors run along the head dim (K rows are contiguous there): 16 dims per float16;
 *   - a work-item takes RQ_DKB consecutive keys of one batch entry, two at a time; for each pair it
 *     builds the rotation vectors once and runs them over all Hkv heads: 2 keys x RQ_DM rows = 16
 *     accumulators, reduced together by a 4-level shuffle tree that leaves the 16 sums in one vector
 *     (not 16 separate horizontal sums);
 *   - angles: with offset positions key jb + t sits at p0 + t, and R(p0 + t) = R(p0) R(t): cos/sin of
 *     p0 come from angle.cl's accurate reduction (vectorised below, once per work-item), those of t
 *     < RQ_DKB from a host table computed in fp64, and each key costs one complex product (a few
 *     ulp). The full reduction + sinpi/cospi per key took 6 of 15 ms at Sk = 32768 (measured); it is
 *     kept for per-token positions. (Rotating the queries back by p0 instead, so that keys need only
 *     the table, measured no faster: per-work-item setup ate the saving.)
 *   - software prefetch of the rows RQ_DPF keys ahead: the hardware prefetcher alone reached 0.18x
 *     of a copy kernel's bandwidth, with it 0.29x (same run, before the other changes).
 * Lane form of a rotation: interleaved pairs (2u, 2u+1) share frequency u; C holds cos(u) on both
 * lanes and S holds -sin(u), +sin(u), so x' = x*C + swap(x)*S. Half-split: C, S per pair, chunk c of
 * the lower half pairs with chunk c + R/32.
 * Model-family variants: the rotated chunks start at chunk rot_off / 16 (the others pass through);
 * M-RoPE with arrays rotates a key by the positions of three streams (rq_rot_vectors3; with offsets it
 * is plain RoPE, the R(p0) R(t) path) and masks by token order; soft-capping before the masks.
 * Host preconditions: D % 16 == 0, D <= RQ_DMAXD, R % 32 == 0, rot_off % 16 == 0; Qr rows RQ_DMAXD
 * floats apart with >= RQ_DM spare rows at the end (rows M..RQ_DM-1 of a head are computed and
 * dropped). */

/* RQ_DM (rows per KV head) and RQ_DMAXD (largest head dim, Qr's row stride) are in contract.h. */
#ifndef RQ_DKB
#define RQ_DKB 16     /* keys per work-item, even; the host's R(t) table has RQ_DKB rows */
#endif
#ifndef RQ_DWG
#define RQ_DWG 1      /* work-items per group */
#endif
#ifndef RQ_DPF
#define RQ_DPF 8      /* software prefetch distance, in keys (without it: 0.18x of a copy's bandwidth) */
#endif

/* Permutes of 16 lanes, spelled out (OpenCL C 1.2 has no variadic macros). RQ_POCL_EXT is set by the
 * host only when it has identified pocl (src/opencl/cl_tune.c): then Clang's builtins give one permute
 * instruction where pocl's shuffle()/shuffle2() are library calls, __builtin_prefetch is honoured, and
 * a loop pragma stops LLVM from turning the score stores into a slow scatter. Every other compiler
 * gets the portable forms (NVIDIA's defines __clang__ but rejects these builtins). */
#define RQ_IDX16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15
#if defined(RQ_POCL_EXT) && RQ_POCL_EXT
#define RQ_SHUF(a, b, idx) __builtin_shufflevector((a), (b), idx)
#define RQ_SH1(a, idx) __builtin_shufflevector((a), (a), idx)
#define RQ_PREFETCH(p) __builtin_prefetch(p)
#define RQ_NOVEC _Pragma("clang loop vectorize(disable)")
#else
#define RQ_SHUF(a, b, idx) shuffle2((a), (b), (uint16)(idx))
#define RQ_SH1(a, idx) shuffle((a), (uint16)(idx))
#define RQ_PREFETCH(p) ((void)0)
#define RQ_NOVEC
#endif
#define RQ_LO2(x) RQ_SH1(x, RQ_IDX16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7))
#define RQ_HI2(x) RQ_SH1(x, RQ_IDX16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15))
#define RQ_SWAP2(x) RQ_SH1(x, RQ_IDX16(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14))

/* The CPU decode kernels' helpers (paged_attn_cpu's too): CPU-profile programs only. */
#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS
#ifndef RQ_HALF_TURNS16
#define RQ_HALF_TURNS16
RQ_DEFINE_HALF_TURNS(rq_half_turns16, float16)
#endif

/* cos and sin (times mul) of one position at 16 frequencies (angle.cl's accurate angle). */
static inline void rq_cossin16(int p, float16 vx, float16 vy, float16 vz, float mul, float16 *c, float16 *s)
{
    int lo = p & 0xFFF;
    float16 t = rq_half_turns16((float16)((float)(p - lo)), (float16)((float)lo), vx, vy, vz);
    *c = cospi(t) * mul;
    *s = sinpi(t) * mul;
}

/* Rotation vectors of position p in lane form: R/16 (interleaved) or R/32 (half-split) chunks. */
static inline void rq_rot_vectors(int p, const float *fx, const float *fy, const float *fz, int hw, int layout,
                                  float mul, float16 *C, float16 *S)
{
    const float16 sgn = (float16)(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f,
                                  -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
    for (int w = 0; w < hw; w++) { /* 16 frequencies at a time */
        float16 c, s;
        rq_cossin16(p, vload16(w, fx), vload16(w, fy), vload16(w, fz), mul, &c, &s);
        if (layout == 0) {
            C[2 * w] = RQ_LO2(c);
            C[2 * w + 1] = RQ_HI2(c);
            S[2 * w] = sgn * RQ_LO2(s);
            S[2 * w + 1] = sgn * RQ_HI2(s);
        } else {
            C[w] = c;
            S[w] = s;
        }
    }
}

/* The same for M-RoPE (docs/conventions.md section 11): frequency u turns by the position of its
 * stream, fs[u] (0 t, 1 h, 2 w), of the key's three p0, p1, p2. */
static inline void rq_rot_vectors3(int p0, int p1, int p2, const int *fs, const float *fx, const float *fy,
                                   const float *fz, int hw, int layout, float mul, float16 *C, float16 *S)
{
    const float16 sgn = (float16)(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f,
                                  -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
    for (int w = 0; w < hw; w++) {
        int16 st = vload16(w, fs);
        int16 p = select(select((int16)(p0), (int16)(p1), st == (int16)(1)), (int16)(p2), st == (int16)(2));
        int16 lo = p & 0xFFF;
        float16 t = rq_half_turns16(convert_float16(p - lo), convert_float16(lo), vload16(w, fx), vload16(w, fy),
                                    vload16(w, fz));
        float16 c = cospi(t) * mul, s = sinpi(t) * mul;
        if (layout == 0) {
            C[2 * w] = RQ_LO2(c);
            C[2 * w + 1] = RQ_HI2(c);
            S[2 * w] = sgn * RQ_LO2(s);
            S[2 * w + 1] = sgn * RQ_HI2(s);
        } else {
            C[w] = c;
            S[w] = s;
        }
    }
}

/* Sums of 16 vectors, as the 16 lanes of one vector (lane i = sum of v[i]). */
static inline float16 rq_sum16x16(const float16 *v)
{
    float16 a[8], b[4], c[2];
#pragma unroll
    for (int i = 0; i < 8; i++)
        a[i] = RQ_SHUF(v[2 * i], v[2 * i + 1], RQ_IDX16(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)) +
               RQ_SHUF(v[2 * i], v[2 * i + 1], RQ_IDX16(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
#pragma unroll
    for (int i = 0; i < 4; i++)
        b[i] = RQ_SHUF(a[2 * i], a[2 * i + 1], RQ_IDX16(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27)) +
               RQ_SHUF(a[2 * i], a[2 * i + 1], RQ_IDX16(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31));
#pragma unroll
    for (int i = 0; i < 2; i++)
        c[i] = RQ_SHUF(b[2 * i], b[2 * i + 1], RQ_IDX16(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29)) +
               RQ_SHUF(b[2 * i], b[2 * i + 1], RQ_IDX16(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31));
    return RQ_SHUF(c[0], c[1], RQ_IDX16(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)) +
           RQ_SHUF(c[0], c[1], RQ_IDX16(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
}
#endif

/* Chunk c (16 elements) of a row of each storage type, as f32. On pocl, f32 is a direct 64-byte load
 * through a 4-byte-aligned type (pocl builds vload16 from two 32-byte halves); lowering a vector
 * type's alignment is a Clang extension, so other compilers get vload16. */
#if defined(RQ_POCL_EXT) && RQ_POCL_EXT
typedef float16 __attribute__((aligned(4))) rq_float16u;
#define RQ_LD16_F32(row, c) (((__global const rq_float16u *)(row))[c])
#else
#define RQ_LD16_F32(row, c) vload16((c), (__global const float *)(row))
#endif
#define RQ_LD16_F16(row, c) vload_half16((c), (__global const half *)(row))
#define RQ_LD16_BF16(row, c) as_float16(convert_uint16(vload16((c), (__global const ushort *)(row))) << 16)

/* acc[0..7] += Q[m] . xa, acc[8..15] += Q[m] . xb for chunk c of the query rows at qp */
#define RQ_DOT2(c, xa, xb)                                                                         \
    _Pragma("unroll") for (int m = 0; m < RQ_DM; m++) {                                            \
        float16 q_ = vload16((c), qp + m * RQ_DMAXD);                                              \
        acc[m] = fma(q_, (xa), acc[m]);                                                            \
        acc[RQ_DM + m] = fma(q_, (xb), acc[RQ_DM + m]);                                            \
    }

#define RQ_DECODE_KERNEL(NAME, LD16, ES)                                                           \
__kernel __attribute__((reqd_work_group_size(RQ_DWG, 1, 1)))                                       \
void NAME(__global const uchar *k, __global const int *kpos, __global const float4 *vfreq,          \
          __global const float *ctab, __global const float *qr, __global const int *qpos,          \
          __global uchar *out, rq_decode_args a)                                                   \
{                                                                                                  \
    const long k_off = a.k_off, knb0 = a.knb0, knb1 = a.knb1, knb2 = a.knb2;                       \
    const long kpos_off = a.kpos_off, qpos_off = a.qpos_off, window = a.window;                    \
    const long out_off = a.out_off, onb0 = a.onb0, onb1 = a.onb1, onb2 = a.onb2, onb3 = a.onb3;    \
    const int Hkv = a.Hkv, Sk = a.Sk, D = a.D, R = a.R, layout = a.layout;                         \
    const int use_kpos = a.use_kpos, k_base = a.k_base, M = a.M, Sq = a.Sq, G = a.G;               \
    const int use_qpos = a.use_qpos, q_base = a.q_base, causal = a.causal;                         \
    const float rot_mul = a.rot_mul, softcap = a.softcap, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f; \
    const int mrope = a.mrope, kst = a.kpos_stride, c0 = a.rot_off / 16; /* rotated chunks from c0 */ \
    int jb = get_global_id(0) * RQ_DKB;                                                            \
    int b = get_global_id(1);                                                                      \
    if (jb >= Sk)                                                                                  \
        return;                                                                                    \
    int nc = D / 16, hw = R / 32;                                                                  \
    int nr = layout == 0 ? R / 16 : R / 32, wt = layout == 0 ? R : R / 2; /* rotation chunks, lanes */ \
    float fx[RQ_DMAXD / 2], fy[RQ_DMAXD / 2], fz[RQ_DMAXD / 2];                                    \
    int fs[RQ_DMAXD / 2]; /* M-RoPE: each frequency's position stream */                           \
    for (int u = 0; u < R / 2; u++) {                                                              \
        float4 v = vfreq[u];                                                                       \
        fx[u] = v.x, fy[u] = v.y, fz[u] = v.z;                                                     \
        fs[u] = (int)v.w;                                                                          \
    }                                                                                              \
    /* lane l of the 16 sums is (key l / 8, row l % 8): per-lane query positions and mask limits */ \
    int pil[16], liml[16], wl[16];                                                                 \
    long rowoff[RQ_DM];                                                                            \
    for (int l = 0; l < 16; l++) {                                                                 \
        int m = min(l % RQ_DM, M - 1), g = m / Sq, i = m - g * Sq;                                  \
        int p = use_qpos ? qpos[qpos_off + i] : q_base + i;                                        \
        long lim = (long)p - window; /* window mask: pj <= p - window, kept in int range */          \
        pil[l] = p;                                                                                \
        wl[l] = window > 0 && lim >= (long)INT_MIN ? -1 : 0;                                       \
        liml[l] = (int)clamp(lim, (long)INT_MIN, (long)INT_MAX);                                    \
        if (l < RQ_DM)                                                                             \
            rowoff[l] = out_off + (long)b * onb0 + (long)g * onb1 + (long)i * onb2;                \
    }                                                                                              \
    int16 piv = vload16(0, pil), limv = vload16(0, liml), wv = vload16(0, wl);                     \
    bool pair_store = onb3 == (long)sizeof(float);                                                 \
    float16 PC[RQ_DMAXD / 16], PS[RQ_DMAXD / 16]; /* R(p0) */                                      \
    if (!use_kpos)                                                                                 \
        rq_rot_vectors(k_base + jb, fx, fy, fz, hw, layout, rot_mul, PC, PS);                      \
    int jend = min(jb + RQ_DKB, Sk);                                                               \
    for (int j = jb; j < jend; j += 2) {                                                           \
        int jj[2] = {j, min(j + 1, Sk - 1)}, pj[2];                                                \
        float16 C[2][RQ_DMAXD / 16], S[2][RQ_DMAXD / 16]; /* R(pk) of the two keys */              \
        for (int t = 0; t < 2; t++) {                                                              \
            if (use_kpos && mrope) { /* three streams [3][kst]; the masks follow token order */    \
                __global const int *kp = kpos + kpos_off + jj[t];                                  \
                pj[t] = k_base + jj[t];                                                            \
                rq_rot_vectors3(kp[0], kp[kst], kp[2 * (long)kst], fs, fx, fy, fz, hw, layout, rot_mul, C[t], S[t]); \
            } else if (use_kpos) {                                                                 \
                pj[t] = kpos[kpos_off + jj[t]];                                                    \
                rq_rot_vectors(pj[t], fx, fy, fz, hw, layout, rot_mul, C[t], S[t]);                \
            } else { /* R(p0) R(t) */                                                              \
                pj[t] = k_base + jj[t];                                                            \
                __global const float *tc = ctab + (long)(jj[t] - jb) * 2 * wt;                     \
                for (int c = 0; c < nr; c++) {                                                     \
                    float16 a = vload16(c, tc), s = vload16(c, tc + wt);                           \
                    C[t][c] = PC[c] * a - PS[c] * s;                                               \
                    S[t][c] = fma(PS[c], a, PC[c] * s);                                            \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        int16 pjv = (int16)((int8)(pj[0]), (int8)(pj[1]));                                         \
        int16 mask = (causal ? pjv > piv : (int16)(0)) | ((pjv <= limv) & wv);                      \
        for (int hk = 0; hk < Hkv; hk++) {                                                         \
            long hb = k_off + (long)b * knb0 + (long)hk * knb1;                                    \
            __global const uchar *ka = k + hb + (long)jj[0] * knb2, *kb = k + hb + (long)jj[1] * knb2; \
            __global const float *qp = qr + (long)(b * Hkv + hk) * M * RQ_DMAXD;                   \
            for (int o = 0; o < D * ES; o += 64) { /* rows RQ_DPF keys ahead (harmless past the end) */ \
                RQ_PREFETCH(ka + RQ_DPF * knb2 + o);                                               \
                RQ_PREFETCH(kb + RQ_DPF * knb2 + o);                                               \
            }                                                                                      \
            float16 acc[16];                                                                       \
            _Pragma("unroll") for (int r = 0; r < 16; r++) acc[r] = (float16)(0.0f);               \
            if (layout == 0) { /* rotated chunks c0 + c (rot_off = 16 c0) */                       \
                for (int c = 0; c < nr; c++) {                                                     \
                    float16 xa = LD16(ka, c0 + c), xb = LD16(kb, c0 + c);                          \
                    xa = fma(xa, C[0][c], RQ_SWAP2(xa) * S[0][c]);                                 \
                    xb = fma(xb, C[1][c], RQ_SWAP2(xb) * S[1][c]);                                 \
                    RQ_DOT2(c0 + c, xa, xb)                                                        \
                }                                                                                  \
            } else {                                                                               \
                for (int c = 0; c < hw; c++) {                                                     \
                    float16 xa = LD16(ka, c0 + c), xb = LD16(kb, c0 + c);                          \
                    float16 ya = LD16(ka, c0 + c + hw), yb = LD16(kb, c0 + c + hw);                \
                    float16 ra = xa * C[0][c] - ya * S[0][c], rb = xb * C[1][c] - yb * S[1][c];    \
                    RQ_DOT2(c0 + c, ra, rb)                                                        \
                    ra = fma(xa, S[0][c], ya * C[0][c]);                                           \
                    rb = fma(xb, S[1][c], yb * C[1][c]);                                           \
                    RQ_DOT2(c0 + c + hw, ra, rb)                                                   \
                }                                                                                  \
            }                                                                                      \
            for (int t = 0; t < nc - 2 * hw; t++) { /* pass-through dims: chunks before c0 and after */ \
                int c = t < c0 ? t : t + 2 * hw;                                                   \
                float16 xa = LD16(ka, c), xb = LD16(kb, c);                                        \
                RQ_DOT2(c, xa, xb)                                                                 \
            }                                                                                      \
            float16 sv = rq_sum16x16(acc);                                                         \
            if (softcap > 0.0f) /* soft-capping (Gemma 2), then the masks */                       \
                RQ_SOFTCAP_VEC(float16, sv, softcap, inv_cap);                                     \
            sv = select(sv, (float16)(-INFINITY), mask);                                           \
            float sums[16]; /* (row, key) order: each row's two keys side by side */               \
            vstore16(RQ_SH1(sv, RQ_IDX16(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)), 0, sums);   \
            __global uchar *ob = out + (long)hk * G * onb1 + (long)j * onb3;                        \
            if (pair_store && j + 1 < Sk) {                                                        \
                RQ_NOVEC for (int m = 0; m < M; m++)                                               \
                    vstore2(vload2(m, sums), 0, (__global float *)(ob + rowoff[m]));               \
            } else {                                                                               \
                for (int u = 0; u < 2 && j + u < Sk; u++)                                          \
                    RQ_NOVEC for (int m = 0; m < M; m++)                                           \
                        *(__global float *)(ob + rowoff[m] + u * onb3) = sums[2 * m + u];          \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}

/* CPU profile only (program.cl: RQ_CPU_KERNELS); its helpers above serve paged.cl too */
#if !defined(RQ_CPU_KERNELS) || RQ_CPU_KERNELS
RQ_DECODE_KERNEL(qk_decode_f32, RQ_LD16_F32, 4)
RQ_DECODE_KERNEL(qk_decode_f16, RQ_LD16_F16, 2)
RQ_DECODE_KERNEL(qk_decode_bf16, RQ_LD16_BF16, 2)
#endif
