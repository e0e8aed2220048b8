/* The attention reference path (fp64) and the attention metric: not implemented yet. */
#include "internal.h"

ropeqk_status ropeqk_attention_ref(const ropeqk_params *p, const ropeqk_tensor *q, const void *q_data,
                                   const ropeqk_tensor *k, const void *k_data, const ropeqk_tensor *v,
                                   const void *v_data, const int32_t *q_pos, const int32_t *k_pos,
                                   const ropeqk_tensor *out, void *out_data, const ropeqk_tensor *lse, void *lse_data)
{
    (void)p, (void)q, (void)q_data, (void)k, (void)k_data, (void)v, (void)v_data, (void)q_pos, (void)k_pos,
        (void)out, (void)out_data, (void)lse, (void)lse_data;
    return ROPEQK_ERR_BAD_PARAM;
}

ropeqk_status ropeqk_attention_max_error(const ropeqk_tensor *v, const void *v_data, const ropeqk_tensor *out,
                                         const void *out_data, const ropeqk_tensor *out64, const void *out64_data,
                                         const ropeqk_tensor *lse, const void *lse_data, const ropeqk_tensor *lse64,
                                         const void *lse64_data, double *max_err, double *max_lse_rel,
                                         int64_t *mismatch)
{
    (void)v, (void)v_data, (void)out, (void)out_data, (void)out64, (void)out64_data, (void)lse, (void)lse_data,
        (void)lse64, (void)lse64_data, (void)max_err, (void)max_lse_rel, (void)mismatch;
    return ROPEQK_ERR_BAD_PARAM;
}
