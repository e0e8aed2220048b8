#version 450
/* Fused attention, FlashAttention-2 shaped: O = softmax(Qr . Kr^T) . V with an online softmax; the
 * scores never leave the work-group. Qr [B*Hq][Sq][D] (times the scale) and Kr [B*Hkv][Sk][D] are the
 * rotated f32 scratch of rotate.comp; V, O and LSE are the caller's views (V and O f32/f16/bf16).
 *
 * Shape of the work (the host's rq_vk_attn_shape, vk_attn.c; constants in vk_contract.h):
 *   - a work-group owns BM query rows of one (batch, KV head), rows m = g*Sq + i over the G query
 *     heads sharing the KV head (their Qr rows are contiguous), so GQA stages K and V once per block,
 *     and a column block of 4*TX*CV dims of V (Dv wider than that runs more column blocks, each
 *     computing S again); it walks the keys in tiles of BN;
 *   - invocation (tx, ty), lid = ty*TX + tx (TX = BN/RN, TY = BM/RM), owns query rows ty + TY*i
 *     (i < RM) and keys tx + TX*j (j < RN) of a tile: an RM x RN block of S in registers (s[i][j]),
 *     and the same rows times the vec4 columns tx + TX*c (c < CV) of O (o[i][c]): register arrays of
 *     constant size whose loops are [[unroll]]ed at compile time (glslc -O leaves no loop and no
 *     private array behind); CV, a specialization constant, only masks whole columns;
 *   - S = Q K^T in steps of TK head dims: the step's Q rows and K rows are staged in shared memory
 *     (coalesced vec4 loads where D is a multiple of 4, rows padded by one vec4 so that the strided
 *     key rows of neighbouring invocations fall in distinct banks) and read back as vec4: RM + RN
 *     loads for 4 RM RN fma;
 *   - masks (keys past the chunk, causal, sliding window) turn scores into the finite sentinel
 *     NEGBIG, never -inf arithmetic: exp() is never evaluated on a masked score, and a row with no
 *     unmasked key so far keeps m = NEGBIG, l = 0, o = 0;
 *   - the row max goes through shared memory: each invocation's max over its RN keys, then every
 *     invocation of the row reads the TX partials (vec4); then the correction exp(m_old - m), and
 *     P = exp(S - m) into shared memory (aliasing the Q/K step tile, which is dead by then); the row
 *     sums stay per invocation (its own keys, rescaled by the same corrections) and are added
 *     through shared memory once per dispatch;
 *   - O = O * corr + P V: V staged TK keys at a time in shared memory, converted to f32 once
 *     (coalesced: consecutive invocations load consecutive vec4 of a row), read back as vec4
 *     (RM loads of P and CV loads of V for 4 RM CV vec4 fma);
 *   - a key tile whose every score is masked for all the block's rows (causal, window) is skipped
 *     whole: the test is uniform, made from push constants and shared positions after a barrier;
 *   - non-finite data (docs/conventions.md section 9): a masked key weighs exactly 0 whatever its K
 *     and V hold. Its score is the sentinel (never computed into) and its P is stored as -1, a
 *     marker no weight takes (exp >= 0); a tile that some row sees only in part (`mixed`: causal
 *     diagonal, window edge; uniform, like the skip test) selects those products away in P.V (0 *
 *     NaN is NaN); other tiles keep the plain fma (their only marked keys are past the chunk, whose
 *     staged V is 0). An unmasked score that is not finite becomes NaN before soft-capping; the row
 *     max skips NaN explicitly (GLSL's max is undefined for NaN), so the NaN reaches the weight and
 *     l, and O and LSE end NaN (tests compare l with 0, never l > 0, which NaN fails). Vulkan does
 *     not require NaN to be kept without SignedZeroInfNanPreserve: NaN propagation is the driver's
 *     (lavapipe keeps it); the masking is selects and holds on any driver;
 *   - everything accumulates in f32; exp() and log() are the built-ins (the old shader's accuracy);
 *   - variants (docs/conventions.md section 11): soft-capping (pc.softcap > 0) turns each unmasked
 *     score of the register block into C tanh(S / C) (tanh.glsl) before the row max, no pass of its
 *     own; attention sinks (RQ_VK_AT_F_SINKS) join each row's denominator once, when the last key
 *     chunk normalises the row (finish_row): M = max(m, s_h), L = l e^(m - M) + e^(s_h - M), a row
 *     with no key unmasked gives O = 0 and LSE = s_h exactly; the rotary offset and M-RoPE are the
 *     RoPE pass's (rotate.comp), and under M-RoPE the masks use the offsets (the host's push constants).
 * No subgroup operations: the row reductions cost one barrier and TX/4 shared vec4 reads per row
 * and tile, about 1% of the tile's shared-memory traffic, so there is nothing to gain that would
 * justify depending on how a driver maps invocations to subgroups.
 *
 * Key chunks (llvmpipe's loop limit): a dispatch walks keys [pc.kc0, pc.kc1) only. The host records
 * ceil(Sk / KC) dispatches (vk_attn.c, rq_vk_attn_chunk_keys) with barriers between them; the running
 * state of each row waits between them in the plan's f32 scratch `st`, rows (b, kv head, m) of
 * Dv + 2*ncb floats: the O columns, then (m, l) of each column block (every column block keeps its
 * own pair, so no work-group reads a word another one of the same dispatch writes). A first chunk
 * starts from zero, a later one loads the state, every chunk but the last stores it, the last
 * normalises and writes O and LSE. llvmpipe (lavapipe) ends every loop of an invocation once 65535
 * iterations have run in total (all loops together, gallivm's LP_MAX_TGSI_LOOP_ITERATIONS),
 * silently; the host's count of this shader's loop trips (vk_attn.c: attn_tile_trips,
 * attn_fixed_trips) must follow any change of the loops below that glslc does not unroll. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_contract.h"

layout(local_size_x_id = RQ_VK_SC_WG) in;
layout(constant_id = RQ_VK_SC_WG) const int NT = 256;            /* invocations: TX * TY */
layout(constant_id = RQ_VK_SC_AT_BM) const int BM = RQ_VK_AT_BM_DEF; /* query rows per work-group */
layout(constant_id = RQ_VK_SC_AT_BN) const int BN = 64;          /* keys per tile */
layout(constant_id = RQ_VK_SC_AT_CV) const int CV = RQ_VK_AT_CVMAX; /* vec4 columns of O per invocation */
layout(constant_id = RQ_VK_SC_DT_B) const int DTV = 0;
layout(constant_id = RQ_VK_SC_DT_O) const int DTO = 0;

