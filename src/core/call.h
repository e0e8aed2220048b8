/* The call front end shared by every backend's run entry points (ropeqk_opencl_plan_enqueue,
 * ropeqk_vulkan_plan_record, the paged calls): a backend describes the caller's buffers as neutral
 * {id, offset, end} records, and the core checks steps, alignment, ranges and overlaps on them with
 * the same statuses and messages everywhere. Then the backend records or enqueues. */
#ifndef ROPEQK_CORE_CALL_H
#define ROPEQK_CORE_CALL_H

#include "backend.h"

/* A caller's buffer view as the checks see it. */
typedef struct {
    uintptr_t id;  /* the buffer's identity (a cl_mem, a VkBuffer); 0: absent */
    uint64_t off;  /* byte offset of the view in the buffer */
    uint64_t end;  /* bytes of the buffer usable, from its start: the view must lie in [off, end) */
} rq_mem;

/* A checked view's byte range (for the overlap checks; id 0: none). */
typedef struct {
    uintptr_t id;
    uint64_t off, len;
} rq_range;

/* Bytes a view of `extent` bytes at `off` touches with elements of es bytes: 16-bit views are read
 * and written in whole access units (backend.h), from the unit holding the first element to the end
 * of the one holding the last. */
uint64_t rq_view_bytes(const rq_backend *be, uint64_t off, size_t es, size_t extent);
/* A view against its buffer: offset aligned to es (ROPEQK_ERR_BAD_STRIDES), its bytes inside the
 * buffer (ROPEQK_ERR_BUFFER_TOO_SMALL, message naming `what`); fills *r. */
ropeqk_status rq_check_mem(const rq_backend *be, const rq_mem *m, size_t es, size_t extent, const char *fn,
                           const char *what, rq_range *r);
/* Two ranges of the same buffer that share a byte. */
bool rq_ranges_overlap(const rq_range *a, const rq_range *b);
/* Whether an output range shares a byte with an input range or another output range. */
bool rq_outputs_overlap(const rq_range *const *outs, int n_out, const rq_range *const *ins, int n_in);

/* A plan's per-call counts: keys, offsets (the step's for a decode plan) and the extents of the K,
 * output and V views for that many keys. */
typedef struct {
    int64_t Sk, q_off, k_off;
    size_t k, o, v;
} rq_extents;
/* Checks a call's step against the plan (fn names the call in messages) and fills *x. */
ropeqk_status rq_plan_step(const ropeqk_plan *pl, const ropeqk_step *step, bool pos_arrays, const char *fn,
                           rq_extents *x);

/* The buffers of one run of a scores or attention plan. */
typedef struct rq_call_mems {
    rq_mem q, k, q_pos, k_pos, out, v, lse;
} rq_call_mems;
/* Everything a scores or attention run checks before anything is enqueued or recorded: the plan's
 * operation (a paged plan runs through paged_fn), buffers present, the step, each view aligned and
 * inside its buffer, positions only where the plan allows arrays, the outputs overlapping no input
 * nor each other. fn names the call in messages. */
ropeqk_status rq_call_check(const ropeqk_plan *pl, const ropeqk_step *step, const rq_call_mems *m, const char *fn,
                            const char *paged_fn, rq_extents *x);

/* ---- paged KV cache (paged.c) ---- */
/* The packed metadata of one paged call (cl/contract.h, glsl/vk_contract.h), per query row r (a
 * decode: q_indptr's rows, or one per sequence; an append: one per sequence): pstart[rows+1] (where
 * the row's sequence's page list starts; the lists are stored once per sequence), lens[rows] (keys
 * the row reads: its sequence's length, cut after the row's position when causal), q_pos[rows],
 * k_pos0[rows], then the page lists. */
typedef struct {
    int32_t *v;
    size_t n;                 /* int32 elements */
    int64_t rows;             /* query rows (the kernels' "sequences") */
    int32_t lens_off, qpos_off, kpos_off, pages_off;
    int64_t max_pages;        /* most pages any sequence uses */
    int32_t groups_off;       /* rq_paged_meta_groups: ngroups + 1 row-group starts from there */
    int64_t ngroups, group_rows; /* row groups, and the most rows in one */
} rq_paged_meta;
/* ---- the dense decode's pages (dense_pages.c): few-row dense attention through the paged
 * decode's kernels, both backends ---- */
/* Keys per page of the dense view. Any size works in the kernels (they find each key's page by
 * j / page_size); larger pages make the metadata shorter (32k keys: 512 entries per row) and coarsen
 * the causal and window cuts to P keys, whose masked keys the kernels skip block by block. 64 keeps a
 * split (a whole number of pages) below the decode's own minimum split (256 or 512 keys). */
