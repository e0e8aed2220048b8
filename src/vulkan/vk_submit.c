/* The neutral run API's submissions on Vulkan (vk_submit.h): command buffers of a per-context pool,
 * submitted to the context's queue under its lock, each signalling the context's timeline semaphore
 * (Vulkan 1.2 core) with the next value; a command buffer goes back to the pool's idle list once the
 * timeline has reached its value (checked, without blocking, at the next submission). */
#include "vk_submit.h"

#include <stdlib.h>
#include <string.h>

/* Idle command buffers kept for reuse; more are freed (a burst of queued runs does not pin them). */
#define RQ_VK_IDLE_MAX 16

typedef struct rq_vk_sub {
    VkCommandBuffer cmd;
    uint64_t value;   /* the timeline value its completion signals */
    rq_vk_buf stage;  /* a staging buffer freed with it (rq_vk_adopt_stage), or none */
    struct rq_vk_sub *next;
} rq_vk_sub;

struct rq_vk_runq {
    pthread_mutex_t lock; /* the pool (and recording into its command buffers), the lists, last */
    VkCommandPool pool;
    VkSemaphore timeline;
    uint64_t last;        /* the last value submitted */
    rq_vk_sub *busy;      /* submitted, maybe running */
    rq_vk_sub *idle;
    int n_idle;
};

static void sub_free(ropeqk_ctx *ctx, struct rq_vk_runq *q, rq_vk_sub *s)
{
    rq_vk_buf_free(ctx, &s->stage);
    if (s->cmd)
        vkFreeCommandBuffers(rq_vk(ctx)->device, q->pool, 1, &s->cmd);
    free(s);
}

void rq_vk_runq_free(ropeqk_ctx *ctx)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    struct rq_vk_runq *q = vk->runq;
    if (!q)
        return;
    /* the caller waited for the timeline (rq_vk_close, bounded): every submission has completed */
    rq_vk_sub *lists[2] = {q->busy, q->idle};
    for (int i = 0; i < 2; i++)
        for (rq_vk_sub *s = lists[i], *n; s; s = n) {
            n = s->next;
            sub_free(ctx, q, s);
        }
    if (q->pool)
        vkDestroyCommandPool(vk->device, q->pool, NULL);
    if (q->timeline)
        vkDestroySemaphore(vk->device, q->timeline, NULL);
    pthread_mutex_destroy(&q->lock);
    free(q);
    vk->runq = NULL;
}

static ropeqk_status runq_make(ropeqk_ctx *ctx, struct rq_vk_runq **out)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    struct rq_vk_runq *q = calloc(1, sizeof *q);
    if (!q)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    if (pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q);
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    }
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = vk->qfam};
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkResult r = vkCreateCommandPool(vk->device, &pci, NULL, &q->pool);
    if (r == VK_SUCCESS)
        r = vkCreateSemaphore(vk->device, &sci, NULL, &q->timeline);
    vk->runq = q; /* rq_vk_runq_free releases a half-made one */
    *out = q;
    if (r != VK_SUCCESS) {
        ropeqk_status st = rq_vk_fail(ctx, r, "vkCreateCommandPool/vkCreateSemaphore");
        rq_vk_runq_free(ctx);
        *out = NULL;
        return st;
    }
    return ROPEQK_SUCCESS;
}

ropeqk_status rq_vk_runq_ready(ropeqk_ctx *ctx, const char *fn)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    if (!vk->timeline) {
        rq_set_error("%s: the Vulkan device was not created with timeline semaphores (Vulkan 1.2's "
                     "timelineSemaphore feature; a borrowed VkDevice declares it in "
                     "ropeqk_vulkan_ctx_params.timeline_semaphore)", fn);
        return ROPEQK_ERR_BAD_PARAM;
    }
    ropeqk_status st = ROPEQK_SUCCESS;
    struct rq_vk_runq *q;
    pthread_mutex_lock(&ctx->lock);
    if (!vk->runq)
        st = runq_make(ctx, &q);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

VkSemaphore rq_vk_timeline(const ropeqk_ctx *ctx, uint64_t *last)
{
    struct rq_vk_runq *q = rq_vk(ctx)->runq;
    if (!q) {
        *last = 0;
        return VK_NULL_HANDLE;
    }
    pthread_mutex_lock(&q->lock);
    *last = q->last;
    pthread_mutex_unlock(&q->lock);
    return q->timeline;
}

ropeqk_status rq_vk_wait_value(ropeqk_ctx *ctx, VkSemaphore s, uint64_t v, uint64_t ns)
{
    if (!s || !v)
        return ROPEQK_SUCCESS;
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &s, .pValues = &v};
    VkResult r = vkWaitSemaphores(rq_vk(ctx)->device, &wi, ns);
    if (r == VK_TIMEOUT)
        return ROPEQK_ERR_TIMEOUT;
    return r == VK_SUCCESS ? ROPEQK_SUCCESS : rq_vk_fail(ctx, r, "vkWaitSemaphores");
}

/* Submissions the timeline has passed back to the idle list (q->lock held). */
static void reclaim(ropeqk_ctx *ctx, struct rq_vk_runq *q)
{
    uint64_t done = 0;
    if (!q->busy || vkGetSemaphoreCounterValue(rq_vk(ctx)->device, q->timeline, &done) != VK_SUCCESS)
        return;
    for (rq_vk_sub **pp = &q->busy; *pp;) {
        rq_vk_sub *s = *pp;
        if (s->value > done) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        rq_vk_buf_free(ctx, &s->stage);
        if (q->n_idle >= RQ_VK_IDLE_MAX || vkResetCommandBuffer(s->cmd, 0) != VK_SUCCESS) {
            sub_free(ctx, q, s);
            continue;
        }
        s->next = q->idle;
        q->idle = s;
        q->n_idle++;
    }
}