#define RM RQ_VK_AT_RM
#define RN RQ_VK_AT_RN
#define TK RQ_VK_AT_TK
#define CVMAX RQ_VK_AT_CVMAX
const int TX = BN / RN, TY = BM / RM;
const int TK4 = TK / 4, QS4 = TK4 + 1;      /* vec4 per staged Q or K row (one of padding) */
const int PS4 = BN / 4 + 1;                 /* vec4 per P row (one of padding) */
const int DVB4 = TX * CV;                   /* vec4 columns of the column block */
const int QK4 = (BM + BN) * QS4, PT4 = BM * PS4;
const int A4 = QK4 > PT4 ? QK4 : PT4;
const float NEGBIG = -3.4028234663852886e38; /* -FLT_MAX: a masked score */

layout(std430, binding = RQ_VK_AT_QR) readonly buffer Qr { float qr[]; };
layout(std430, binding = RQ_VK_AT_KR) readonly buffer Kr { float kr[]; };
layout(std430, binding = RQ_VK_AT_V) readonly buffer V { uint vbuf[]; };
layout(std430, binding = RQ_VK_AT_QPOS) readonly buffer QPos { int qpos[]; };
layout(std430, binding = RQ_VK_AT_KPOS) readonly buffer KPos { int kpos[]; };
layout(std430, binding = RQ_VK_AT_OUT) buffer Out { uint outv[]; };
layout(std430, binding = RQ_VK_AT_LSE) writeonly buffer Lse { float lse[]; };
layout(std430, binding = RQ_VK_AT_ST) buffer St { float st[]; };
/* the same scratch as Qr and Kr, read as vec4 when D is a multiple of 4 (RQ_VK_AT_F_VEC4) */
layout(std430, binding = RQ_VK_AT_QR4) readonly buffer Qr4 { vec4 qr4[]; };
layout(std430, binding = RQ_VK_AT_KR4) readonly buffer Kr4 { vec4 kr4[]; };
layout(std430, binding = RQ_VK_AT_SINK) readonly buffer Sinks { float sinkv[]; }; /* [Hq] */
RQ_VK_PC_BLOCK(RQ_VK_AT_PC)

