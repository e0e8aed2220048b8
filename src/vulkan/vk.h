/* The Vulkan backend's internals (src/vulkan/): its context and plan objects behind the core's `impl`
 * pointers, and what its files share. The core reaches it only through rq_vulkan_backend's table.
 * Not installed. */
#ifndef ROPEQK_VK_H
#define ROPEQK_VK_H

#include "../core/call.h"
#include "ropeqk_vulkan.h"
#include "vk_cm_khr.h"
#include "vk_contract.h"
#include "vk_cm.h"

#include <float.h>

extern const rq_backend rq_vulkan_backend;
extern const struct rq_run_ops rq_vk_run_ops; /* vk_run.c: the neutral run API's entries */

/* The shaders embedded at build time (glsl/, compiled by glslc; rq_spirv.c is generated). */
typedef enum {
    RQ_VK_SH_ROTATE,
    RQ_VK_SH_SCORES,
    RQ_VK_SH_SCORES_FEW, /* scores for few query rows per KV head (decode) */
    RQ_VK_SH_ATTENTION, /* fused attention (vk_attn.c) */
    RQ_VK_SH_PAGED, /* paged decode: pass 1, combine, append (vk_paged.c) */
    RQ_VK_SH_PAGED_SG, /* paged.comp with subgroup reductions (where the device has them) */
    RQ_VK_SH_PAGED_COMBINE,
    RQ_VK_SH_PAGED_APPEND,
    RQ_VK_SH_PAGED_APPEND_Q8, /* the append into an 8-bit cache (quantizing) */
    RQ_VK_SH_PAGED_GATHER,    /* prefill chunks: a sequence's pages into dense K/V (vk_paged_chunk.c) */
    RQ_VK_SH_PAGED_FAST4,     /* pass 1 at memory speed, up to 4 and 8 query vectors (vk_paged_fast.c) */
    RQ_VK_SH_PAGED_FAST8,
    RQ_VK_SH_CM_SPLIT,        /* the tensor-core path (vk_cm.c): rows into f16 hi/lo planes */
    RQ_VK_SH_CM_ATTN,         /* its attention with cooperative matrices (empty where not built) */
    RQ_VK_SH_CM_ATTN_EMU,     /* the same with the products emulated by loops */
    RQ_VK_SH_CM_SCORES,
    RQ_VK_SH_CM_SCORES_EMU,
    RQ_VK_SH_COUNT
} rq_vk_shader;

typedef struct rq_vk_pipe {
    rq_vk_shader shader;
    int32_t spec[RQ_VK_NSPEC];    /* specialization constants (RQ_VK_SC_*) */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    struct rq_vk_pipe *next;
} rq_vk_pipe;

/* attention.comp's tile shape (vk_attn.c; the shader's header): BM query rows per work-group, BN keys
 * per tile, TX x TY invocations of RM x RN scores each, CV vec4 columns of O per invocation, NCB
 * column blocks of V. */
typedef struct {
    int32_t bm, bn, tx, ty, nt, cv, ncb;
} rq_vk_attn_shape;

/* The tensor-core path's facts about a device (vk_cm_dev.c), read when the context opens. */
typedef struct {
    bool real;         /* the cooperative-matrix shaders run here: built, the device lists 16x16x16
                        * f16 x f16 + f32 (subgroup scope), and its features were enabled at creation */
    bool size_ctl;     /* pipelines may require the subgroup size (VK_EXT_subgroup_size_control) */
    uint32_t sg;       /* subgroup size of the cooperative-matrix pipelines */
    char desc[400];    /* the device's matrix shapes and types, and why the path is (not) taken */
} rq_vk_cm_caps;

/* A buffer and its memory; map is non-NULL for host-visible buffers. */
typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *map;
} rq_vk_buf;

