/* Fused attention (ROPEQK_OP_ATTENTION): not implemented yet. */
#include "ctx.h"

ropeqk_status rq_attn_plan_init(ropeqk_plan *pl, cl_program prog)
{
    (void)pl, (void)prog;
    rq_set_error("ROPEQK_OP_ATTENTION is not implemented yet");
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status rq_attn_enqueue(ropeqk_plan *pl, cl_command_queue queue, const ropeqk_opencl_args *args, int64_t Sk,
                              int64_t q_off, int64_t k_off, cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    (void)pl, (void)queue, (void)args, (void)Sk, (void)q_off, (void)k_off, (void)num_wait, (void)wait, (void)event;
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status ropeqk_attention(ropeqk_ctx *ctx, const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                               const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *v, const void *v_data,
                               const int32_t *q_pos, const int32_t *k_pos, const ropeqk_tensor *out, void *out_data,
                               const ropeqk_tensor *lse, float *lse_data)
{
    (void)ctx, (void)p, (void)q, (void)q_data, (void)k, (void)k_data, (void)v, (void)v_data, (void)q_pos,
        (void)k_pos, (void)out, (void)out_data, (void)lse, (void)lse_data;
    return ROPEQK_ERR_BAD_PARAM;
}