#define RQ_DENSE_PAGE 64
/* Page numbers p = b * X + c * Y with p * ks = b * kb + c * kc in K and p * vs = b * vb + c * vc in V
 * (kb, vb: the batch strides, kc, vc: a page's worth of keys; 0 where there is one batch entry or one
 * page). False where no such numbering exists. */
bool rq_dense_numbering(int64_t kb, int64_t kc, int64_t vb, int64_t vc, int64_t *X, int64_t *Y, int64_t *ks,
                        int64_t *vs);
/* The numbering of the plan's K and V views over Sk keys (bytes: ks, vs), and whether the pages and
 * the rows (B * Sq * Hq) stay within int32; false: the backend's old path. */
bool rq_dense_view_pages(const ropeqk_plan *pl, int64_t Sk, int64_t *X, int64_t *Y, int64_t *ks, int64_t *vs);
/* The decode metadata of a dense call: sequence s = i * B + b, its position (0 with a q position
 * array, which the backend copies in on the device), first key position and the pages of the keys it
 * may see. ROPEQK_ERR_TOO_LARGE: past int32 (the old path serves). m->v is the caller's to free. */
ropeqk_status rq_dense_meta(const ropeqk_plan *pl, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr, int64_t X,
                            int64_t Y, rq_paged_meta *m);
/* The same for decode kernels that serve a sequence's rows together (OpenCL's paged_attn_fast): row
 * s = b * Sq + i (batch-entry major), every row of batch entry b sharing one page list, the union of
 * the pages its rows may see, with the union's length and first key position (the kernels mask each
 * row by its position). */
ropeqk_status rq_dense_meta_grouped(const ropeqk_plan *pl, int64_t Sk, int64_t q_off, int64_t k_off, bool qarr,
                                    int64_t X, int64_t Y, rq_paged_meta *m);
/* ---- the fast paged decode's rotation table (paged_fast_table.c; both backends) ---- */
#define RQ_PFAST_TILE 128 /* keys per tile of both kernels (cl/contract.h RQ_FWG, glsl/vk_contract.h) */
#define RQ_PFAST_R_MAX 256 /* largest rotary width they take (the table's and anchors' room) */
/* The table's delta range dr: 32 keys an anchor where R <= 128 (and, shared_room > 0, its
 * dr x (R/4 + 1) float4 within that many bytes), else 16. */
int rq_pfast_dr(int64_t R, size_t shared_room);
/* The table from the plan's frequencies as the kernels get them (freq4: R/2 x (hi, mid, lo, -) floats
 * of inv/pi, negated for the conjugate; their sum in fp64): rows delta < dr of R/4 + 1 float4, (cos, sin)
 * of pairs i, i + 1 at angle delta * inv[i] (the last float4 of a row padding), then RQ_PFAST_TILE / dr
 * rows of R/2 (cos, sin) at angle w * dr * inv[i]; *n floats, the caller's to free (NULL: out of
 * memory). No attention factor: the anchors carry it. */
float *rq_pfast_table(const float *freq4, int64_t R, int dr, size_t *n);
/* Validation of a paged-decode description into *pb (plan.c calls it). */
ropeqk_status rq_paged_validate(const ropeqk_plan_desc *d, rq_problem *pb);
/* Validates a paged batch and packs it (specific statuses, the thread's message set).
 * n_new < 0: a decode (lengths 1..capacity, positions needed); n_new >= 0: an append of n_new tokens
 * (lengths 0..capacity - n_new; a page written by the append may not be written for another
 * sequence). On success m->v is the caller's to free. */
ropeqk_status rq_paged_build_meta(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t n_new,
                                  const char *fn, rq_paged_meta *m);

/* The batch's query rows (paged_rows.c): q_indptr checked against the lengths and the plan's
 * max_q_rows (ROPEQK_ERR_QUERY_ROWS, ROPEQK_ERR_POSITION_RANGE); *rows their total (n_seqs without
 * q_indptr). Needs seq_lens checked first. */
ropeqk_status rq_paged_rows(const ropeqk_plan *pl, const ropeqk_paged_batch *b, const char *fn, int64_t *rows);

/* The bytes of an 8-bit cache's scale buffer (docs/conventions.md section 12): num_pages * Hkv *
 * page_size floats of the cache view [num_pages, Hkv, page_size, dim]; true on overflow. */