/* ctx->impl of a Vulkan context. */
struct rq_vk_ctx {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t qfam;
    bool own;                        /* instance and device were created here */
    VkDebugUtilsMessengerEXT messenger;
    atomic_uint vmsg;                /* validation messages seen */
    ropeqk_validation validation;    /* its instance's (ropeqk_ctx_diagnostics); OFF when borrowed */
    char first_msg[512];
    PFN_vkCmdPushDescriptorSetKHR push_desc;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    VkCommandPool pool;              /* host-memory calls (under qlock) */
    VkFence fence;
    pthread_mutex_t qlock;           /* the queue, pool and fence: one host call at a time */
    bool qlock_ok;
    uint64_t timeout_ns;             /* most a fence wait lasts (ROPEQK_WAIT_TIMEOUT_MS, vk_mem.c) */
    VkCommandBuffer stuck;           /* a submit whose wait timed out: the context is unusable */
    char stuck_what[128];            /* its dispatch's name */
    rq_vk_buf *dead;                 /* buffers freed while stuck: destroyed once it completes */
    size_t ndead;
    rq_vk_pipe *pipes;               /* guarded by ctx->lock */
    rq_vk_buf dummy;                 /* bound where a shader's optional buffer is absent */
    bool timeline;                   /* timelineSemaphore enabled: the neutral run API may be used */
    struct rq_vk_runq *runq;         /* its submissions (vk_submit.c), made at the first call */
    rq_vk_cm_caps cm;                /* the tensor-core path (vk_cm_dev.c) */
};

/* pl->impl of a plan on a Vulkan context: what it owns. */
struct rq_vk_plan {
    rq_vk_pipe *rot_q, *rot_k, *main; /* pipelines (owned by the context) */
    rq_vk_buf freq;                   /* vec4 per frequency: inv_freq/pi as three floats */
    rq_vk_buf qr, kr;                 /* rotated f32 scratch [B*Hq][Sq][D], [B*Hkv][Sk][D] */
    bool few;                         /* scores plan: scores_few.comp (decode-shaped) */
    int32_t tile;                     /* scores.comp: scores per work-group side (16 x the block);
                                       * attention.comp: query rows per work-group */
    rq_vk_attn_shape at;              /* attention.comp's shape (attention plans) */
    rq_vk_buf st;                     /* attention: row state between key chunks (vk_attn.c), or none */
    rq_vk_buf sinks;                  /* attention and paged decode: the plan's sink logits (Hq f32), or none */
    struct rq_vk_paged *pg;           /* paged-decode plans (vk_paged.c); qr is then [Hq][max_seqs][D];
                                       * few-row attention plans: the dense decode's (vk_dense.c), or none */
    struct rq_vk_cm *cm;              /* prefill attention and scores on the tensor-core path (vk_cm.c), or none */
};

static inline struct rq_vk_ctx *rq_vk(const ropeqk_ctx *ctx) { return (struct rq_vk_ctx *)ctx->impl; }
static inline struct rq_vk_plan *rq_vkp(const ropeqk_plan *pl) { return (struct rq_vk_plan *)pl->impl; }
/* The soft-cap C of the push constants (0 = off), as a float the shaders can use: a cap beyond 1e30
 * changes no float score by more than 1e-8 relative (tanh x = x (1 - x^2/3 ...) for the |S| < 1e26
 * that can occur) and is turned off rather than rounded to infinity (inf * tanh(S / inf) is NaN); a
 * positive cap below the smallest normal float (which a device may flush to 0, turning the cap off) is
 * raised to it: the capped scores are then within 1.2e-38 of the true ones either way. */
static inline float rq_vk_softcap(const rq_problem *pb)
{
    if (!(pb->softcap > 0.0) || pb->softcap > 1e30)
        return 0.0f;
    return pb->softcap < (double)FLT_MIN ? FLT_MIN : (float)pb->softcap;
}

/* Whether ctx is a Vulkan context (ropeqk_vulkan_*'s check, by identity). */
static inline bool rq_is_vk(const ropeqk_ctx *ctx) { return ctx && ctx->be == &rq_vulkan_backend; }

