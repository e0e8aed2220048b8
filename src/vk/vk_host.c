/* The host-memory calls on a Vulkan context: device buffers and one staging buffer, one command
 * buffer (uploads, the plan's commands, downloads), one submit, a fence wait. */
#include "vk.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RQ_HOST_MAX 8

/* A host array to upload (in) and/or download (out) through the staging buffer. */
typedef struct {
    const void *in;  /* NULL: nothing uploaded */
    void *out;       /* NULL: nothing read back */
    size_t bytes;
    rq_vk_buf dev;
    VkDeviceSize stage_off;
} host_io;

/* Runs `record` between the uploads and downloads of io[0..n). */
typedef ropeqk_status (*record_fn)(ropeqk_plan *pl, VkCommandBuffer cmd, host_io *io, void *user);

static ropeqk_status host_run(ropeqk_plan *pl, host_io *io, int n, record_fn record, void *user)
{
    ropeqk_ctx *ctx = pl->ctx;
    VkDeviceSize total = 0;
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < n; i++) {
        io[i].stage_off = total;
        total += (io[i].bytes + 15) / 16 * 16;
    }
    rq_vk_buf stage = {0};
    for (int i = 0; i < n && !st; i++)
        if (io[i].bytes) /* padded to whole words: 16-bit views are read a word at a time */
            st = rq_vk_buf_create(ctx, (io[i].bytes + 3) / 4 * 4, false, 0, &io[i].dev);
    if (!st)
        st = rq_vk_buf_create(ctx, total, true, 0, &stage);
    if (st)
        goto done;
    for (int i = 0; i < n; i++)
        if (io[i].in)
            memcpy((char *)stage.map + io[i].stage_off, io[i].in, io[i].bytes);
    pthread_mutex_lock(&ctx->vk->qlock);
    VkCommandBuffer cmd;
    st = rq_vk_cmd_begin(ctx, &cmd);
    if (!st) {
        for (int i = 0; i < n; i++)
            if (io[i].in && io[i].bytes) {
                VkBufferCopy c = {io[i].stage_off, 0, io[i].bytes};
                vkCmdCopyBuffer(cmd, stage.buf, io[i].dev.buf, 1, &c);
            }
        st = record(pl, cmd, io, user); /* starts with a barrier after the copies */
        if (!st) {
            rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
            for (int i = 0; i < n; i++)
                if (io[i].out && io[i].bytes) {
                    VkBufferCopy c = {0, io[i].stage_off, io[i].bytes};
                    vkCmdCopyBuffer(cmd, io[i].dev.buf, stage.buf, 1, &c);
                }
            rq_vk_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
            st = rq_vk_cmd_submit(ctx, cmd);
        } else {
            vkEndCommandBuffer(cmd);
            vkFreeCommandBuffers(ctx->vk->device, ctx->vk->pool, 1, &cmd);
        }
    }
    pthread_mutex_unlock(&ctx->vk->qlock);
    for (int i = 0; i < n && !st; i++)
        if (io[i].out)
            memcpy(io[i].out, (char *)stage.map + io[i].stage_off, io[i].bytes);
done:
    rq_vk_buf_free(ctx, &stage);
    for (int i = 0; i < n; i++)
        rq_vk_buf_free(ctx, &io[i].dev);
    return st;
}

static ropeqk_vulkan_mem mem_of(const host_io *io)
{
    return (ropeqk_vulkan_mem){io->bytes ? io->dev.buf : VK_NULL_HANDLE, 0, (io->bytes + 3) / 4 * 4};
}

/* io: q, k, q_pos, k_pos, out */
static ropeqk_status record_scores(ropeqk_plan *pl, VkCommandBuffer cmd, host_io *io, void *user)
{
    (void)user;
    ropeqk_vulkan_args a = {.q = mem_of(&io[0]), .k = mem_of(&io[1]), .q_pos = mem_of(&io[2]),
                            .k_pos = mem_of(&io[3]), .out = mem_of(&io[4])};
    return ropeqk_vulkan_plan_record(pl, cmd, &a, NULL);
}

ropeqk_status rq_vk_scores(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                           const ropeqk_tensor *k, const void *k_data, const int32_t *q_pos, const int32_t *k_pos,
                           const ropeqk_tensor *out, float *out_data)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_SCORES, .params = *p, .q = *q, .k = *k, .out = *out,
                          .positions = q_pos || k_pos ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    if (st)
        return st;
    if (!q_data || !k_data || !out_data) {
        ropeqk_plan_destroy(pl);
        return ROPEQK_ERR_NULL_POINTER;
    }
    const rq_problem *pb = &pl->pb;
    /* a strided output has gaps: upload the caller's bytes so they come back as they were */
    bool dense = pb->out_extent == (size_t)(pb->B * pb->Hq * pb->Sq * pb->Sk) * sizeof(float);
    host_io io[5] = {
        {q_data, NULL, pb->q_extent, {0}, 0},
        {k_data, NULL, pb->k_extent, {0}, 0},
        {q_pos, NULL, q_pos ? (size_t)pb->Sq * 4 : 0, {0}, 0},
        {k_pos, NULL, k_pos ? (size_t)pb->Sk * 4 : 0, {0}, 0},
        {dense ? NULL : out_data, out_data, pb->out_extent, {0}, 0},
    };
    st = host_run(pl, io, 5, record_scores, NULL);
    ropeqk_plan_destroy(pl);
    return st;
}

