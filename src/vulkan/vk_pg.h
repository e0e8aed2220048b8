/* The Vulkan paged plan's internals (rq_vk_paged, rq_vkpg_*, rq_vkpf_*), shared by its files:
 * vk_paged.c (plan, decode), vk_paged_append.c (the append), vk_paged_chunk.c (prefill chunks
 * through the companion attention plan), vk_paged_run.c (the run the paged and dense decodes
 * record), vk_paged_fast.c (the fast pass 1), vk_dense.c. Named after none of them, as vk.h is:
 * every one of them stands on it. */
#ifndef ROPEQK_VK_PG_H
#define ROPEQK_VK_PG_H

#include "vk.h"

typedef struct {
    RQ_VK_PA_PC(RQ_VK_FIELD)
} app_pc;
typedef struct {
    RQ_VK_PQ_PC(RQ_VK_FIELD)
} q8_pc;

struct rq_vk_paged {
    rq_vk_pipe *pass1, *combine, *append;
    rq_vk_pipe *append_q8[2];   /* the quantizing append into an 8-bit K, V cache (NULL: 16/32-bit) */
    rq_vk_pipe *gather[2];      /* prefill chunks: pages -> dense K, V (an 8-bit cache's: as f32 values) */
    rq_vk_buf gk, gv;           /* their gathered K and V (vk_paged_chunk.c; made at first use) */
    rq_vk_buf meta, part;       /* per-call metadata (int32), split partials (f32) */
    int64_t target, min_pages;  /* tasks that fill the device; pages per split, at least */
    int64_t max_pps;            /* pages per split, at most (the loop budget, RQ_VK_PG_MAX_KEYS) */
    int64_t slots;              /* (sequence, split) pairs `part` holds for every head */
    int32_t gpg, ngc, ndvc;     /* query heads per task, query chunks per KV head, V chunks */
    int32_t uc;                 /* rotary units of K staged per chunk (paged.comp's UC) */
    bool sg;                    /* subgroup reductions (paged_sg.spv) */
    /* the fast pass 1 (vk_paged_fast.c): its pipelines (up to 4 and 8 query vectors), R(delta) table,
     * table range and keys a split may hold (the loop budget) */
    bool fast;
    rq_vk_pipe *fast_pipe[2];
    rq_vk_buf ftab;
    int32_t fast_dr;
    int64_t fast_max_keys;
};

typedef struct {
    RQ_VK_ROT_PC(RQ_VK_FIELD)
} rq_vk_rot_args;

/* A decode's run of rotate.comp, paged.comp and paged_combine.comp (the paged decode's, and the dense
 * decode's over the caller's dense K and V: vk_dense.c). Strides in elements of each view's dtype. */
typedef struct {
    ropeqk_vulkan_mem q;
    size_t q_extent;
    rq_vk_rot_args rot;          /* Q's rotation; src_off, dst_off and pd_off filled in, pos_off offset */
    ropeqk_vulkan_mem pos;       /* rotate.comp's positions (the metadata, or the caller's array) */
    VkDeviceSize pos_bytes;
    ropeqk_vulkan_mem k, v, k_scale, v_scale; /* scales: buf VK_NULL_HANDLE without an 8-bit cache */
    size_t k_extent, v_extent, scale_bytes;
    uint32_t knb[3], vnb[3];     /* page, head, slot */
    ropeqk_vulkan_mem out, lse;
    size_t out_extent, lse_extent;
    uint32_t onb[4], lnb[3];     /* sequence s's row: (s % nbat) * [0] + (s / nbat) * [2] */
    int64_t nbat, page_size;
    int fast;                    /* pass 1 in paged_fast<fast>.spv (4 or 8; its row groups appended to the
                                  * metadata: rq_vkpf_groups), else 0: paged.comp */
} rq_vkpg_launch;

/* vk_paged_fast.c: the fast pass 1 (glsl/paged_fast.comp). rq_vkpf_shape_ok: the plan's shape fits it;
 * rq_vkpf_setup: its pipelines, table and loop budget where it fits the device (pg->fast; vfreq4: the
 * plan's frequencies); rq_vkpf_call_ok: a call's cache views at 16-byte multiples; rq_vkpf_groups: the
 * metadata's row groups for it (*fm: the shader, 4 or 8; 0 where the groups exceed the grid);
 * rq_vkpf_prepare: the split, bindings and push constants of a run (ROPEQK_ERR_TOO_LARGE: paged.comp
 * serves), recorded by rq_vk_dispatch with r->pipe and r->grid. */