/* vk_ctx.c: the table's open and close; an instance of the library's own without validation layers
 * (listing devices, vk_devices.c; ROPEQK_ERR_NO_DEVICE with a message when there is no Vulkan driver). */
ropeqk_status rq_vk_open(ropeqk_ctx *ctx, const char *spec, bool explicit_spec, const ropeqk_tuning *tuning);
void rq_vk_close(ropeqk_ctx *ctx);
ropeqk_status rq_vk_plain_instance(VkInstance *out);
/* vk_devices.c: the backend's entries of the neutral device listing (backend.h's list_devices and
 * ctx_device_info). */
ropeqk_status rq_vk_list_devices(ropeqk_device_info *infos, uint32_t cap, uint32_t *count, const char *spec,
                                 bool explicit_spec, int32_t *pick);
ropeqk_status rq_vk_ctx_device_info(const ropeqk_ctx *ctx, ropeqk_device_info *out);
/* vk_err.c: records a failing VkResult in the context and the thread's message; returns
 * ROPEQK_ERR_BACKEND. A VkResult's name (NULL for one it does not know). */
ropeqk_status rq_vk_fail(ropeqk_ctx *ctx, VkResult r, const char *what);
const char *rq_vk_result_name(VkResult r);
/* vk_dev.c: the device extensions the backend requires (ropeqk_vulkan_device_extensions); whether a
 * device has an extension (1, 0; -1 out of memory); its first compute queue family (-1: none);
 * whether the backend can use it (1, 0; -1 out of memory); the instance's devices (at most
 * RQ_VK_MAX_DEVICES). */
#define RQ_VK_N_REQUIRED 1u
#define RQ_VK_MAX_DEVICES 16
extern const char *const rq_vk_required_ext[RQ_VK_N_REQUIRED];
int rq_vk_has_device_ext(VkPhysicalDevice pd, const char *name);
int rq_vk_compute_family(VkPhysicalDevice pd);
int rq_vk_usable(VkPhysicalDevice pd);
VkResult rq_vk_physical_devices(VkInstance inst, VkPhysicalDevice *pd, uint32_t *n);

/* vk_submit.c: Vulkan 1.2's timeline-semaphore feature chained before `next` for vkCreateDevice when
 * the device has it (tl filled; returns &tl), else `next`; and the neutral run API's submission queue
 * released at close (after the queue was waited for). */
void *rq_vk_timeline_chain(VkPhysicalDevice pd, VkPhysicalDeviceTimelineSemaphoreFeatures *tl, void *next);
void rq_vk_runq_free(ropeqk_ctx *ctx);

/* vk_mem.c */
ropeqk_status rq_vk_buf_create(ropeqk_ctx *ctx, VkDeviceSize size, bool host, VkBufferUsageFlags extra,
                               rq_vk_buf *b);
void rq_vk_buf_free(ropeqk_ctx *ctx, rq_vk_buf *b);
/* Uploads `bytes` of data into a new device buffer (through the host-visible path when the device
 * has no host-visible device-local memory). */
ropeqk_status rq_vk_buf_upload(ropeqk_ctx *ctx, const void *data, VkDeviceSize bytes, rq_vk_buf *b);
/* One-time command buffer on the context's queue: begin, then end + submit + wait (qlock held by
 * the caller of both). The wait is bounded (vk->timeout_ns, ROPEQK_WAIT_TIMEOUT_MS): past it the
 * call fails with ROPEQK_ERR_TIMEOUT, backend error VK_TIMEOUT kept, a message naming `what` (the
 * dispatch), and the context refuses every later host call (its command buffer may still be
 * running: a hung device); ropeqk_ctx_destroy then waits once more, as long and at least 10 s, and
 * leaks the device's objects rather than destroy them in use or hang. */
