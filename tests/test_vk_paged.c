/* Paged decode and append on Vulkan (ropeqk_vulkan_paged_record / _append), run with
 * ROPEQK_DEVICE=vulkan and ROPEQK_VULKAN_VALIDATION=1 (tests/meson.build): decode over shuffled pages
 * and ragged lengths against the fp64 dense reference (ropeqk_attention_ref on each sequence's keys
 * gathered from its pages, positions k_pos0 + j), with the metric of docs/conventions.md section 10
 * (ropeqk_attention_max_error per sequence); the append compared byte for byte with the cache written
 * directly; every invalid batch refused with its status and the output untouched; no validation-layer
 * message. Cache slots no sequence uses hold 0xFF bytes (NaN), so a stray read shows. Command buffers
 * come from the test's own pool on the context's device and queue. The seed is ROPEQK_TEST_SEED
 * (default 20261201), printed with every case. ROPEQK_VK_PAGED_BENCH=1 enables vk_paged/bench. */
#include "ropeqk_vulkan.h"
#include "harness.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ropeqk_ctx *ctx;
static VkDevice dev;
static VkQueue queue;
static VkCommandPool pool;
static VkFence fence;
static VkPhysicalDeviceMemoryProperties memprops;

static void setup(void)
{
    ropeqk_status st = ropeqk_ctx_create(NULL, &ctx);
    if (st || !ropeqk_vulkan_device(ctx)) {
        ropeqk_ctx_destroy(ctx);
        ctx = NULL;
        cr_skip_test("no Vulkan context (ROPEQK_DEVICE=vulkan): %s", ropeqk_status_string(st));
    }
    uint32_t fam = 0;
    dev = ropeqk_vulkan_device(ctx);
    queue = ropeqk_vulkan_queue(ctx, &fam);
    vkGetPhysicalDeviceMemoryProperties(ropeqk_vulkan_physical_device(ctx), &memprops);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = fam};
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    cr_assert_eq(vkCreateCommandPool(dev, &pci, NULL, &pool), VK_SUCCESS);
    cr_assert_eq(vkCreateFence(dev, &fci, NULL, &fence), VK_SUCCESS);
}

static void teardown(void)
{
    if (!ctx)
        return;
    char msg[512] = "";
    uint32_t n = ropeqk_vulkan_validation_messages(ctx, msg, sizeof msg);
    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, pool, NULL);
    ropeqk_ctx_destroy(ctx);
    cr_expect_eq(n, 0, "%u validation messages, the first: %s", n, msg);
    th_leak_check();
}

TestSuite(vk_paged, .init = setup, .fini = teardown);

static uint64_t test_seed(void)
{
    const char *e = getenv("ROPEQK_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 20261201ull;
}

/* ---- Vulkan helpers: host-visible coherent buffers, one-time command buffers ------------------- */
typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    unsigned char *map;
    size_t size;
} vbuf;

static vbuf vb_make(size_t size, const void *init, int fill)
{
    vbuf b = {.size = size};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    cr_assert_eq(vkCreateBuffer(dev, &bci, NULL, &b.buf), VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b.buf, &req);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t t = 0;
    while (t < memprops.memoryTypeCount &&
           !((req.memoryTypeBits & (1u << t)) && (memprops.memoryTypes[t].propertyFlags & want) == want))
        t++;
    cr_assert(t < memprops.memoryTypeCount, "no host-visible memory type");
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = t};
    cr_assert_eq(vkAllocateMemory(dev, &ai, NULL, &b.mem), VK_SUCCESS);
    cr_assert_eq(vkBindBufferMemory(dev, b.buf, b.mem, 0), VK_SUCCESS);
    cr_assert_eq(vkMapMemory(dev, b.mem, 0, VK_WHOLE_SIZE, 0, (void **)&b.map), VK_SUCCESS);
    if (init)
        memcpy(b.map, init, size);
    else
        memset(b.map, fill, size);
    return b;
}

static void vb_free(vbuf *b)
{
    vkUnmapMemory(dev, b->mem);
    vkDestroyBuffer(dev, b->buf, NULL);
    vkFreeMemory(dev, b->mem, NULL);
}

static ropeqk_vulkan_mem mem_of(const vbuf *b) { return (ropeqk_vulkan_mem){b->buf, 0, b->size}; }

