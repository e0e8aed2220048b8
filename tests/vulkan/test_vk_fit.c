/* The Vulkan attention shader's shape against a device's limits (src/vulkan/vk_attn.c), on made-up
 * limits: the tuned rows per work-group where the device has room, the widest key tile that fits,
 * the fallbacks down to Vulkan's minimum of 16 KiB of shared memory, the work-group size limits,
 * the column blocks, and the keys per dispatch (llvmpipe's loop budget). No device is opened: the
 * functions only read the context's tuning and VkPhysicalDeviceLimits. Links the library's objects,
 * as test_tiled_fit does. */
#include "vk.h"

#include <criterion/criterion.h>
#include <string.h>

static struct rq_vk_ctx vk;
static ropeqk_ctx ctx;

static void device(uint32_t shared, uint32_t invocations, int vk_rows)
{
    memset(&vk, 0, sizeof vk);
    memset(&ctx, 0, sizeof ctx);
    VkPhysicalDeviceLimits *l = &vk.props.limits;
    l->maxComputeSharedMemorySize = shared;
    l->maxComputeWorkGroupInvocations = invocations;
    l->maxComputeWorkGroupSize[0] = invocations;
    l->maxComputeWorkGroupCount[0] = l->maxComputeWorkGroupCount[1] = 65535;
    ctx.impl = &vk;
    ctx.tune.vk_rows = vk_rows;
}

static rq_vk_attn_shape pick(int64_t Dv)
{
    rq_vk_attn_shape s;
    memset(&s, 0, sizeof s);
    cr_assert(rq_vk_attn_pick(&ctx, Dv, &s), "no shape");
    /* what the shader's constants require of any shape */
    cr_expect_eq(s.tx, s.bn / RQ_VK_AT_RN);
    cr_expect_eq(s.ty, s.bm / RQ_VK_AT_RM);
    cr_expect_eq(s.nt, s.tx * s.ty);
    cr_expect(s.cv >= 1 && s.cv <= RQ_VK_AT_CVMAX);
    cr_expect(s.ncb * 4 * s.tx * s.cv >= Dv && (s.ncb - 1) * 4 * s.tx * s.cv < Dv, "column blocks %d", s.ncb);
    cr_expect_leq(RQ_VK_AT_SHARED(s.bm, s.bn, s.cv), (int)vk.props.limits.maxComputeSharedMemorySize);
    cr_expect_leq((uint32_t)s.nt, vk.props.limits.maxComputeWorkGroupInvocations);
    return s;
}

Test(vk_fit, lavapipe_32k_takes_every_row_count)
{
    static const int rows[] = {32, 64, 128}, keys[] = {64, 64, 32};
    for (int i = 0; i < 3; i++) {
        device(32768, 1024, rows[i]);
        rq_vk_attn_shape s = pick(128);
        cr_expect(s.bm == rows[i] && s.bn == keys[i], "rows %d: %d x %d", rows[i], s.bm, s.bn);
        cr_expect(rq_vk_attn_rows_fit(&ctx, rows[i], 256));
    }
}

Test(vk_fit, wider_key_tiles_where_the_device_has_room)
{
    device(49152, 1024, 128); /* 48 KiB (NVIDIA): 128 x 64 needs 51 KiB */
    rq_vk_attn_shape s = pick(128);
    cr_expect(s.bm == 128 && s.bn == 32, "%d x %d", s.bm, s.bn);
    device(65536, 1024, 128); /* 64 KiB (AMD) */
    s = pick(128);
    cr_expect(s.bm == 128 && s.bn == 64 && s.nt == 512, "%d x %d, %d", s.bm, s.bn, s.nt);
}

Test(vk_fit, small_devices_fall_back)
{
    device(16384, 1024, 128); /* Vulkan's minimum shared memory: 128 rows do not fit, 64 by 32 keys do */
    rq_vk_attn_shape s = pick(128);
    cr_expect(s.bm == 64 && s.bn == 32, "%d x %d", s.bm, s.bn);
    cr_expect_not(rq_vk_attn_rows_fit(&ctx, 128, 128));
    device(12288, 1024, 64); /* 12 KiB: only the smallest, 32 x 32 */
    s = pick(128);
    cr_expect(s.bm == 32 && s.bn == 32, "%d x %d", s.bm, s.bn);
    device(32768, 128, 64); /* 128 invocations at most: 64 rows with 32-key tiles */
    s = pick(128);
    cr_expect(s.bm == 64 && s.bn == 32 && s.nt == 128, "%d x %d, %d", s.bm, s.bn, s.nt);
    device(8192, 1024, 64); /* below Vulkan's minimum: nothing fits, and the plan says so */
    rq_vk_attn_shape none;
    cr_expect_not(rq_vk_attn_pick(&ctx, 128, &none));
}

Test(vk_fit, column_blocks_and_key_chunks)
{
    device(32768, 1024, 64);
    rq_vk_attn_shape s = pick(256);
    cr_expect(s.cv == 2 && s.ncb == 2, "Dv 256: cv %d, %d blocks", s.cv, s.ncb);
    s = pick(3);
    cr_expect(s.cv == 1 && s.ncb == 1, "Dv 3: cv %d, %d blocks", s.cv, s.ncb);
    s = pick(128);
    /* the figures of vk_attn.c's comment: 25216 keys a dispatch at D 128, 17024 at D 256 */
    cr_expect_eq(rq_vk_attn_chunk_keys(128, &s), 25216);
    rq_vk_attn_shape s2 = pick(256);
    cr_expect_eq(rq_vk_attn_chunk_keys(256, &s2), 17024);
    for (int64_t D = 2; D <= 4096; D *= 2)
        cr_expect_eq(rq_vk_attn_chunk_keys(D, &s) % s.bn, 0, "D %lld", (long long)D);
}
