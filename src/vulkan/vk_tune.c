/* The Vulkan side of the kernel configuration and of the tuner: the shaders read the vk_* knobs only
 * (specialization constants: scores.comp's tile, vk_block x vk_tk; attention.comp's tile, vk_rows
 * query rows per work-group, with the widest key tile, 64 or 32 keys, the device has room for; the
 * tensor-core path's tile, vk_cm_rows x vk_cm_keys, for both operations where plans take it);
 * which shapes a device takes is the plans' own fit test (vk_plan.c, vk_attn.c). The decode-shaped
 * scores and the paged shaders fit their shapes to the device themselves (vk_paged.c). */
#include "vk.h"

#include <stdio.h>
#include <string.h>

void rq_vk_tuning_base(const rq_devinfo *dev, rq_tuning *t)
{
    snprintf(t->config_source, sizeof t->config_source, "defaults (Vulkan %s device; `ropeqk tune` searches)",
             dev->cpu ? "CPU" : "GPU");
    /* dense_rows on a CPU device (lavapipe): the dense decode (vk_dense.c) costs a full read and
     * rotation of K per query row, and llvmpipe's decode shaders are bound by that per-key work.
     * Measured (`ropeqk-bench --vulkan --dense-decode`, 32768 keys, Hq 32, Hkv 8, D 128, f16, causal,
     * lavapipe on 2 shared AMD EPYC cores), old path time / dense decode time: Sq 1 2.4x, Sq 2 1.2x,
     * Sq 4 0.61x, Sq 16 0.15x. GPUs keep the shared default (unmeasured on Vulkan). */
    if (dev->cpu)
        t->dense_rows = 2;
}

void rq_vk_tuning_fit(const rq_devinfo *dev, rq_tuning *t)
{
    /* the plans fit each shape to the device when they make their pipelines (rq_vk_scores_shape,
     * rq_vk_attn_pick), falling back to the defaults every device takes */
    (void)dev, (void)t;
}

ropeqk_status rq_vk_build_options(const ropeqk_ctx *ctx, char *buf, size_t len)
{
    const rq_tuning *t = &ctx->tune;
    snprintf(buf, len,
             "spirv (glslc); specialization: per plan dtypes; scores block %d (tile %d), %d dims a stage; "
             "attention %d rows a work-group",
             t->vk_block, RQ_VK_SC_SIDE * t->vk_block, t->vk_tk, t->vk_rows);
    rq_vk_attn_shape s;
    size_t n = strlen(buf);
    if (rq_vk_attn_pick(ctx, 128, &s) && n < len)
        snprintf(buf + n, len - n, " (at Dv 128: %d x %d tile, %d invocations of %d x %d scores, %d column block%s)",
                 s.bm, s.bn, s.nt, RQ_VK_AT_RM, RQ_VK_AT_RN, s.ncb, s.ncb == 1 ? "" : "s");
    /* the tensor-core path (vk_cm.c, vk_cm_dev.c) */
    bool emu = false, cm = rq_vk_cm_active(ctx, &emu);
    n = strlen(buf);
    if (n < len)
        snprintf(buf + n, len - n, "; tensor cores: %s%s, tile %d rows x %d keys%s; device: %s",
                 cm ? (emu ? "on, EMULATED (vk_coopmat 1)" : "on") : "off",
                 t->vk_coopmat < 0 ? " (vk_coopmat -1)" : "", t->vk_cm_rows, t->vk_cm_keys,
                 cm && !rq_vk_cm_tile_fits(ctx, t->vk_cm_rows, t->vk_cm_keys, emu) ? " (does not fit: a smaller one)" : "",
                 rq_vk(ctx)->cm.desc);
    return ROPEQK_SUCCESS;
}

bool rq_vk_tune_candidate(rq_family f, bool cpu, int k, rq_tuning *t)
{
    (void)cpu; /* the same shapes on either profile: the device's limits decide (rq_vk_tune_fits) */
    static const int vb[] = {2, 4, 8}, vtk[] = {8, 16, 32}, vrows[] = {32, 64, 128};
    k--; /* k = 0 is the configuration in effect: the core never asks for it */
    if (f == RQ_FAM_SCORES && k < 9) {
        t->vk_block = vb[k % 3];
        t->vk_tk = vtk[k / 3];
        return true;
    }
    if (f == RQ_FAM_ATTN && k < 3) {
        t->vk_rows = vrows[k];
        return true;
    }
    /* the tensor-core tile for either operation (rq_vk_tune_fits keeps one kind or the other) */
    k -= f == RQ_FAM_SCORES ? 9 : 3;
    if ((f == RQ_FAM_SCORES || f == RQ_FAM_ATTN) && k >= 0 && k < 9) {
        t->vk_cm_rows = vrows[k % 3];
        t->vk_cm_keys = vrows[k / 3];
        return true;
    }
    return false;
}

bool rq_vk_tune_fits(const ropeqk_ctx *ctx, rq_family f, const rq_tuning *t, int64_t D)
{
    /* a shape the device does not take would run as the default and be timed under the wrong name;
     * where plans take the tensor-core path only its tiles are searched (today's shaders' knobs would
     * time the same plans), elsewhere only today's shapes */
    const rq_tuning *c = &ctx->tune;
    bool emu = false;
    if (rq_vk_cm_active(ctx, &emu))
        return (f == RQ_FAM_SCORES ? t->vk_block == c->vk_block && t->vk_tk == c->vk_tk : t->vk_rows == c->vk_rows) &&
               rq_vk_cm_tile_fits(ctx, t->vk_cm_rows, t->vk_cm_keys, emu);
    if (t->vk_cm_rows != c->vk_cm_rows || t->vk_cm_keys != c->vk_cm_keys)
        return false;
    return f == RQ_FAM_SCORES ? rq_vk_scores_fits(ctx, t->vk_block, t->vk_tk, D) : rq_vk_attn_rows_fit(ctx, t->vk_rows, D);
}

ropeqk_status rq_vk_tune_clone(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **out)
{
    const struct rq_vk_ctx *vk = rq_vk(ctx);
    ropeqk_vulkan_ctx_params vp = {.instance = vk->instance, .physical_device = vk->phys, .device = vk->device,
                                   .queue_family = vk->qfam, .queue = vk->queue};
    rq_tuning_to_api(t, &vp.tuning);
    ropeqk_status st = ropeqk_vulkan_ctx_create(&vp, out);
    if (!st) /* the same device as ctx's, opened with its features: the tensor-core path's facts too */
        rq_vk(*out)->cm = vk->cm;
    return st;
}

void rq_vk_tune_lock(ropeqk_ctx *ctx, bool lock)
{
    /* the candidates submit to this context's queue: the search holds its lock, as the context's own
     * host calls do (another thread's calls on ctx wait) */
    if (lock)
        pthread_mutex_lock(&rq_vk(ctx)->qlock);
    else
        pthread_mutex_unlock(&rq_vk(ctx)->qlock);
}