static VkCommandBuffer cmd_begin(void)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer c;
    cr_assert_eq(vkAllocateCommandBuffers(dev, &ai, &c), VK_SUCCESS);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    cr_assert_eq(vkBeginCommandBuffer(c, &bi), VK_SUCCESS);
    return c;
}

/* The caller's barrier (shader writes -> host reads), submit, wait. */
static void cmd_submit(VkCommandBuffer c)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
    cr_assert_eq(vkEndCommandBuffer(c), VK_SUCCESS);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c};
    cr_assert_eq(vkQueueSubmit(queue, 1, &si, fence), VK_SUCCESS);
    cr_assert_eq(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
    vkResetFences(dev, 1, &fence);
    vkFreeCommandBuffers(dev, pool, 1, &c);
}

/* ---- a paged problem: shuffled pages, ragged lengths, random data ------------------------------ */
#define MAXS 8

typedef struct {
    const char *name;
    int64_t Hq, Hkv, D, Dv, ps, n_seqs, max_seqs, maxp, spare_pages, len_max, kpos_span, q_ahead;
    int64_t lens[MAXS]; /* 0: drawn from [1, len_max] */
    ropeqk_dtype qdt, kdt, vdt, odt;
    bool bshd, with_lse;
    ropeqk_params p;
    double tol; /* 0: 1e-5 */
} pcase;

typedef struct {
    ropeqk_tensor tq, tk, tv, to, tl;
    unsigned char *q, *k, *v;
    int64_t num_pages;
    int32_t *table, lens[MAXS], qpos[MAXS], kpos0[MAXS];
} pdata;

static size_t off4(const ropeqk_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (size_t)(a * t->nb[0] + b * t->nb[1] + c * t->nb[2] + d * t->nb[3]);
}

/* A random value in (-1, 1) exactly representable in t (the OpenCL test's rule). */
static void put_random(void *p, ropeqk_dtype t, uint64_t *rng)
{
    uint64_t r = th_rand(rng);
    if (t == ROPEQK_F16) {
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((9 + (r >> 1) % 6) << 10) | ((r >> 8) & 0x3ff));
        memcpy(p, &h, 2);
    } else if (t == ROPEQK_BF16) {
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((121 + (r >> 1) % 6) << 7) | ((r >> 8) & 0x7f));
        memcpy(p, &h, 2);
    } else {
        float f = (float)th_uniform(rng);
        memcpy(p, &f, 4);
    }
}

static ropeqk_tensor cache_view(const pcase *c, ropeqk_dtype dt, int64_t pages, int64_t dim)
{
    return c->bshd ? ropeqk_tensor_bshd(dt, pages, c->ps, c->Hkv, dim) : ropeqk_tensor_bhsd(dt, pages, c->Hkv, c->ps, dim);
}