/* io: q, k, q_pos, k_pos, out, v, lse */
static ropeqk_status record_attention(ropeqk_plan *pl, VkCommandBuffer cmd, host_io *io, void *user)
{
    (void)user;
    ropeqk_vulkan_args a = {.q = mem_of(&io[0]), .k = mem_of(&io[1]), .q_pos = mem_of(&io[2]),
                            .k_pos = mem_of(&io[3]), .out = mem_of(&io[4]), .v = mem_of(&io[5]),
                            .lse = mem_of(&io[6])};
    return ropeqk_vulkan_plan_record(pl, cmd, &a, NULL);
}

ropeqk_status rq_vk_attention(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                              const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *v, const void *v_data,
                              const int32_t *q_pos, const int32_t *k_pos, const ropeqk_tensor *out, void *out_data,
                              const ropeqk_tensor *lse, float *lse_data)
{
    ropeqk_plan_desc d = {.op = ROPEQK_OP_ATTENTION, .params = *p, .q = *q, .k = *k, .out = *out, .v = *v,
                          .positions = q_pos || k_pos ? ROPEQK_POS_ARRAYS : ROPEQK_POS_OFFSETS};
    if (lse) {
        d.lse = *lse;
        d.with_lse = 1;
    }
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &d, &pl);
    if (st)
        return st;
    if (!q_data || !k_data || !v_data || !out_data || (lse && !lse_data)) {
        ropeqk_plan_destroy(pl);
        return ROPEQK_ERR_NULL_POINTER;
    }
    const rq_problem *pb = &pl->pb;
    /* outputs are uploaded too: a strided view's gaps come back as they were */
    host_io io[7] = {
        {q_data, NULL, pb->q_extent, {0}, 0},
        {k_data, NULL, pb->k_extent, {0}, 0},
        {q_pos, NULL, q_pos ? (size_t)pb->Sq * 4 : 0, {0}, 0},
        {k_pos, NULL, k_pos ? (size_t)pb->Sk * 4 : 0, {0}, 0},
        {out_data, out_data, pb->o_extent, {0}, 0},
        {v_data, NULL, pb->v_extent, {0}, 0},
        {lse ? lse_data : NULL, lse ? lse_data : NULL, lse ? pb->lse_extent : 0, {0}, 0},
    };
    st = host_run(pl, io, 7, record_attention, NULL);
    ropeqk_plan_destroy(pl);
    return st;
}

ropeqk_status rq_vk_warmup(ropeqk_ctx *ctx)
{
    /* the pipelines of the common dtypes; others are made by the plans that need them */
    rq_vk_pipe *p;
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int32_t dt = 0; dt < 3 && !st; dt++) {
        int32_t spec[RQ_VK_NSPEC] = {dt, 0, 0, RQ_VK_ROT_UNITS};
        st = rq_vk_pipe_get(ctx, RQ_VK_SH_ROTATE, spec, &p);
    }
    int32_t ss[RQ_VK_NSPEC] = {0, 0, 0, 256};
    rq_vk_scores_shape(ctx, 128, &ss[RQ_VK_SC_K1], &ss[RQ_VK_SC_K2]);
    if (!st)
        st = rq_vk_pipe_get(ctx, RQ_VK_SH_SCORES, ss, &p);
    if (!st)
        st = rq_vk_pipe_get(ctx, RQ_VK_SH_SCORES_FEW, ss, &p);
    /* attention: head dim 128, V and O of one dtype */
    for (int32_t dt = 0; dt < 3 && !st; dt++) {
        int32_t sa[RQ_VK_NSPEC];
        rq_vk_attn_spec(128, rq_vk_attn_rows(ctx, 128), dt, dt, sa);
        st = rq_vk_pipe_get(ctx, RQ_VK_SH_ATTENTION, sa, &p);
    }
    return st;
}

ropeqk_status rq_vk_time_plan(ropeqk_plan *pl, int runs, double *seconds)
{
    ropeqk_ctx *ctx = pl->ctx;
    const rq_problem *pb = &pl->pb;
    bool attn = pl->op == ROPEQK_OP_ATTENTION;
    size_t bytes[4] = {pb->q_extent, pb->k_extent, attn ? pb->o_extent : pb->out_extent, attn ? pb->v_extent : 0};
    rq_vk_buf b[4] = {{0}, {0}, {0}, {0}};
    ropeqk_status st = ROPEQK_SUCCESS;
    for (int i = 0; i < 4 && !st; i++)
        if (bytes[i])
            st = rq_vk_buf_create(ctx, (bytes[i] + 3) / 4 * 4, false, 0, &b[i]);
    ropeqk_vulkan_args a = {.q = {b[0].buf, 0, b[0].size}, .k = {b[1].buf, 0, b[1].size},
                            .out = {b[2].buf, 0, b[2].size}, .v = {b[3].buf, 0, b[3].size}};
    for (int r = -1; r < runs && !st; r++) { /* r = -1: fill the inputs (0.01f, a normal value) */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pthread_mutex_lock(&ctx->vk->qlock);
        VkCommandBuffer cmd;
        st = rq_vk_cmd_begin(ctx, &cmd);
        if (!st) {
            if (r < 0) {
                for (int i = 0; i < 4; i++)
                    if (b[i].buf && i != 2)
                        vkCmdFillBuffer(cmd, b[i].buf, 0, VK_WHOLE_SIZE, 0x3c23d70au);
                st = ROPEQK_SUCCESS;
            } else {
                st = ropeqk_vulkan_plan_record(pl, cmd, &a, NULL);
            }
            if (!st) {
                st = rq_vk_cmd_submit(ctx, cmd);
            } else {
                vkEndCommandBuffer(cmd);
                vkFreeCommandBuffers(ctx->vk->device, ctx->vk->pool, 1, &cmd);
            }
        }
        pthread_mutex_unlock(&ctx->vk->qlock);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r >= 0)
            seconds[r] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    for (int i = 0; i < 4; i++)
        rq_vk_buf_free(ctx, &b[i]);
    return st;
}