ropeqk_status rq_vk_cmd_begin(ropeqk_ctx *ctx, VkCommandBuffer *cmd);
ropeqk_status rq_vk_cmd_submit(ropeqk_ctx *ctx, VkCommandBuffer cmd, const char *what);
/* The wait limit, in nanoseconds: the library's bound (src/core/run.h rq_wait_bound:
 * ROPEQK_WAIT_TIMEOUT_MS, strictly parsed: ROPEQK_ERR_BAD_CONFIG with the message set). */
ropeqk_status rq_vk_timeout_from_env(uint64_t *ns);
/* Teardown (vk_ctx.c): waits, bounded, for a submit that timed out earlier, if any, and destroys
 * the buffers freed meanwhile; false when it still has not completed (the context's objects are then
 * leaked, not destroyed in use). The other host calls waited for their fences already. */
bool rq_vk_settle(ropeqk_ctx *ctx);
/* A barrier making earlier writes (any stage) visible to later compute and transfer commands. */
void rq_vk_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
                   VkPipelineStageFlags dst, VkAccessFlags dst_access);
/* The buffers of a recording as the core's call checks see them ({VkBuffer, offset, offset + range}). */
rq_mem rq_vk_mem(ropeqk_vulkan_mem m);
/* The bytes a view of `extent` bytes at m.offset reaches: 16-bit views are accessed as whole words. */
size_t rq_vk_word_bytes(ropeqk_vulkan_mem m, size_t es, size_t extent);

/* vk_pipe.c: the pipeline of shader `sh` with these specialization constants, made once per
 * context. */
ropeqk_status rq_vk_pipe_get(ropeqk_ctx *ctx, rq_vk_shader sh, const int32_t spec[RQ_VK_NSPEC], rq_vk_pipe **out);
void rq_vk_pipes_free(ropeqk_ctx *ctx);

/* One binding of a dispatch: a buffer range; the element offset inside the bound range comes back
 * in *elem_off (the descriptor offset is aligned down to the device's minimum). */
typedef struct {
    VkBuffer buf;
    VkDeviceSize offset, bytes; /* bytes: what the shader may touch from offset */
    uint32_t elem_size;         /* for the element offset: 4 (words) or 2 (halves) */
} rq_vk_bind;
/* Binds `n` ranges with push descriptors and pushes `pc` (the pipeline's push-constant block);
 * elem_off[i] receives each binding's element offset before the push (the caller stores them into
 * pc first: call rq_vk_bind_offsets, fill pc, then rq_vk_dispatch). */
ropeqk_status rq_vk_bind_offsets(ropeqk_ctx *ctx, const rq_vk_bind *b, uint32_t n, uint32_t *elem_off);
void rq_vk_dispatch(ropeqk_ctx *ctx, VkCommandBuffer cmd, const rq_vk_pipe *p, const rq_vk_bind *b, uint32_t n,
                    const void *pc, uint32_t pc_size, uint32_t gx, uint32_t gy, uint32_t gz);

/* vk_plan.c: the table's plan_init and plan_free */
ropeqk_status rq_vk_plan_init(ropeqk_plan *pl, const float *vfreq4, const double *inv);
void rq_vk_plan_free(ropeqk_plan *pl);
/* vk_tune.c: the table's configuration and tuner hooks; vk_host.c: host_run, warmup, and the timed
 * runs of the tuner (each its own submit and fence wait, on device buffers of the plan's extents
 * filled with 0.01). */
void rq_vk_tuning_base(const rq_devinfo *dev, rq_tuning *t);
/* vk_knobs.c: the knobs' table (knob.h) */
#define RQ_VK_N_KNOBS 9
extern const rq_knob rq_vk_knobs[];
void rq_vk_tuning_fit(const rq_devinfo *dev, rq_tuning *t);
ropeqk_status rq_vk_build_options(const ropeqk_ctx *ctx, char *buf, size_t len);
bool rq_vk_tune_candidate(rq_family f, bool cpu, int k, rq_tuning *t);
bool rq_vk_tune_fits(const ropeqk_ctx *ctx, rq_family f, const rq_tuning *t, int64_t D);
ropeqk_status rq_vk_tune_clone(const ropeqk_ctx *ctx, const rq_tuning *t, ropeqk_ctx **out);
void rq_vk_tune_lock(ropeqk_ctx *ctx, bool lock);
ropeqk_status rq_vk_time_plan(ropeqk_plan *pl, int runs, double *seconds);
ropeqk_status rq_vk_host_run(ropeqk_plan *pl, const rq_host_io *io);
/* The scores.comp shape (register block, staged dims) for head dim D: the context's tuned one where
 * the device allows it, else the default. */