static void pdata_make(const pcase *c, pdata *d, uint64_t *rng)
{
    memset(d, 0, sizeof *d);
    int64_t total = 0;
    for (int64_t s = 0; s < c->n_seqs; s++) {
        d->lens[s] = (int32_t)(c->lens[s] ? c->lens[s] : 1 + (int64_t)(th_rand(rng) % (uint64_t)c->len_max));
        total += (d->lens[s] + c->ps - 1) / c->ps;
    }
    d->num_pages = total + c->spare_pages;
    int32_t *perm = malloc((size_t)d->num_pages * sizeof *perm);
    for (int64_t i = 0; i < d->num_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = d->num_pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(th_rand(rng) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    d->table = malloc((size_t)(c->max_seqs * c->maxp) * sizeof *d->table);
    for (int64_t i = 0; i < c->max_seqs * c->maxp; i++)
        d->table[i] = -12345; /* entries past a sequence's pages: never read */
    int64_t at = 0;
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t i = 0; i < (d->lens[s] + c->ps - 1) / c->ps; i++)
            d->table[s * c->maxp + i] = perm[at++];
    free(perm);
    for (int64_t s = 0; s < c->n_seqs; s++) {
        d->kpos0[s] = (int32_t)(c->kpos_span ? th_rand(rng) % (uint64_t)(c->kpos_span + 1) : 0);
        d->qpos[s] = d->kpos0[s] + d->lens[s] - 1 + (int32_t)c->q_ahead;
    }
    d->tq = ropeqk_tensor_bhsd(c->qdt, c->max_seqs, c->Hq, 1, c->D);
    d->tk = cache_view(c, c->kdt, d->num_pages, c->D);
    d->tv = cache_view(c, c->vdt, d->num_pages, c->Dv);
    d->to = ropeqk_tensor_bhsd(c->odt, c->max_seqs, c->Hq, 1, c->Dv);
    d->tl = ropeqk_tensor_bhsd(ROPEQK_F32, c->max_seqs, c->Hq, 1, 1);
    size_t qb = ropeqk_tensor_extent(&d->tq), kb = ropeqk_tensor_extent(&d->tk), vb = ropeqk_tensor_extent(&d->tv);
    d->q = malloc(qb), d->k = malloc(kb), d->v = malloc(vb);
    memset(d->k, 0xFF, kb);
    memset(d->v, 0xFF, vb);
    size_t qes = ropeqk_dtype_size(c->qdt);
    for (size_t i = 0; i < qb / qes; i++)
        put_random(d->q + i * qes, c->qdt, rng);
    for (int64_t s = 0; s < c->n_seqs; s++)
        for (int64_t j = 0; j < d->lens[s]; j++) {
            int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
            for (int64_t h = 0; h < c->Hkv; h++) {
                for (int64_t i = 0; i < c->D; i++)
                    put_random(d->k + off4(&d->tk, page, h, slot, i), c->kdt, rng);
                for (int64_t i = 0; i < c->Dv; i++)
                    put_random(d->v + off4(&d->tv, page, h, slot, i), c->vdt, rng);
            }
        }
}

static void pdata_free(pdata *d) { free(d->q), free(d->k), free(d->v), free(d->table); }

static ropeqk_paged_batch batch_of(const pcase *c, pdata *d)
{
    return (ropeqk_paged_batch){c->n_seqs, d->table, d->lens, d->qpos, d->kpos0};
}

static ropeqk_plan *plan_of(const pcase *c, const pdata *d, uint64_t seed)
{
    ropeqk_plan_desc desc = {.op = ROPEQK_OP_PAGED_DECODE, .params = c->p, .q = d->tq, .k = d->tk, .v = d->tv,
                             .out = d->to, .lse = d->tl, .with_lse = c->with_lse,
                             .paged = {.page_size = c->ps, .max_pages_per_seq = c->maxp, .max_seqs = c->max_seqs}};
    ropeqk_plan *pl = NULL;
    ropeqk_status st = ropeqk_plan_create(ctx, &desc, &pl);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): plan: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    return pl;
}

/* Checks out / lse (host copies of the device buffers) against ropeqk_attention_ref, sequence by
 * sequence: keys gathered from the pages into dense [1, Hkv, len, D] views of the cache's dtype. */
