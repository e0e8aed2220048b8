/* Decode over a paged, unrotated KV cache (ROPEQK_OP_PAGED_DECODE): not implemented yet. */
#include "ctx.h"

ropeqk_status rq_paged_validate(const ropeqk_plan_desc *d, rq_problem *pb)
{
    (void)d;
    (void)pb;
    rq_set_error("ropeqk_plan_create: ROPEQK_OP_PAGED_DECODE is not implemented yet");
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status rq_paged_plan_init(ropeqk_plan *pl, cl_program prog)
{
    (void)pl;
    (void)prog;
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status ropeqk_opencl_paged_enqueue(ropeqk_plan *plan, cl_command_queue queue,
                                          const ropeqk_opencl_paged_args *args, const ropeqk_paged_batch *batch,
                                          cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    (void)plan, (void)queue, (void)args, (void)batch, (void)num_wait, (void)wait, (void)event;
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status ropeqk_opencl_paged_append(ropeqk_plan *plan, cl_command_queue queue, const ropeqk_tensor *k_new,
                                         ropeqk_opencl_mem k_new_mem, const ropeqk_tensor *v_new,
                                         ropeqk_opencl_mem v_new_mem, ropeqk_opencl_mem k_cache,
                                         ropeqk_opencl_mem v_cache, const ropeqk_paged_batch *batch,
                                         cl_uint num_wait, const cl_event *wait, cl_event *event)
{
    (void)plan, (void)queue, (void)k_new, (void)k_new_mem, (void)v_new, (void)v_new_mem, (void)k_cache,
        (void)v_cache, (void)batch, (void)num_wait, (void)wait, (void)event;
    return ROPEQK_ERR_BAD_PARAM;
}