#include "common.glsl"
#include "tanh.glsl"

/* RQ_VK_AT_SHARED (vk_contract.h) counts exactly these arrays, for the host's fit checks */
shared vec4 sa[A4];            /* the Q/K step: Q rows [r*QS4 + w], K rows [QK_K + u*QS4 + w];
                                * or the P tile [r*PS4 + key/4] */
shared vec4 vs[TK * DVB4];     /* the V step: [u*DVB4 + column/4] */
shared vec4 red[BM * TX / 4];  /* per row, one partial (max, or sum) per tx */
shared ivec4 rpos[BM / 4];     /* positions of the block's rows */
shared ivec4 cpos[BN / 4];     /* positions of a tile's keys (per-token positions only) */
const int QK_K = BM * QS4;

/* Element a + e (e < 4) of V as f32 where e < n, else 0: two words for an aligned 16-bit group. */
vec4 load_v4(uint a, int n)
{
    vec4 x = vec4(0.0);
    if (DTV != RQ_VK_DT_F32 && n == 4 && (a & 1u) == 0u) {
        uint w0 = vbuf[a >> 1], w1 = vbuf[(a >> 1) + 1u];
        if (DTV == RQ_VK_DT_F16)
            return vec4(unpackHalf2x16(w0), unpackHalf2x16(w1));
        return uintBitsToFloat(uvec4(w0 << 16, w0 & 0xFFFF0000u, w1 << 16, w1 & 0xFFFF0000u));
    }
    [[unroll]] for (int e = 0; e < 4; e++)
        if (e < n)
            x[e] = RQ_LOAD(vbuf, a + uint(e), DTV);
    return x;
}

/* Stores x[e] (e < n) as elements idx + e of the output: whole words where both halves are this
 * invocation's, the two-atomic store of common.glsl where a word is shared with a neighbour. */
void store_o4(uint idx, vec4 x, int n)
{
    int s = int(idx & 1u); /* element e is the low half of its word where s + e is even */
    [[unroll]] for (int e = 0; e < 4; e++) {
        bool first = ((s + e) & 1) == 0;
        if (e >= n) {
        } else if (DTO == RQ_VK_DT_F32) {
            outv[idx + uint(e)] = floatBitsToUint(x[e]);
        } else if (first && e + 1 < n) {
            outv[(idx + uint(e)) >> 1] = rq_to_bits16(x[e], DTO) | (rq_to_bits16(x[e + 1], DTO) << 16);
        } else if (first || e == 0) {
            RQ_STORE(outv, idx + uint(e), DTO, x[e]) /* the word's other half is not ours */
        }
    }
}

/* The end of a dispatch for row m of the block (m = m0 + ty + TY*i): its state into st when more
 * key chunks follow (keep), else O (normalised; 0 for a row with no key unmasked) and LSE.
 * where = (b, hk, c0, cend), sbase = (first state row of the KV head, state row stride). */