bool rq_paged_scale_bytes(const ropeqk_tensor *cache, size_t *bytes);

/* The buffers of a paged decode, and of an append (k_scale / v_scale: 8-bit caches only). */
typedef struct rq_paged_mems {
    rq_mem q, k_cache, v_cache, out, lse, k_scale, v_scale;
} rq_paged_mems;
typedef struct rq_append_mems {
    rq_mem k_new, v_new, k_cache, v_cache, k_scale, v_scale;
} rq_append_mems;
/* A paged decode's checks before anything is enqueued or recorded: the plan is a paged one,
 * buffers present (lse exactly when the plan has with_lse), the batch (packed into *meta, which the
 * caller frees on success), each view aligned and inside its buffer for the batch's sequences, the
 * outputs overlapping no input nor each other. */
ropeqk_status rq_paged_call_check(const ropeqk_plan *pl, const rq_paged_mems *m, const ropeqk_paged_batch *batch,
                                  const char *fn, rq_paged_meta *meta);
/* An append's checks: the plan, k_new / v_new views against the plan ([n_seqs, Hkv, n_new, D|Dv],
 * the caches' dtypes), the batch (packed into *meta), the views in their buffers, the caches
 * overlapping neither each other nor the new rows, row counts within int32. */
ropeqk_status rq_append_call_check(const ropeqk_plan *pl, const ropeqk_tensor *k_new, const ropeqk_tensor *v_new,
                                   const rq_append_mems *m, const ropeqk_paged_batch *batch, const char *fn,
                                   rq_paged_meta *meta);
/* Prefill chunks (backends with paged_chunks, plan->chunk): a sequence with rq_paged_chunk_rows(pl)
 * query rows or more (the context's chunk_rows, a tuning knob: ROPEQK_CHUNK_ROWS; its default and
 * the measurement that chose it are in src/core/tuning.c) runs them through the companion attention
 * plan over its K/V gathered from the pages, not row by row through the decode kernels. The same
 * rule on every backend. */
int64_t rq_paged_chunk_rows(const ropeqk_plan *pl);
/* Query rows of sequence s of a decode batch. */
int64_t rq_paged_seq_rows(const ropeqk_paged_batch *b, int64_t s);
/* Sets the rows of every chunk to one key in meta (placeholders for decode kernels that run over
 * every row, as Vulkan's do; the chunk's attention overwrites them after), recomputes
 * meta->max_pages, and returns how many sequences it marked (0 without plan->chunk or q_indptr). */
int64_t rq_paged_chunk_mark(const ropeqk_plan *pl, const ropeqk_paged_batch *b, rq_paged_meta *meta);
/* The next run of consecutive sequences of a ragged batch that are not chunks, from sequence *s on:
 * their query rows [*r0, *r1), *s moved past them; false when none is left. The decode kernels of a
 * batch with chunks run once per run (rows of chunks never reach them). */
bool rq_paged_decode_run(const ropeqk_plan *pl, const ropeqk_paged_batch *b, int64_t *s, int64_t *r0, int64_t *r1);
/* The metadata of rows [r0, r1) of m alone (whole sequences: their page lists are contiguous), for
 * the kernels' sequences 0 .. r1 - r0 - 1; sub->v is the caller's to free. */
ropeqk_status rq_paged_meta_rows(const rq_paged_meta *m, int64_t r0, int64_t r1, int64_t page_size,
                                 rq_paged_meta *sub);
/* Appends to m the row groups of a decode whose kernel serves several rows of a sequence at once:
 * consecutive rows sharing their page list and first key position (one sequence's: a paged batch's
 * rows, whose lists are never empty; max_rows 1 for metadata with a list per row), at most max_rows
 * a group, as ngroups + 1 starts at m->groups_off; sets m->ngroups and m->group_rows. */
ropeqk_status rq_paged_meta_groups(rq_paged_meta *m, int64_t max_rows);
/* A view's extent with its first dim cut to n rows (a batch's sequences). */
size_t rq_rows_extent(const ropeqk_tensor *t, int64_t n);

/* The split of a paged decode over the pages (flash-decoding), the same rule on every backend:
 * enough (split, task) pairs to fill the device (`target`, a few per compute unit) even for one
 * long sequence, but no split shorter than `min_keys` keys (whose partial results would cost more
 * to write and join than they save), and none longer than max_pages (0: no bound). Returns pages
 * per split. */
int64_t rq_paged_pages_per_split(int64_t target, int64_t tasks, int64_t longest_pages, int64_t page_size,
                                 int64_t min_keys, int64_t max_pages);

#endif
