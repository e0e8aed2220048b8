/* The host-memory path on a Vulkan context (the table's host_run, after the core made the plan):
 * device buffers and one staging buffer, one command buffer (uploads, the plan's commands,
 * downloads), one submit, a fence wait. Also warmup and the tuner's timed runs. */
#include "vk.h"

#include <stdio.h>
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
    pthread_mutex_lock(&rq_vk(ctx)->qlock);
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
            char what[96];
            snprintf(what, sizeof what, "host call of a %s plan", pl->op == ROPEQK_OP_SCORES ? "scores"
                                                                : pl->op == ROPEQK_OP_ATTENTION ? "attention" : "paged");
            st = rq_vk_cmd_submit(ctx, cmd, what);
        } else {
            vkEndCommandBuffer(cmd);
            vkFreeCommandBuffers(rq_vk(ctx)->device, rq_vk(ctx)->pool, 1, &cmd);
        }
    }
    pthread_mutex_unlock(&rq_vk(ctx)->qlock);
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

/* io: by rq_io_role */
static ropeqk_status record_plan(ropeqk_plan *pl, VkCommandBuffer cmd, host_io *io, void *user)
{
    (void)user;
    ropeqk_vulkan_args a = {.q = mem_of(&io[RQ_IO_Q]), .k = mem_of(&io[RQ_IO_K]), .q_pos = mem_of(&io[RQ_IO_QPOS]),
                            .k_pos = mem_of(&io[RQ_IO_KPOS]), .out = mem_of(&io[RQ_IO_OUT]), .v = mem_of(&io[RQ_IO_V]),
                            .lse = mem_of(&io[RQ_IO_LSE])};
    return ropeqk_vulkan_plan_record(pl, cmd, &a, NULL);
}

ropeqk_status rq_vk_host_run(ropeqk_plan *pl, const rq_host_io *in)
{
    host_io io[RQ_IO_COUNT];
    memset(io, 0, sizeof io);
    for (int i = 0; i < RQ_IO_COUNT; i++) {
        io[i].in = in[i].in;
        io[i].out = in[i].out;
        io[i].bytes = in[i].bytes;
    }
    return host_run(pl, io, RQ_IO_COUNT, record_plan, NULL);
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
    rq_vk_attn_shape ash;
    if (!st && rq_vk_attn_pick(ctx, 128, &ash))
        for (int32_t dt = 0; dt < 3 && !st; dt++) {
            int32_t sa[RQ_VK_NSPEC];
            rq_vk_attn_spec(&ash, dt, dt, sa);
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
        pthread_mutex_lock(&rq_vk(ctx)->qlock);
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
                st = rq_vk_cmd_submit(ctx, cmd, r < 0 ? "tuner: input fill" : "tuner: timed run");
            } else {
                vkEndCommandBuffer(cmd);
                vkFreeCommandBuffers(rq_vk(ctx)->device, rq_vk(ctx)->pool, 1, &cmd);
            }
        }
        pthread_mutex_unlock(&rq_vk(ctx)->qlock);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r >= 0)
            seconds[r] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    for (int i = 0; i < 4; i++)
        rq_vk_buf_free(ctx, &b[i]);
    return st;
}