static void check_against_ref(const pcase *c, const pdata *d, const unsigned char *out, const unsigned char *lse,
                              uint64_t seed)
{
    double worst = 0, worst_lse = 0;
    int64_t mism = 0;
    size_t kes = ropeqk_dtype_size(c->kdt), ves = ropeqk_dtype_size(c->vdt);
    for (int64_t s = 0; s < c->n_seqs; s++) {
        int64_t len = d->lens[s];
        ropeqk_tensor tk = ropeqk_tensor_bhsd(c->kdt, 1, c->Hkv, len, c->D);
        ropeqk_tensor tv = ropeqk_tensor_bhsd(c->vdt, 1, c->Hkv, len, c->Dv);
        ropeqk_tensor tq = d->tq, to = d->to, tl = d->tl;
        tq.ne[0] = to.ne[0] = tl.ne[0] = 1;
        ropeqk_tensor o64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, 1, c->Dv);
        ropeqk_tensor l64 = ropeqk_tensor_bhsd(ROPEQK_F64, 1, c->Hq, 1, 1);
        unsigned char *k = malloc((size_t)(c->Hkv * len * c->D) * kes), *v = malloc((size_t)(c->Hkv * len * c->Dv) * ves);
        int32_t *kpos = malloc((size_t)len * sizeof *kpos);
        double *ro = malloc((size_t)(c->Hq * c->Dv) * sizeof *ro), *rl = malloc((size_t)c->Hq * sizeof *rl);
        for (int64_t j = 0; j < len; j++) {
            int64_t page = d->table[s * c->maxp + j / c->ps], slot = j % c->ps;
            kpos[j] = d->kpos0[s] + (int32_t)j;
            for (int64_t h = 0; h < c->Hkv; h++) {
                memcpy(k + off4(&tk, 0, h, j, 0), d->k + off4(&d->tk, page, h, slot, 0), (size_t)c->D * kes);
                memcpy(v + off4(&tv, 0, h, j, 0), d->v + off4(&d->tv, page, h, slot, 0), (size_t)c->Dv * ves);
            }
        }
        ropeqk_status st = ropeqk_attention_ref(&c->p, &tq, d->q + s * d->tq.nb[0], &tk, k, &tv, v, &d->qpos[s], kpos,
                                                &o64, ro, &l64, rl);
        cr_assert_eq(st, ROPEQK_SUCCESS, "reference: %s: %s", ropeqk_status_string(st), ropeqk_last_error());
        double e = 0, el = 0;
        int64_t mm = 0;
        st = ropeqk_attention_max_error(&tv, v, &to, out + s * d->to.nb[0], &o64, ro, c->with_lse ? &tl : NULL,
                                        c->with_lse ? lse + s * d->tl.nb[0] : NULL, c->with_lse ? &l64 : NULL,
                                        c->with_lse ? rl : NULL, &e, &el, &mm);
        cr_assert_eq(st, ROPEQK_SUCCESS, "metric: %s", ropeqk_last_error());
        worst = fmax(worst, e), worst_lse = fmax(worst_lse, el), mism += mm;
        free(k), free(v), free(kpos), free(ro), free(rl);
    }
    double tol = c->tol > 0 ? c->tol : 1e-5;
    printf("%s (seed %llu): max error %.3g, LSE %.3g\n", c->name, (unsigned long long)seed, worst, worst_lse);
    cr_expect(worst <= tol, "%s (seed %llu): max |O - O64| / max ||V||_inf = %.3g > %g", c->name,
              (unsigned long long)seed, worst, tol);
    cr_expect(worst_lse <= 1e-5, "%s (seed %llu): LSE relative error %.3g", c->name, (unsigned long long)seed,
              worst_lse);
    cr_expect_eq(mism, 0, "%s (seed %llu): %lld NaN or -inf mismatches", c->name, (unsigned long long)seed,
                 (long long)mism);
}

/* Decode on the device, then the reference; rows past n_seqs (and the LSE without with_lse) untouched. */
static void run_case(const pcase *c, uint64_t seed)
{
    uint64_t rng = seed;
    pdata d;
    pdata_make(c, &d, &rng);
    ropeqk_plan *pl = plan_of(c, &d, seed);
    vbuf q = vb_make(ropeqk_tensor_extent(&d.tq), d.q, 0), k = vb_make(ropeqk_tensor_extent(&d.tk), d.k, 0);
    vbuf v = vb_make(ropeqk_tensor_extent(&d.tv), d.v, 0), o = vb_make(ropeqk_tensor_extent(&d.to), NULL, 0x5A);
    vbuf l = vb_make(ropeqk_tensor_extent(&d.tl), NULL, 0x5A);
    ropeqk_vulkan_paged_args a = {mem_of(&q), mem_of(&k), mem_of(&v), mem_of(&o),
                                  c->with_lse ? mem_of(&l) : (ropeqk_vulkan_mem){0}};
    ropeqk_paged_batch b = batch_of(c, &d);
    VkCommandBuffer cmd = cmd_begin();
    ropeqk_status st = ropeqk_vulkan_paged_record(pl, cmd, &a, &b);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): record: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    cmd_submit(cmd);
    check_against_ref(c, &d, o.map, l.map, seed);
    for (size_t i = (size_t)c->n_seqs * (size_t)d.to.nb[0]; i < o.size; i++)
        cr_assert_eq(o.map[i], 0x5A, "%s: output byte %zu past the batch written", c->name, i);
    for (size_t i = 0; !c->with_lse && i < l.size; i++)
        cr_assert_eq(l.map[i], 0x5A, "%s: LSE written without with_lse", c->name);
    vb_free(&q), vb_free(&k), vb_free(&v), vb_free(&o), vb_free(&l);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

static pcase base_case(const char *name)
{
    pcase c;
    memset(&c, 0, sizeof c);
    c.name = name;
    ropeqk_default_params(&c.p);
    c.Hq = 8, c.Hkv = 2, c.D = 64, c.Dv = 64, c.ps = 16, c.n_seqs = 5, c.max_seqs = 6, c.maxp = 200;
    c.spare_pages = 7, c.len_max = 3000, c.with_lse = true, c.qdt = c.kdt = c.vdt = c.odt = ROPEQK_F32;
    c.kpos_span = 100;
    return c;
}