void rq_vk_scores_shape(const ropeqk_ctx *ctx, int64_t D, int32_t *t, int32_t *tk);
/* Whether the device takes scores.comp shape (T, TK) at head dim D (else the plan uses the default). */
bool rq_vk_scores_fits(const ropeqk_ctx *ctx, int32_t T, int32_t TK, int64_t D);
bool rq_vk_scores_few(const rq_problem *pb);
/* The run of a plan: records rotate + scores for one step (checked already). */
ropeqk_status rq_vk_record_scores(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                  int64_t q_off, int64_t k_off);

/* vk_paged.c: a paged-decode plan's pipelines, metadata buffer and scratch (rq_vk_plan_init's part
 * for ROPEQK_OP_PAGED_DECODE; rq_vkp(pl) is set before anything can fail); vk_paged_run.c: their
 * release (also the dense decode's). */
ropeqk_status rq_vk_paged_init(ropeqk_plan *pl, const float *vfreq4);
void rq_vk_paged_free(ropeqk_plan *pl);
/* vk_rope.c, shared by the operations' plans: the rotate pipelines, frequency table and Qr/Kr
 * scratch of a plan (vp allocated); and the recording of the leading barrier, both rotations and the
 * barrier that makes the scratch visible to the next shader. */
ropeqk_status rq_vk_rope_init(ropeqk_plan *pl, const float *vfreq4);
/* The plan's frequency table (vk_contract.h: hi, mid, lo, M-RoPE stream per frequency) into vp->freq,
 * and its sink logits (pl->sinks, when the plan has them) into vp->sinks. */
ropeqk_status rq_vk_tables_upload(ropeqk_plan *pl, const float *vfreq4);
/* Rows [0, Sq) of Q and [0, Sk) of K (a plan's Sq, or fewer: the paged chunks' companion plan); cmd
 * VK_NULL_HANDLE: only the checks that recording could fail (binding ranges), nothing recorded. */
ropeqk_status rq_vk_record_rope(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                                int64_t Sk, int64_t q_off, int64_t k_off);

/* vk_attn.c: ROPEQK_OP_ATTENTION (plan checked, scratch made by rq_vk_rope_init) */
ropeqk_status rq_vk_attn_plan_init(ropeqk_plan *pl);
/* Query rows [0, Sq) (the plan's Sq, or fewer: vk_paged_chunk.c) over keys [0, Sk); cmd
 * VK_NULL_HANDLE: the checks only, as rq_vk_record_rope. */
ropeqk_status rq_vk_record_attention(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                                     int64_t Sk, int64_t q_off, int64_t k_off);
/* attention.comp's shape for this context and Dv: the tuned rows per work-group (vk_rows) where the
 * device has room for them, else the default, else the smallest; false if not even that fits. */
bool rq_vk_attn_pick(const ropeqk_ctx *ctx, int64_t Dv, rq_vk_attn_shape *s);
/* Whether the device takes `rows` attention rows per work-group at Dv (else the plan uses the default). */
bool rq_vk_attn_rows_fit(const ropeqk_ctx *ctx, int32_t rows, int64_t Dv);
/* The attention pipeline's specialization constants for a shape and the V and O dtypes. */
void rq_vk_attn_spec(const rq_vk_attn_shape *s, int32_t v_dtype, int32_t o_dtype, int32_t spec[RQ_VK_NSPEC]);
/* Keys per attention dispatch at head dim D (a multiple of the shape's BN): the bound on an
 * invocation's loop trips that lavapipe needs (vk_attn.c). */