void finish_row(int m, int cb, bool keep, ivec4 where, uvec2 sbase, int tx, vec4 oi[CVMAX], float mi, float l)
{
    if (m >= pc.M)
        return;
    const int c0 = where.z, cend = where.w;
    if (keep) {
        uint sb = (sbase.x + uint(m)) * sbase.y;
        [[unroll]] for (int c = 0; c < CVMAX; c++) {
            int col = c0 + 4 * (tx + TX * c);
            [[unroll]] for (int e = 0; e < 4; e++)
                if (col + e < cend)
                    st[sb + uint(col + e)] = oi[c][e];
        }
        if (tx == 0) {
            st[sb + uint(pc.Dv + 2 * cb)] = mi;
            st[sb + uint(pc.Dv + 2 * cb) + 1u] = l;
        }
        return;
    }
    const int b = where.x, g = m / pc.Sq, ii = m - g * pc.Sq, h = where.y * pc.G + g;
    /* l >= 1 once a key was unmasked (its max weighs 1); 0: fully masked; NaN: a non-finite key
     * seen (then O and LSE NaN: the tests are l == 0, which NaN fails, never l > 0) */
    const bool none = l == 0.0;
    float inv = none ? 0.0 : 1.0 / l;
    float lsev = none ? uintBitsToFloat(0xFF800000u) : mi + log(l);
    if ((pc.flags & RQ_VK_AT_F_SINKS) != 0) { /* the sink s_h: in the denominator, no value */
        const float sk = sinkv[h];
        const float mx = none ? sk : max(mi, sk);
        const float a = none ? 0.0 : (mi == mx ? 1.0 : exp(mi - mx)); /* the keys' rescaling */
        const float lt = l * a + (sk == mx ? 1.0 : exp(sk - mx));        /* >= 1: its max weighs 1 */
        inv = a / lt;
        lsev = none ? sk : mx + log(lt); /* fully masked: LSE = s_h exactly, O = 0 (a = 0) */
    }
    uint ob = pc.o_off + uint(b) * pc.onb0 + uint(h) * pc.onb1 + uint(ii) * pc.onb2;
    [[unroll]] for (int c = 0; c < CVMAX; c++) {
        int col = c0 + 4 * (tx + TX * c);
        store_o4(ob + uint(col), oi[c] * inv, min(4, cend - col));
    }
    if ((pc.flags & RQ_VK_AT_F_LSE) != 0 && cb == 0 && tx == 0)
        lse[pc.l_off + uint(b) * pc.lnb0 + uint(h) * pc.lnb1 + uint(ii) * pc.lnb2] = lsev;
}

/* O += P V over TK keys of the V step (u0: the step's first key in the tile), NC vec4 columns per
 * invocation: a macro so that the column count is a compile-time constant in each copy. SEL: the
 * tile has keys some row masks: a weight of -1 (masked) adds nothing, whatever V holds. */
#define RQ_AT_PV_STEP(NC, SEL)                                                                     \
    {                                                                                              \
        [[unroll]] for (int u = 0; u < TK; u += 4) {                                               \
            vec4 p[RM];                                                                            \
            [[unroll]] for (int i = 0; i < RM; i++)                                                \
                p[i] = sa[(ty + TY * i) * PS4 + (u0 + u) / 4];                                     \
            [[unroll]] for (int e = 0; e < 4; e++)                                                 \
                [[unroll]] for (int c = 0; c < (NC); c++) {                                        \
                    vec4 x = vs[(u + e) * DVB4 + tx + TX * c];                                     \
                    [[unroll]] for (int i = 0; i < RM; i++)                                        \
                        o[i][c] = (SEL) && p[i][e] < 0.0 ? o[i][c] : fma(vec4(p[i][e]), x, o[i][c]); \
                }                                                                                  \
        }                                                                                          \
    }