/* ---- decode ------------------------------------------------------------------------------------ */
Test(vk_paged, f32_interleaved_gqa_causal_pages16)
{
    pcase c = base_case("f32 interleaved GQA 8/2 causal ps16");
    int64_t lens[] = {1, 17, 3000, 300, 1023};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1, c.q_ahead = 3;
    run_case(&c, test_seed());
}

/* One long sequence (the bench's shape, shortened to 32k): on a 2-core lavapipe it got one split of
 * 32768 keys, past llvmpipe's loop limit, and came out wrong with no error (LSE off by 0.1); splits
 * now stop at RQ_VK_PG_MAX_KEYS keys, or fewer where vk_paged.c's count of paged.comp's loop trips
 * says so (measured: the count is llvmpipe's own to within a trip a tile). */
Test(vk_paged, one_long_sequence_32k_keys)
{
    pcase c = base_case("f16 one sequence of 32768 keys, Hq 32 / Hkv 8, D 128, ps 16");
    c.Hq = 32, c.Hkv = 8, c.D = 128, c.Dv = 128, c.ps = 16, c.n_seqs = 1, c.max_seqs = 1, c.maxp = 2048;
    c.spare_pages = 3, c.lens[0] = 32768, c.p.causal = 1;
    c.qdt = c.kdt = c.vdt = ROPEQK_F16, c.tol = 1e-3;
    run_case(&c, test_seed());
}

/* positions up to 2^20 and anywhere up to INT32_MAX (the accurate angle of glsl/angle.glsl): cached keys
 * start anywhere in [0, kpos_span] */
Test(vk_paged, positions_to_2_20_and_across_int32)
{
    pcase c = base_case("f32 positions near 2^20");
    int64_t lens[] = {700, 33, 2000};
    memcpy(c.lens, lens, sizeof lens);
    c.n_seqs = c.max_seqs = 3;
    c.kpos_span = 1 << 20;
    c.p.causal = 1;
    uint64_t seed = test_seed();
    run_case(&c, seed);
    c.name = "f16 half-split positions anywhere up to INT32_MAX";
    c.kpos_span = INT32_MAX - 2100;
    c.qdt = c.kdt = c.vdt = ROPEQK_F16, c.p.layout = ROPEQK_HALF_SPLIT, c.tol = 1e-3;
    run_case(&c, seed + 1);
}

/* half-split, partial rotary, BSHD caches, Dv != D, pages of 64, no mask */
Test(vk_paged, f32_half_split_partial_rotary_bshd_pages64)
{
    pcase c = base_case("f32 half-split R=96 Dv=40 bshd ps64");
    c.Hq = 4, c.Hkv = 4, c.D = 128, c.Dv = 40, c.ps = 64, c.maxp = 64, c.bshd = true;
    int64_t lens[] = {4000, 1, 64, 65, 2500};
    memcpy(c.lens, lens, sizeof lens);
    c.p.layout = ROPEQK_HALF_SPLIT, c.p.rotary_dim = 96;
    run_case(&c, test_seed() + 1);
}

/* the benchmark's shape (Hq 32 / Hkv 8, D 128), f16 everywhere: f16 output's bound */
Test(vk_paged, f16_gqa32_8_d128_f16_out)
{
    pcase c = base_case("f16 Q/K/V/out GQA 32/8 D=128 ps32");
    c.Hq = 32, c.Hkv = 8, c.D = 128, c.Dv = 128, c.ps = 32, c.n_seqs = 3, c.max_seqs = 4, c.maxp = 100;
    c.qdt = c.kdt = c.vdt = c.odt = ROPEQK_F16, c.tol = 1e-3, c.p.causal = 1;
    run_case(&c, test_seed() + 2);
}

/* bf16 K / f16 V / bf16 Q, conjugate, window + causal, f16 and bf16 outputs */
Test(vk_paged, bf16_f16_caches_window_half_outputs)
{
    ropeqk_dtype outs[] = {ROPEQK_F16, ROPEQK_BF16};
    double tols[] = {1e-3, 5e-3};
    for (int i = 0; i < 2; i++) {
        pcase c = base_case(i ? "bf16 K f16 V window, bf16 out" : "bf16 K f16 V window, f16 out");
        c.Hq = 6, c.Hkv = 2, c.Dv = 32, c.ps = 32, c.maxp = 100, c.n_seqs = 4;
        c.kdt = ROPEQK_BF16, c.vdt = ROPEQK_F16, c.qdt = ROPEQK_BF16, c.odt = outs[i], c.tol = tols[i];
        c.p.conjugate = 1, c.p.causal = 1, c.p.window = 700;
        run_case(&c, test_seed() + 3 + (uint64_t)i);
    }
}

