/* The host-shader contract of the cooperative-matrix path (src/vulkan/vk_cm.c; docs/tensor-cores.md):
 * cm_split.comp, cm_attn.comp and cm_scores.comp, each built twice from one source: with
 * GL_KHR_cooperative_matrix (RQ_CM_REAL 1, `<name>_cm.spv`, only where meson found a glslang that
 * takes it) and with the matrix products emulated by loops (RQ_CM_REAL 0, `<name>_emu.spv`, built by
 * glslc everywhere: the suite runs it on lavapipe). Included by the shaders and by the host after
 * vk_contract.h (its field macros).
 *
 * Planes: the split pass (cm_split.comp) turns rows of f32 values (Q and K after the RoPE pass,
 * rotate.comp's scratch) or of the caller's V into f16 "planes": each row scaled by a power of two
 * 2^a (so that its largest magnitude lies in [2^14, 2^15); exact in f32), then split into
 * hi = f16(y) and lo = f16(y - hi) (y - hi is exact), stored as packed halves [rows][np] (np: the row
 * length padded to a multiple of 16 with zeros), the lo plane after the hi plane; the undo factor
 * 2^-a of each row goes to an f32 array (NaN for a row holding a non-finite value, whose planes are
 * zeros: the shaders turn it into the masking rule's NaN rows without multiplying by it).
 * Plane rows per head are padded too (Q to Mp, K and V to Skp: multiples of RQ_CM_PAD_ROWS, zero
 * rows), so every matrix load of a tile stays inside its plane. Units: halves for the host's
 * offsets, 4-half groups (8 bytes: f16vec4 in the real shaders, uvec2 in the emulated ones) in the
 * shaders' plane indexing. */
#ifndef ROPEQK_VK_CM_H
#define ROPEQK_VK_CM_H

#define RQ_CM_M 16          /* the one matrix shape the shaders use: 16 x 16 x 16, f16 x f16 + f32 */
#define RQ_CM_PAD_ROWS 128  /* plane rows per head are a multiple of this (the largest tile side) */
#define RQ_CM_EMU_SG 32     /* the emulated "subgroup": 32 invocations, 8 accumulator elements each */
#define RQ_CM_PSCALE 128.0  /* P is scaled by 2^7 before its split (see cm_attn.comp) */

/* ---- cm_split.comp: rows of a typed strided view into hi/lo planes and undo factors -------------
 * One work-group of RQ_CM_SPLIT_WG invocations per destination row (x + y * 65535 over the grid),
 * an invocation per 32-bit word (two halves) of the row. The source row (bh, s) of a view with
 * H heads per batch entry: src_off + (bh / H) nb0 + (bh % H) nb1 + s nb2 (elements of dtype dt);
 * rows s >= rows (the padding) are zeros. Destination word of (bh, s, pair w): dst_off + (bh * rows_p
 * + s) * np / 2 + w, the lo plane lo_words after it; the factor at sc_off + bh * rows_p + s. */
#define RQ_CM_SP_SRC 0
#define RQ_CM_SP_DST 1
#define RQ_CM_SP_SC 2
#define RQ_CM_SP_NBIND 3
#define RQ_CM_SP_PC(F)                                                                             \
    F(u32, src_off) F(u32, nb0) F(u32, nb1) F(u32, nb2) F(i32, H) F(i32, rows) F(i32, rows_p)      \
    F(i32, nrows) F(i32, n) F(i32, np) F(u32, dst_off) F(u32, lo_words) F(u32, sc_off) F(i32, dt)   \
    F(i32, flags)
#define RQ_CM_SP_F_LO 1      /* write the lo plane (accurate mode) */
#define RQ_CM_SP_F_NOSCALE 2 /* the rows are f16 already: factor 1, planes exact (hi = x, lo = 0) */
#define RQ_CM_SPLIT_WG 64