typedef struct {
    RQ_VK_PF_PC(RQ_VK_FIELD)
} rq_vkpf_pc;
typedef struct {
    rq_vkpf_pc pc;
    rq_vk_bind b[RQ_VK_PF_NBIND];
    rq_vk_pipe *pipe;
    uint32_t grid[3];
    int64_t nsplit, kps;
} rq_vkpf_run;
bool rq_vkpf_shape_ok(const ropeqk_plan *pl);
ropeqk_status rq_vkpf_setup(ropeqk_plan *pl, struct rq_vk_paged *pg, const float *vfreq4);
bool rq_vkpf_call_ok(const ropeqk_plan *pl, VkDeviceSize k_off, const uint32_t knb[3], VkDeviceSize v_off,
                     const uint32_t vnb[3]);
ropeqk_status rq_vkpf_groups(const ropeqk_plan *pl, rq_paged_meta *m, int *fm);
ropeqk_status rq_vkpf_prepare(ropeqk_plan *pl, const rq_vkpg_launch *L, const rq_paged_meta *meta, rq_vkpf_run *r);

/* vk_paged_run.c: the shared part of a decode plan's creation: the split shape, the loop budget, pass 1
 * and the combine's pipelines, the split scratch and a metadata buffer of meta_ints (and the fast
 * pass 1's row groups), for up to max_seqs sequences of up to maxp pages of ps keys; the fast pass 1
 * (rq_vkpf_setup, from vfreq4). fn names the caller in messages. */
ropeqk_status rq_vkpg_setup(ropeqk_plan *pl, struct rq_vk_paged *pg, int64_t ps, int64_t maxp, int64_t max_seqs,
                            int64_t meta_ints, const float *vfreq4, const char *fn);
/* Records a decode (the leading barrier, the metadata, the three shaders) once every binding is
 * checked; nothing recorded on failure. */
ropeqk_status rq_vkpg_record_run(ropeqk_plan *pl, VkCommandBuffer cmd, const rq_vkpg_launch *L,
                                 const rq_paged_meta *meta, const char *fn);

/* ROPEQK_ERR_TOO_LARGE with the message "fn: what of bytes exceeds this device's limit (lim)". */
ropeqk_status rq_vkpg_too_large(const char *fn, const char *what, uint64_t bytes, uint64_t lim);
/* ropeqk_vulkan_paged_*'s plan check: a plan of a Vulkan context. */
ropeqk_status rq_vkpg_plan_ok(const ropeqk_plan *pl, const char *fn);
/* The leading barrier, the batch's metadata into the plan's buffer, and the barrier to the shaders. */
void rq_vkpg_record_meta(ropeqk_plan *pl, VkCommandBuffer cmd, const rq_paged_meta *meta);
/* ROPEQK_ERR_TOO_LARGE when the batch's metadata exceeds the plan's buffer. */
ropeqk_status rq_vkpg_meta_fits(const ropeqk_plan *pl, const rq_paged_meta *meta, const char *fn);

/* vk_paged_chunk.c: a ragged batch's long chunks of query rows (plan->chunk). Before anything is
 * recorded: the scratch made, every chunk's recording checked, its rows marked as placeholders in
 * meta (rq_paged_chunk_mark); *n chunks. After the decode's commands: the gathers and the
 * companion's attention per chunk. */
ropeqk_status rq_vkpg_chunks_mark(ropeqk_plan *pl, const ropeqk_vulkan_paged_args *args, const ropeqk_paged_batch *b,
                                  rq_paged_meta *meta, int64_t *n);
void rq_vkpg_chunks_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_paged_args *args,
                           const ropeqk_paged_batch *b, const rq_paged_meta *meta);

/* The bytes a view of `extent` bytes of es-byte elements touches from `off` (whole 32-bit words). */
static inline size_t rq_vkpg_bytes(VkDeviceSize off, size_t es, size_t extent)
{
    return (size_t)rq_view_bytes(&rq_vulkan_backend, off, es, extent);
}

/* A grid dimension of n work-groups, at most 65535 (the shaders stride past it). */
static inline uint32_t rq_vkpg_grid(int64_t n) { return n < 65535 ? (uint32_t)n : 65535u; }

#endif