int64_t rq_vk_attn_chunk_keys(int64_t D, const rq_vk_attn_shape *s);

/* vk_dense.c: few-row dense attention through the paged decode's shaders (no K pre-pass).
 * rq_vk_dense_init: after the old path's scratch, the decode's (vp->pg) where the plan may take it
 * (op, M-RoPE, query rows against the context's dense_rows) and the device can run it; none
 * otherwise. rq_vk_dense_record: records a call that way and sets *taken, or leaves *taken false
 * (and records nothing) where the call is not one it takes; the old path then records it. */
ropeqk_status rq_vk_dense_init(ropeqk_plan *pl, const float *vfreq4);
ropeqk_status rq_vk_dense_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sk,
                                 int64_t q_off, int64_t k_off, bool *taken);

/* vk_cm_dev.c: the tensor-core path's device setup. rq_vk_cm_setup fills what a device the library
 * opens enables for it (extensions, a features chain; nothing where the device lacks any part);
 * rq_vk_cm_caps_fill records the outcome in the context (borrowed devices: not taken);
 * rq_vk_cm_describe writes the device's listed matrix shapes and types (`ropeqk devices`). */
typedef struct {
    bool enable, size_ctl;
    const char *ext[2];
    uint32_t n_ext;
    uint32_t sg;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT fsz;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcm;
    char why[160];
    char shapes[224]; /* the device's list (rq_vk_cm_describe) */
} rq_vk_cm_setup;
/* ROPEQK_ERR_OUT_OF_HOST_MEMORY when an allocation of the queries fails (the context fails with it) */
ropeqk_status rq_vk_cm_setup_device(VkInstance inst, VkPhysicalDevice pd, rq_vk_cm_setup *s);
ropeqk_status rq_vk_cm_caps_fill(ropeqk_ctx *ctx, const rq_vk_cm_setup *s);
/* 1: 16x16x16 f16 is listed, 0: not, -1: out of host memory */
int rq_vk_cm_describe(VkInstance inst, VkPhysicalDevice pd, char *buf, size_t len);
/* Whether this build embeds the cooperative-matrix modules. */
bool rq_vk_cm_built(void);
/* The pipeline's required subgroup size for shader sh on ctx (0: none). */
uint32_t rq_vk_cm_pipe_sg(const ropeqk_ctx *ctx, rq_vk_shader sh);

/* vk_cm.c: a scores or attention plan's tensor-core path (vp->cm) where the context takes it
 * (tuning vk_coopmat, the device, the plan's shape and limits), else none (today's shaders record
 * it); and the recordings (rq_vk_record_attention and rq_vk_record_scores hand over to them). */
ropeqk_status rq_vk_cm_init(ropeqk_plan *pl);
void rq_vk_cm_free(ropeqk_plan *pl);
ropeqk_status rq_vk_cm_record(ropeqk_plan *pl, VkCommandBuffer cmd, const ropeqk_vulkan_args *a, int64_t Sq,
                              int64_t Sk, int64_t q_off, int64_t k_off);
/* The tensor-core tile (rows, keys) the context takes at Dv for the plans' fit checks and the tuner
 * (false: none fits); emulated: the emulated shaders' shape. */
bool rq_vk_cm_tile_fits(const ropeqk_ctx *ctx, int32_t rows, int32_t keys, bool emulated);
/* Whether plans on ctx take the tensor-core path at all (vk_coopmat and the device). */
bool rq_vk_cm_active(const ropeqk_ctx *ctx, bool *emulated);

/* Makes the pipelines of every operation now (ropeqk_ctx_warmup). */
ropeqk_status rq_vk_warmup(ropeqk_ctx *ctx);
/* ropeqk_ctx_diagnostics: ctx's validation layer, or (NULL) the process's (vk_ctx.c). */
void rq_vk_diagnostics(const ropeqk_ctx *ctx, ropeqk_diagnostics *out);

#endif