/* ---- cm_attn.comp: O = softmax(S) V with S = Q K^T and O += P V as 16 x 16 x 16 products -------
 * Work-group: BM query rows (rows m = g * Sq + i of one (batch, KV head), as attention.comp) in
 * BM / 16 subgroups of SG invocations (NT = BM / 16 * SG), keys in tiles of BN, a column block of
 * NOB * 16 dims of V (grid y: B * Hkv * ncb). Specialization constants: RQ_VK_SC_WG (NT),
 * RQ_VK_SC_K1 (BM), RQ_VK_SC_K2 (BN), RQ_VK_SC_DT_A (NOB), RQ_VK_SC_DT_O (O's dtype). */
#define RQ_CM_AT_QP 0   /* Q planes [B*Hkv][Mp][dp], hi then lo */
#define RQ_CM_AT_KP 1   /* K planes [B*Hkv][Skp][dp] */
#define RQ_CM_AT_VP 2   /* V planes [B*Hkv][Skp][dvp] */
#define RQ_CM_AT_SC 3   /* undo factors: Q rows, K rows, V rows (offsets below) */
#define RQ_CM_AT_QPOS 4
#define RQ_CM_AT_KPOS 5
#define RQ_CM_AT_OUT 6
#define RQ_CM_AT_LSE 7
#define RQ_CM_AT_SINK 8
#define RQ_CM_AT_NBIND 9
/* dp, dvp: the planes' padded row lengths (halves); Mp, Skp: their padded rows per head. */
#define RQ_CM_AT_PC(F)                                                                             \
    F(u32, o_off) F(u32, onb0) F(u32, onb1) F(u32, onb2) F(u32, l_off) F(u32, lnb0) F(u32, lnb1)   \
    F(u32, lnb2) F(u32, qpos_off) F(u32, kpos_off) F(u32, window) F(i32, M) F(i32, Mp) F(i32, Sq)  \
    F(i32, Sk) F(i32, Skp) F(i32, dp) F(i32, Dv) F(i32, dvp) F(i32, G) F(i32, Hkv) F(i32, use_qpos) \
    F(i32, q_base) F(i32, use_kpos) F(i32, k_base) F(i32, causal) F(i32, flags) F(f32, softcap)
/* With nbk = B * Hkv heads: the factors of Q rows from 0 ([nbk][Mp]), of K rows from nbk * Mp
 * ([nbk][Skp]), of V rows after those; each plane's lo half starts after its hi half (nbk * Mp * dp,
 * nbk * Skp * dp, nbk * Skp * dvp halves): derived in the shaders, not sent. */
#define RQ_CM_F_LSE 1
#define RQ_CM_F_SINKS 2
#define RQ_CM_F_ACCURATE 4 /* three products per tile product (hi hi + hi lo + lo hi); else one */
#define RQ_CM_F_VLO 8      /* V has a lo plane (f32/bf16 V in accurate mode; f16 V is exact) */

/* ---- cm_scores.comp: S = Q K^T, masked, one BM x BN tile per work-group ------------------------
 * Grid: x key tiles, y row blocks, z B * Hkv; the same specialization constants (NOB unused). */
#define RQ_CM_SC_QP 0
#define RQ_CM_SC_KP 1
#define RQ_CM_SC_SC 2
#define RQ_CM_SC_QPOS 3
#define RQ_CM_SC_KPOS 4
#define RQ_CM_SC_OUT 5
#define RQ_CM_SC_NBIND 6
#define RQ_CM_SC_PC(F)                                                                             \
    F(u32, out_off) F(u32, onb0) F(u32, onb1) F(u32, onb2) F(u32, onb3) F(u32, qpos_off)           \
    F(u32, kpos_off) F(u32, window) F(i32, M) F(i32, Mp) F(i32, Sq) F(i32, Sk) F(i32, Skp)          \
    F(i32, dp) F(i32, G) F(i32, Hkv) F(i32, use_qpos) F(i32, q_base) F(i32, use_kpos) F(i32, k_base) \
    F(i32, causal) F(i32, flags) F(f32, softcap)

/* Shared memory of cm_attn.comp (the larger of the two) in bytes: vk_cm.c, tile_shared. */

#endif
