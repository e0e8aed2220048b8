/* The Vulkan paged plan's parts shared by its files: vk_paged.c (plan, decode), vk_paged_append.c
 * (the append), vk_paged_chunk.c (prefill chunks through the companion attention plan). */
#ifndef ROPEQK_VK_PAGED_H
#define ROPEQK_VK_PAGED_H

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
};

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