/* MQA with 40 query heads (5 chunks of 8), Dv 300 (two V chunks); MHA of 40 heads */
Test(vk_paged, mqa_40_heads_dv300)
{
    pcase c = base_case("MQA Hq=40 D=32 Dv=300 ps32");
    c.Hq = 40, c.Hkv = 1, c.D = 32, c.Dv = 300, c.ps = 32, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 40;
    int64_t lens[] = {700, 3};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    run_case(&c, test_seed() + 5);
    c.name = "MHA Hq=Hkv=40 D=32 Dv=24", c.Hkv = 40, c.Dv = 24;
    run_case(&c, test_seed() + 6);
}

/* wide heads: paged.comp stages fewer rotary units of K per chunk (16, 8) so that the staged query
 * heads fit 32 KiB of shared memory, and at D 1000 takes 5 of the 8 heads per task (two head chunks);
 * partial rotary there, so chunks mix rotary pairs and pass-through dims */
Test(vk_paged, wide_heads_narrow_key_chunks)
{
    pcase c = base_case("GQA 8/1 D=512 ps16");
    c.Hq = 8, c.Hkv = 1, c.D = 512, c.Dv = 64, c.ps = 16, c.n_seqs = 2, c.max_seqs = 2, c.maxp = 40;
    int64_t lens[] = {600, 77};
    memcpy(c.lens, lens, sizeof lens);
    c.p.causal = 1;
    run_case(&c, test_seed() + 20);
    c.name = "GQA 8/1 D=1000 R=200 half-split ps16", c.D = 1000, c.Dv = 100;
    c.p.layout = ROPEQK_HALF_SPLIT, c.p.rotary_dim = 200;
    run_case(&c, test_seed() + 21);
}

/* rows whose every key is masked (O = 0, LSE = -inf); a plan without LSE leaves it untouched */
Test(vk_paged, fully_masked_rows_and_no_lse)
{
    pcase c = base_case("all keys in the future (causal)");
    c.n_seqs = 3, c.len_max = 400, c.p.causal = 1, c.q_ahead = -500;
    run_case(&c, test_seed() + 7);
    c.name = "no LSE, batch smaller than max_seqs", c.q_ahead = 0, c.with_lse = false, c.max_seqs = 7;
    run_case(&c, test_seed() + 8);
}

/* ---- append -------------------------------------------------------------------------------------
 * The caches hold every token but the last n_new of each sequence (0xFF there); the append writes
 * those from k_new / v_new; the caches must then equal the directly written ones byte for byte, and
 * a decode over them pass the reference. new_off: byte offset of k_new/v_new in their buffers (2:
 * 16-bit rows that are not word-aligned, the shader's half path). */
