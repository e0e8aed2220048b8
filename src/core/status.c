/* Status strings, the version, and the thread's last error message (backend error names are each
 * backend's: error_name in its table). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

/* The message of the last failure in this thread (errno-like: successful calls leave it alone). */
static _Thread_local char last_error[1024];

void rq_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *ropeqk_last_error(void) { return last_error; }

const char *ropeqk_version(void) { return ROPEQK_VERSION_STRING; }

const char *ropeqk_status_string(int s)
{
    switch ((ropeqk_status)s) {
    case ROPEQK_SUCCESS: return "success";
    case ROPEQK_ERR_NULL_POINTER: return "a required pointer argument is NULL";
    case ROPEQK_ERR_BAD_SHAPE: return "bad shape: sizes must be >= 1 and B, D must agree between Q, K and scores";
    case ROPEQK_ERR_BAD_ROTARY_DIM: return "bad rotary dim: must be even, >= 2 and <= head dim";
    case ROPEQK_ERR_BAD_HEADS: return "query heads must be a multiple of key/value heads";
    case ROPEQK_ERR_BAD_STRIDES: return "bad strides: must be non-negative multiples of the element size, head dim contiguous";
    case ROPEQK_ERR_OVERLAP: return "overlapping memory: a view aliases itself or the output overlaps an input";
    case ROPEQK_ERR_BUFFER_TOO_SMALL: return "a view reaches past the end of its buffer";
    case ROPEQK_ERR_OVERFLOW: return "a size or byte count overflows";
    case ROPEQK_ERR_BAD_DTYPE: return "unsupported dtype for this tensor";
    case ROPEQK_ERR_BAD_PARAM: return "bad parameter: a value outside its range, or a plan, step or call inconsistent with its description (ropeqk_last_error says which)";
    case ROPEQK_ERR_POSITION_RANGE: return "position offset + row does not fit in int32";
    case ROPEQK_ERR_NO_DEVICE: return "no device found (or none matches the device spec)";
    case ROPEQK_ERR_BUILD: return "program build failed (see ropeqk_last_error and ropeqk_ctx_build_log)";
    case ROPEQK_ERR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case ROPEQK_ERR_BAD_SCALING: return "frequency-scaling parameters missing or contradictory";
    case ROPEQK_ERR_TOO_LARGE: return "request exceeds the device's allocation limits";
    case ROPEQK_ERR_BAD_CONFIG: return "bad configuration: a tuning value or ROPEQK_* environment variable is malformed";
    case ROPEQK_ERR_BACKEND: return "the backend (OpenCL, Vulkan) failed: see ropeqk_ctx_backend_error and ropeqk_last_error";
    case ROPEQK_ERR_PAGE_RANGE: return "a page-table entry is outside the cache's pages";
    case ROPEQK_ERR_PAGE_DUPLICATE: return "a page appears twice in one sequence's page table";
    case ROPEQK_ERR_QUERY_ROWS: return "the query rows' offsets (q_indptr) are malformed: not starting at 0, not increasing, beyond max_q_rows, or more rows than cached tokens";
    case ROPEQK_ERR_SEQ_LENGTH: return "a sequence length is out of range (< 1, or beyond its pages' capacity)";
    case ROPEQK_ERR_TIMEOUT: return "a bounded wait ran out (ropeqk_last_error names what was waited for)";
    }
    return "unknown status";
}
