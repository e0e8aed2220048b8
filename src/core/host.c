/* The host-memory calls (ropeqk_scores, ropeqk_attention), for every backend: a plan made, validated
 * before the data pointers are looked at (as every call does), then the backend's host_run uploads,
 * runs, reads back and waits. */
#include "backend.h"

#include <string.h>

static ropeqk_status run(ropeqk_ctx *ctx, const ropeqk_plan_desc *d, const void *const *need, int n_need,
                         rq_host_io *io, void (*fill)(const ropeqk_plan *pl, rq_host_io *io))
{
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, d, &pl);
    if (st)
        return st;
    for (int i = 0; i < n_need; i++)
        if (!need[i]) {
            ropeqk_plan_destroy(pl);
            return ROPEQK_ERR_NULL_POINTER;
        }
    fill(pl, io);
    st = ctx->be->host_run(pl, io);
    ropeqk_plan_destroy(pl);
    return st;
}

/* The byte counts of the host ranges, from the validated plan. */
static void sizes(const ropeqk_plan *pl, rq_host_io *io)
{
    const rq_problem *pb = &pl->pb;
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    io[RQ_IO_Q].bytes = pb->q_extent;
    io[RQ_IO_K].bytes = pb->k_extent;
    io[RQ_IO_V].bytes = attn ? pb->v_extent : 0;
    size_t streams = (size_t)rq_pos_streams(pb); /* [3][S] under M-RoPE */
    io[RQ_IO_QPOS].bytes = io[RQ_IO_QPOS].in ? streams * (size_t)pb->Sq * 4 : 0;
    io[RQ_IO_KPOS].bytes = io[RQ_IO_KPOS].in ? streams * (size_t)pb->Sk * 4 : 0;
    io[RQ_IO_OUT].bytes = attn ? pb->o_extent : pb->out_extent;
    io[RQ_IO_LSE].bytes = attn && pl->with_lse ? pb->lse_extent : 0;
    /* A strided output has gaps the read-back would overwrite: the caller's bytes go up first so the
     * gaps come back as they were. Dense scores (every byte a score) need no upload. */
    bool dense = !attn && pb->out_extent == (size_t)(pb->B * pb->Hq * pb->Sq * pb->Sk) * sizeof(float);
    if (dense)
        io[RQ_IO_OUT].in = NULL;
}

ropeqk_status ropeqk_scores(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                            const ropeqk_tensor *k, const void *k_data, const int32_t *q_pos,
                            const int32_t *k_pos, const ropeqk_tensor *out, float *out_data)
{
    if (!ctx || !p || !q || !k || !out)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = *p, .q = *q, .k = *k, .out = *out,
                          .positions = q_pos || k_pos ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    rq_host_io io[RQ_IO_COUNT];
    memset(io, 0, sizeof io);
    io[RQ_IO_Q].in = q_data;
    io[RQ_IO_K].in = k_data;
    io[RQ_IO_QPOS].in = q_pos;
    io[RQ_IO_KPOS].in = k_pos;
    io[RQ_IO_OUT].in = io[RQ_IO_OUT].out = out_data;
    const void *need[] = {q_data, k_data, out_data};
    return run(ctx, &d, need, 3, io, sizes);
}

ropeqk_status ropeqk_attention(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                               const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *v, const void *v_data,
                               const int32_t *q_pos, const int32_t *k_pos, const ropeqk_tensor *out, void *out_data,
                               const ropeqk_tensor *lse, float *lse_data)
{
    if (!ctx || !p || !q || !k || !v || !out)
        return ROPEQK_ERR_NULL_POINTER;
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .params = *p, .q = *q, .k = *k, .out = *out, .v = *v,
                          .positions = q_pos || k_pos ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    if (lse) {
        d.lse = *lse;
        d.with_lse = 1;
    }
    rq_host_io io[RQ_IO_COUNT];
    memset(io, 0, sizeof io);
    io[RQ_IO_Q].in = q_data;
    io[RQ_IO_K].in = k_data;
    io[RQ_IO_V].in = v_data;
    io[RQ_IO_QPOS].in = q_pos;
    io[RQ_IO_KPOS].in = k_pos;
    io[RQ_IO_OUT].in = io[RQ_IO_OUT].out = out_data;
    if (lse)
        io[RQ_IO_LSE].in = io[RQ_IO_LSE].out = lse_data;
    const void *need[] = {q_data, k_data, v_data, out_data, lse ? (const void *)lse_data : q_data};
    return run(ctx, &d, need, 5, io, sizes);
}