void main()
{
    const int lid = int(gl_LocalInvocationID.x), tx = lid % TX, ty = lid / TX;
    const int M = pc.M, D = pc.D, Dv = pc.Dv;
    const int ncb = (Dv + 4 * DVB4 - 1) / (4 * DVB4);
    const int gy = int(gl_WorkGroupID.y), bk = gy / ncb, cb = gy - bk * ncb, c0 = cb * 4 * DVB4;
    const int cend = min(Dv, c0 + 4 * DVB4); /* the column block's end: a runtime bound, so that
                                              * no loop over c holds a test of a spec constant */
    const int b = bk / pc.Hkv, hk = bk - b * pc.Hkv;
    const int m0 = int(gl_WorkGroupID.x) * BM, nrow = min(BM, M - m0);
    const bool causal = pc.causal != 0, masks = causal || pc.window != 0u;
    const uint qrow0 = uint(bk) * uint(M), krow0 = uint(bk) * uint(pc.Sk);
    const uint vbase = pc.v_off + uint(b) * pc.vnb0 + uint(hk) * pc.vnb1;

    /* the rows' positions (rows past M repeat row M-1: computed, never stored) */
    for (int t = lid; t < BM; t += NT) {
        int i = min(m0 + t, M - 1) % pc.Sq;
        rpos[t / 4][t % 4] = pc.use_qpos != 0 ? qpos[pc.qpos_off + uint(i)] : pc.q_base + i;
    }
    barrier();
    int pi[RM];
    [[unroll]] for (int i = 0; i < RM; i++) {
        int r = ty + TY * i;
        pi[i] = rpos[r / 4][r % 4];
    }
    int pq_lo = 0x7FFFFFFF, pq_hi = int(0x80000000u);
    if (masks)
        for (int t = 0; t < BM / 4; t++) {
            ivec4 p4 = rpos[t];
            pq_lo = min(pq_lo, min(min(p4.x, p4.y), min(p4.z, p4.w)));
            pq_hi = max(pq_hi, max(max(p4.x, p4.y), max(p4.z, p4.w)));
        }

    /* the rows' state: zero for a first chunk, else the previous chunk's (rows past M read none) */
    const uint dvs = uint(Dv + 2 * ncb);
    float mrow[RM], lpart[RM];
    vec4 o[RM][CVMAX];
    [[unroll]] for (int i = 0; i < RM; i++) {
        mrow[i] = NEGBIG;
        lpart[i] = 0.0;
        [[unroll]] for (int c = 0; c < CVMAX; c++)
            o[i][c] = vec4(0.0);
    }
    if (pc.kc0 != 0) {
        [[unroll]] for (int i = 0; i < RM; i++) {
            int m = m0 + ty + TY * i;
            uint sb = (qrow0 + uint(m)) * dvs;
            [[unroll]] for (int c = 0; c < CVMAX; c++) {
                int col = c0 + 4 * (tx + TX * c);
                [[unroll]] for (int e = 0; e < 4; e++)
                    if (m < M && col + e < cend)
                        o[i][c][e] = st[sb + uint(col + e)];
            }
            float ls = m < M ? st[sb + uint(Dv + 2 * cb) + 1u] : 0.0;
            if (!(ls == 0.0)) { /* l = 0: no key of the row unmasked yet; NaN: a non-finite key seen */
                mrow[i] = st[sb + uint(Dv + 2 * cb)];
                lpart[i] = tx == 0 ? ls : 0.0;
            }
        }
    }

    for (int j0 = pc.kc0; j0 < pc.kc1; j0 += BN) {
        const int nk = min(BN, pc.kc1 - j0);
        const bool kp = masks && pc.use_kpos != 0;
        bool mixed = false; /* some row masks some key of the tile: P.V selects (uniform) */
        if (masks) { /* a tile masked for every row of the block is skipped: uniform */
            int pk_lo = pc.k_base + j0, pk_hi = pc.k_base + j0 + nk - 1;
            if (kp) {
                barrier(); /* the previous tile's readers of cpos are done */
                for (int t = lid; t < BN; t += NT)
                    cpos[t / 4][t % 4] = kpos[pc.kpos_off + uint(j0 + min(t, nk - 1))];
                barrier();
                pk_lo = 0x7FFFFFFF;
                pk_hi = int(0x80000000u);
                for (int t = 0; t < BN / 4; t++) { /* keys past nk repeat the last one */
                    ivec4 p4 = cpos[t];
                    pk_lo = min(pk_lo, min(min(p4.x, p4.y), min(p4.z, p4.w)));
                    pk_hi = max(pk_hi, max(max(p4.x, p4.y), max(p4.z, p4.w)));
                }
            }
            if ((causal && pk_lo > pq_hi) ||
                (pc.window != 0u && pq_lo >= pk_hi && uint(pq_lo) - uint(pk_hi) >= pc.window))
                continue;
            mixed = (causal && pk_hi > pq_lo) ||
                    (pc.window != 0u && pq_hi >= pk_lo && uint(pq_hi) - uint(pk_lo) >= pc.window);
        }

        /* S block: rows ty + TY*i, keys j0 + tx + TX*j */
        vec4 s[RM];
        [[unroll]] for (int i = 0; i < RM; i++)
            s[i] = vec4(0.0);
        for (int d0 = 0; d0 < D; d0 += TK) {
            /* rows past M, keys past the chunk and dims past D load as 0: they add nothing */
            for (int e = lid; e < BM * TK4; e += NT) {
                int r = e / TK4, w = e - r * TK4, d = d0 + 4 * w;
                vec4 x = vec4(0.0);
                if (r < nrow && d < D) {
                    uint a = (qrow0 + uint(m0 + r)) * uint(D) + uint(d);
                    if ((pc.flags & RQ_VK_AT_F_VEC4) != 0) {
                        x = qr4[a >> 2];
                    } else {
                        [[unroll]] for (int c = 0; c < 4; c++)
                            if (d + c < D)
                                x[c] = qr[a + uint(c)];
                    }
                }
                sa[r * QS4 + w] = x;
            }
            for (int e = lid; e < BN * TK4; e += NT) {
                int u = e / TK4, w = e - u * TK4, d = d0 + 4 * w;
                vec4 x = vec4(0.0);
                if (u < nk && d < D) {
                    uint a = (krow0 + uint(j0 + u)) * uint(D) + uint(d);
                    if ((pc.flags & RQ_VK_AT_F_VEC4) != 0) {
                        x = kr4[a >> 2];
                    } else {
                        [[unroll]] for (int c = 0; c < 4; c++)
                            if (d + c < D)
                                x[c] = kr[a + uint(c)];
                    }
                }
                sa[QK_K + u * QS4 + w] = x;
            }
            barrier();
            [[unroll]] for (int w = 0; w < TK4; w++) {
                vec4 q[RM], k[RN];
                [[unroll]] for (int i = 0; i < RM; i++)
                    q[i] = sa[(ty + TY * i) * QS4 + w];
                [[unroll]] for (int j = 0; j < RN; j++)
                    k[j] = sa[QK_K + (tx + TX * j) * QS4 + w];
                [[unroll]] for (int i = 0; i < RM; i++)
                    [[unroll]] for (int j = 0; j < RN; j++)
                        s[i][j] = fma(q[i].w, k[j].w, fma(q[i].z, k[j].z, fma(q[i].y, k[j].y, fma(q[i].x, k[j].x, s[i][j]))));
            }
            barrier(); /* the next step overwrites the stage; P reuses it */
        }

        /* soft-capping and masks, then each row's max over the tile through shared memory */
        const bool cap = pc.softcap > 0.0;
        int pk[RN];
        [[unroll]] for (int j = 0; j < RN; j++) {
            int u = tx + TX * j;
            pk[j] = kp ? cpos[u / 4][u % 4] : pc.k_base + j0 + min(u, nk - 1);
        }
        [[unroll]] for (int i = 0; i < RM; i++) {
            float mx = NEGBIG;
            [[unroll]] for (int j = 0; j < RN; j++) {
                bool msk = tx + TX * j >= nk || (masks && rq_masked(pi[i], pk[j], causal, pc.window));
                float sv = isinf(s[i][j]) ? uintBitsToFloat(0x7FC00000u) : s[i][j]; /* -inf: masked only */
                sv = cap ? rq_softcap(sv, pc.softcap) : sv;
                s[i][j] = msk ? NEGBIG : sv;
                mx = s[i][j] > mx ? s[i][j] : mx; /* skips NaN (max() is undefined for it) */
            }
            int f = (ty + TY * i) * TX + tx;
            red[f / 4][f % 4] = mx;
        }
        barrier();
        float bm[RM];
        [[unroll]] for (int i = 0; i < RM; i++)
            bm[i] = NEGBIG;
        for (int t = 0; t < TX / 4; t++)
            [[unroll]] for (int i = 0; i < RM; i++) {
                vec4 r4 = red[(ty + TY * i) * (TX / 4) + t];
                bm[i] = max(bm[i], max(max(r4.x, r4.y), max(r4.z, r4.w)));
            }
        [[unroll]] for (int i = 0; i < RM; i++) {
            int r = ty + TY * i;
            float mn = max(mrow[i], bm[i]);
            /* nothing unmasked so far: o and l are 0, whatever corr; P of masked keys is 0 */
            float corr = mrow[i] == mn ? 1.0 : mrow[i] == NEGBIG ? 0.0 : exp(mrow[i] - mn);
            vec4 p;
            [[unroll]] for (int j = 0; j < RN; j++)
                p[j] = s[i][j] == NEGBIG ? 0.0 : exp(s[i][j] - mn);
            lpart[i] = lpart[i] * corr + ((p.x + p.y) + (p.z + p.w));
            mrow[i] = mn;
            [[unroll]] for (int j = 0; j < RN; j++) {
                int u = tx + TX * j;
                sa[r * PS4 + u / 4][u % 4] = s[i][j] == NEGBIG ? -1.0 : p[j]; /* -1: masked */
            }
            [[unroll]] for (int c = 0; c < CVMAX; c++)
                o[i][c] *= corr;
        }

        /* O += P V over the tile's keys, TK keys of the column block at a time */
        for (int u0 = 0; u0 < nk; u0 += TK) {
            for (int e = lid; e < TK * DVB4; e += NT) {
                int u = e / DVB4, w = e - u * DVB4, col = c0 + 4 * w;
                vec4 x = vec4(0.0);
                if (u0 + u < nk && col < Dv)
                    x = load_v4(vbase + uint(j0 + u0 + u) * pc.vnb2 + uint(col), min(4, Dv - col));
                vs[e] = x;
            }
            barrier(); /* also publishes the P tile */
            if (CV == 1 && mixed) /* uniform (a specialization constant and the tile's flag), */
                RQ_AT_PV_STEP(1, true) /* outside the unrolled loops */
            else if (CV == 1)
                RQ_AT_PV_STEP(1, false)
            else if (mixed)
                RQ_AT_PV_STEP(CVMAX, true)
            else
                RQ_AT_PV_STEP(CVMAX, false)
            barrier(); /* the next step overwrites the V stage (or the next tile the P tile) */
        }
    }

    /* the rows' sums: each invocation's partials over its keys, added through shared memory */
    barrier();
    [[unroll]] for (int i = 0; i < RM; i++) {
        int f = (ty + TY * i) * TX + tx;
        red[f / 4][f % 4] = lpart[i];
    }
    barrier();
    const bool keep = pc.kc1 != pc.Sk; /* more chunks follow: the state waits in st */
    float lsum[RM];
    [[unroll]] for (int i = 0; i < RM; i++)
        lsum[i] = 0.0;
    for (int t = 0; t < TX / 4; t++)
        [[unroll]] for (int i = 0; i < RM; i++) {
            vec4 r4 = red[(ty + TY * i) * (TX / 4) + t];
            lsum[i] += (r4.x + r4.y) + (r4.z + r4.w);
        }
    /* one call per row of the invocation, constant arguments: no loop indexes the registers */
#if RM != 4
#error "the calls below are written for RQ_VK_AT_RM = 4"
#endif
    const ivec4 where = ivec4(b, hk, c0, cend);
    const uvec2 sbase = uvec2(qrow0, dvs);
    finish_row(m0 + ty, cb, keep, where, sbase, tx, o[0], mrow[0], lsum[0]);
    finish_row(m0 + ty + TY, cb, keep, where, sbase, tx, o[1], mrow[1], lsum[1]);
    finish_row(m0 + ty + 2 * TY, cb, keep, where, sbase, tx, o[2], mrow[2], lsum[2]);
    finish_row(m0 + ty + 3 * TY, cb, keep, where, sbase, tx, o[3], mrow[3], lsum[3]);
}