void rq_vk_adopt_stage(ropeqk_ctx *ctx, uint64_t value, rq_vk_buf *stage)
{
    struct rq_vk_runq *q = rq_vk(ctx)->runq;
    pthread_mutex_lock(&q->lock);
    reclaim(ctx, q);
    for (rq_vk_sub *s = q->busy; s; s = s->next)
        if (s->value == value && !s->stage.buf) {
            s->stage = *stage;
            memset(stage, 0, sizeof *stage);
            break;
        }
    pthread_mutex_unlock(&q->lock);
    rq_vk_buf_free(ctx, stage); /* already complete: nothing uses it */
}

/* An idle command buffer, or a new one (q->lock held). */
static ropeqk_status take(ropeqk_ctx *ctx, struct rq_vk_runq *q, rq_vk_sub **out)
{
    if ((*out = q->idle)) {
        q->idle = (*out)->next;
        q->n_idle--;
        (*out)->next = NULL;
        return ROPEQK_SUCCESS;
    }
    rq_vk_sub *s = calloc(1, sizeof *s);
    if (!s)
        return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = q->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = vkAllocateCommandBuffers(rq_vk(ctx)->device, &ai, &s->cmd);
    if (r != VK_SUCCESS) {
        free(s);
        return rq_vk_fail(ctx, r, "vkAllocateCommandBuffers");
    }
    *out = s;
    return ROPEQK_SUCCESS;
}

/* Back to the idle list unsubmitted (a refused or failed recording, a failed submit). */
static void give_back(ropeqk_ctx *ctx, struct rq_vk_runq *q, rq_vk_sub *s)
{
    if (vkResetCommandBuffer(s->cmd, 0) != VK_SUCCESS) {
        sub_free(ctx, q, s);
        return;
    }
    s->next = q->idle;
    q->idle = s;
    q->n_idle++;
}

/* Records and ends s->cmd: the leading barrier is the recording's own (the plan records, and
 * rq_vk_run's transfer recordings, start with one), the trailing one is added here. */
static ropeqk_status record(ropeqk_ctx *ctx, VkCommandBuffer cmd, rq_vk_record_fn rec, void *user)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = vkBeginCommandBuffer(cmd, &bi);
    if (r != VK_SUCCESS)
        return rq_vk_fail(ctx, r, "vkBeginCommandBuffer");
    ropeqk_status st = rec(cmd, user);
    if (!st) /* the caller's barrier of ropeqk_vulkan.h: shader and transfer writes before any later access */
        rq_vk_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                      VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                      VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT);
    r = vkEndCommandBuffer(cmd);
    if (!st && r != VK_SUCCESS)
        st = rq_vk_fail(ctx, r, "vkEndCommandBuffer");
    return st;
}

ropeqk_status rq_vk_submit(ropeqk_ctx *ctx, const rq_waits *w, rq_vk_record_fn rec, void *user, uint64_t *value)
{
    struct rq_vk_ctx *vk = rq_vk(ctx);
    struct rq_vk_runq *q = vk->runq;
    VkSemaphore sb[16], *sem = sb;
    uint64_t vb[16], *val = vb;
    VkPipelineStageFlags fb[16], *stg = fb;
    if (w->n > 16) {
        sem = malloc(w->n * sizeof *sem), val = malloc(w->n * sizeof *val), stg = malloc(w->n * sizeof *stg);
        if (!sem || !val || !stg) {
            free(sem), free(val), free(stg);
            return ROPEQK_ERR_OUT_OF_HOST_MEMORY;
        }
    }
    for (uint32_t i = 0; i < w->n; i++) {
        sem[i] = (VkSemaphore)w->ev[i]->handle;
        val[i] = w->ev[i]->value;
        stg[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    }
    rq_vk_sub *s = NULL;
    pthread_mutex_lock(&q->lock);
    reclaim(ctx, q);
    ropeqk_status st = take(ctx, q, &s);
    if (!st && (st = record(ctx, s->cmd, rec, user)) == ROPEQK_SUCCESS) {
        uint64_t v = q->last + 1;
        VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                            .waitSemaphoreValueCount = w->n, .pWaitSemaphoreValues = val,
                                            .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &v};
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts, .waitSemaphoreCount = w->n,
                           .pWaitSemaphores = sem, .pWaitDstStageMask = stg, .commandBufferCount = 1,
                           .pCommandBuffers = &s->cmd, .signalSemaphoreCount = 1, .pSignalSemaphores = &q->timeline};
        pthread_mutex_lock(&vk->qlock);
        VkResult r = vkQueueSubmit(vk->queue, 1, &si, VK_NULL_HANDLE);
        pthread_mutex_unlock(&vk->qlock);
        if (r == VK_SUCCESS) {
            q->last = s->value = *value = v;
            s->next = q->busy;
            q->busy = s;
            s = NULL;
        } else {
            st = rq_vk_fail(ctx, r, "vkQueueSubmit");
        }
    }
    if (s)
        give_back(ctx, q, s);
    pthread_mutex_unlock(&q->lock);
    if (sem != sb)
        free(sem), free(val), free(stg);
    return st;
}

void *rq_vk_timeline_chain(VkPhysicalDevice pd, VkPhysicalDeviceTimelineSemaphoreFeatures *tl, void *next)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    memset(tl, 0, sizeof *tl);
    tl->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
    if (VK_API_VERSION_MAJOR(p.apiVersion) == 1 && VK_API_VERSION_MINOR(p.apiVersion) < 2)
        return next; /* a Vulkan 1.1 device: the runs on device memory are refused on it */
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = tl};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!tl->timelineSemaphore)
        return next;
    tl->pNext = next;
    return tl;
}