static void run_append(pcase *c, int64_t n_new, size_t new_off, uint64_t seed)
{
    uint64_t rng = seed;
    pdata d;
    pdata_make(c, &d, &rng);
    ropeqk_plan *pl = plan_of(c, &d, seed);
    size_t kb = ropeqk_tensor_extent(&d.tk), vb = ropeqk_tensor_extent(&d.tv);
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(c->kdt, c->n_seqs, c->Hkv, n_new, c->D);
    ropeqk_tensor tvn = ropeqk_tensor_bhsd(c->vdt, c->n_seqs, c->Hkv, n_new, c->Dv);
    size_t knb = ropeqk_tensor_extent(&tkn), vnb = ropeqk_tensor_extent(&tvn);
    vbuf k = vb_make(kb, d.k, 0), v = vb_make(vb, d.v, 0);
    /* 16-bit views are read a word at a time: the range covers the word of the last element */
    vbuf kn = vb_make(knb + 4, NULL, 0), vn = vb_make(vnb + 4, NULL, 0);
    size_t kes = ropeqk_dtype_size(c->kdt), ves = ropeqk_dtype_size(c->vdt);
    int32_t before[MAXS];
    for (int64_t s = 0; s < c->n_seqs; s++) {
        before[s] = d.lens[s] - (int32_t)n_new;
        for (int64_t t = 0; t < n_new; t++) {
            int64_t j = before[s] + t, page = d.table[s * c->maxp + j / c->ps], slot = j % c->ps;
            for (int64_t h = 0; h < c->Hkv; h++) {
                memcpy(kn.map + new_off + off4(&tkn, s, h, t, 0), d.k + off4(&d.tk, page, h, slot, 0), c->D * kes);
                memcpy(vn.map + new_off + off4(&tvn, s, h, t, 0), d.v + off4(&d.tv, page, h, slot, 0), c->Dv * ves);
                memset(k.map + off4(&d.tk, page, h, slot, 0), 0xFF, c->D * kes);
                memset(v.map + off4(&d.tv, page, h, slot, 0), 0xFF, c->Dv * ves);
            }
        }
    }
    ropeqk_paged_batch b = {c->n_seqs, d.table, before, NULL, NULL};
    ropeqk_vulkan_mem knm = {kn.buf, new_off, kn.size - new_off}, vnm = {vn.buf, new_off, vn.size - new_off};
    VkCommandBuffer cmd = cmd_begin();
    ropeqk_status st = ropeqk_vulkan_paged_append(pl, cmd, &tkn, knm, &tvn, vnm, mem_of(&k), mem_of(&v), &b);
    cr_assert_eq(st, ROPEQK_SUCCESS, "%s (seed %llu): append: %s: %s", c->name, (unsigned long long)seed,
                 ropeqk_status_string(st), ropeqk_last_error());
    cmd_submit(cmd);
    cr_expect(memcmp(k.map, d.k, kb) == 0, "%s (seed %llu): K cache after the append differs", c->name,
              (unsigned long long)seed);
    cr_expect(memcmp(v.map, d.v, vb) == 0, "%s (seed %llu): V cache after the append differs", c->name,
              (unsigned long long)seed);
    printf("%s (seed %llu): append of %lld tokens checked byte for byte\n", c->name, (unsigned long long)seed,
           (long long)n_new);
    vb_free(&k), vb_free(&v), vb_free(&kn), vb_free(&vn);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}

Test(vk_paged, append_words_and_halves)
{
    pcase c = base_case("append f32, 3 tokens crossing pages");
    int64_t lens[] = {20, 33, 3, 16, 17};
    memcpy(c.lens, lens, sizeof lens);
    run_append(&c, 3, 0, test_seed() + 9);
    c.name = "append f16 K, bf16 V (words)", c.kdt = ROPEQK_F16, c.vdt = ROPEQK_BF16, c.Dv = 30;
    run_append(&c, 3, 0, test_seed() + 10);
    c.name = "append f16 K, bf16 V, rows at byte offset 2 (halves)", c.bshd = true;
    run_append(&c, 2, 2, test_seed() + 11);
}

/* ---- invalid batches: the specific status, nothing recorded (the output keeps its bytes) ------- */
Test(vk_paged, invalid_batches)
{
    pcase c = base_case("invalid batches");
    c.n_seqs = 3, c.maxp = 8, c.ps = 16;
    int64_t lens[] = {40, 20, 5};
    memcpy(c.lens, lens, sizeof lens);
    uint64_t rng = test_seed() + 12;
    pdata d;
    pdata_make(&c, &d, &rng);
    ropeqk_plan *pl = plan_of(&c, &d, test_seed() + 12);
    vbuf q = vb_make(ropeqk_tensor_extent(&d.tq), d.q, 0), k = vb_make(ropeqk_tensor_extent(&d.tk), d.k, 0);
    vbuf v = vb_make(ropeqk_tensor_extent(&d.tv), d.v, 0), o = vb_make(ropeqk_tensor_extent(&d.to), NULL, 0x5A);
    vbuf l = vb_make(ropeqk_tensor_extent(&d.tl), NULL, 0x5A);
    ropeqk_vulkan_paged_args a = {mem_of(&q), mem_of(&k), mem_of(&v), mem_of(&o), mem_of(&l)};
    int32_t tab[3 * 8], len[3], qp[3], kp[3];
    struct {
        const char *what;
        ropeqk_status want;
    } cases[] = {
        {"page -1", ROPEQK_ERR_PAGE_RANGE},          {"page num_pages", ROPEQK_ERR_PAGE_RANGE},
        {"page twice in a row", ROPEQK_ERR_PAGE_DUPLICATE}, {"length 0", ROPEQK_ERR_SEQ_LENGTH},
        {"length past capacity", ROPEQK_ERR_SEQ_LENGTH},   {"n_seqs 0", ROPEQK_ERR_BAD_PARAM},
        {"n_seqs > max_seqs", ROPEQK_ERR_BAD_PARAM},       {"no q_pos", ROPEQK_ERR_NULL_POINTER},
        {"last key position past INT32_MAX", ROPEQK_ERR_POSITION_RANGE},
        {"lse buffer too small", ROPEQK_ERR_BUFFER_TOO_SMALL}, {"out overlaps q", ROPEQK_ERR_OVERLAP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(tab, d.table, sizeof tab), memcpy(len, d.lens, sizeof len);
        memcpy(qp, d.qpos, sizeof qp), memcpy(kp, d.kpos0, sizeof kp);
        ropeqk_paged_batch b = {3, tab, len, qp, kp};
        ropeqk_vulkan_paged_args aa = a;
        switch (i) {
        case 0: tab[8 + 1] = -1; break;
        case 1: tab[2] = (int32_t)d.num_pages; break;
        case 2: tab[2] = tab[0]; break;
        case 3: len[1] = 0; break;
        case 4: len[2] = 8 * 16 + 1; break;
        case 5: b.n_seqs = 0; break;
        case 6: b.n_seqs = 7; break;
        case 7: b.q_pos = NULL; break;
        case 8: kp[0] = INT32_MAX - 10; break;
        case 9: aa.lse.range = 4; break;
        case 10: aa.out = aa.q; break;
        }
        VkCommandBuffer cmd = cmd_begin();
        ropeqk_status st = ropeqk_vulkan_paged_record(pl, cmd, &aa, &b);
        cmd_submit(cmd);
        printf("invalid batch, %s: %s (%s)\n", cases[i].what, ropeqk_status_string(st), ropeqk_last_error());
        cr_expect_eq(st, cases[i].want, "%s: %s, expected %s", cases[i].what, ropeqk_status_string(st),
                     ropeqk_status_string(cases[i].want));
        for (size_t j = 0; j < o.size; j++)
            cr_assert_eq(o.map[j], 0x5A, "%s: output written", cases[i].what);
        for (size_t j = 0; j < l.size; j++)
            cr_assert_eq(l.map[j], 0x5A, "%s: lse written", cases[i].what);
    }
    /* append: a page written for two sequences, a length past capacity; the caches keep their bytes */
    ropeqk_tensor tkn = ropeqk_tensor_bhsd(c.kdt, 3, c.Hkv, 2, c.D), tvn = ropeqk_tensor_bhsd(c.vdt, 3, c.Hkv, 2, c.Dv);
    vbuf kn = vb_make(ropeqk_tensor_extent(&tkn), NULL, 0), vn = vb_make(ropeqk_tensor_extent(&tvn), NULL, 0);
    for (int i = 0; i < 2; i++) {
        memcpy(tab, d.table, sizeof tab), memcpy(len, d.lens, sizeof len);
        if (i == 0)
            tab[8 + 1] = tab[2]; /* token 20..21 of seq 1 and 40..41 of seq 0 on one page */
        else
            len[0] = 8 * 16 - 1;
        ropeqk_paged_batch b = {3, tab, len, NULL, NULL};
        VkCommandBuffer cmd = cmd_begin();
        ropeqk_status st = ropeqk_vulkan_paged_append(pl, cmd, &tkn, mem_of(&kn), &tvn, mem_of(&vn), mem_of(&k),
                                                      mem_of(&v), &b);
        cmd_submit(cmd);
        ropeqk_status want = i == 0 ? ROPEQK_ERR_PAGE_DUPLICATE : ROPEQK_ERR_SEQ_LENGTH;
        printf("invalid append %d: %s (%s)\n", i, ropeqk_status_string(st), ropeqk_last_error());
        cr_expect_eq(st, want, "append %d: %s", i, ropeqk_status_string(st));
        cr_expect(memcmp(k.map, d.k, k.size) == 0 && memcmp(v.map, d.v, v.size) == 0, "append %d wrote", i);
    }
    vb_free(&q), vb_free(&k), vb_free(&v), vb_free(&o), vb_free(&l), vb_free(&kn), vb_free(&vn);
    ropeqk_plan_destroy(pl);
    pdata_free(&d);
}
