/* `ropeqk config`: the model-family variants of docs/conventions.md section 11, each from the keys
 * Hugging Face's modeling code reads.
 * - Gemma 2 / 3: attn_logit_softcapping C -> --softcap C; query_pre_attn_scalar q -> --scale q^-1/2
 *   (GemmaAttention.scaling; Gemma 2 27B: q 144 with head_dim 128); Gemma 3's sliding layers rotate
 *   with rope_local_base_freq and no scaling (a note: the line is the global layers').
 * - Qwen2-VL / 2.5-VL / 3-VL: rope_scaling.mrope_section -> --mrope-section, mrope_interleaved ->
 *   --mrope-interleaved (HF's "mrope" rope type is default RoPE plus the sections).
 * - DeepSeek V2 / V3, Kimi K2 (MLA: kv_lora_rank and qk_rope_head_dim): the absorbed form, one
 *   latent key head [c_kv | k_pe] of D = kv_lora_rank + qk_rope_head_dim, the rotated dims at the end
 *   (--rotary-offset kv_lora_rank), interleaved (HF's rope_interleave, default true), scale
 *   (qk_nope_head_dim + qk_rope_head_dim)^-1/2 times mscale^2 when mscale_all_dim is set
 *   (DeepseekV3Attention: yarn_get_mscale(factor, mscale_all_dim) = 0.1 mscale_all_dim ln(factor) + 1).
 * - gpt-oss: sinks are weights, not config (a note); YaRN's truncate false is read in config.c. */
#include "cli.h"
#include "config_model.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

int config_mla_shapes(const cj_file *f, model_rope *m)
{
    int64_t lora = 0, rope = 0, nope = 0;
    bool has_lora = false, has_rope = false, got = false;
    int rc;
    if ((rc = cj_int(f, &m->lm, "kv_lora_rank", false, 1, 1 << 20, &lora, &has_lora, NULL)) != CLI_OK ||
        (rc = cj_int(f, &m->lm, "qk_rope_head_dim", false, 2, 1 << 20, &rope, &has_rope, NULL)) != CLI_OK)
        return rc;
    if (!has_lora && !has_rope)
        return CLI_OK;
    if (!has_lora || !has_rope)
        return cj_fail(f, "key '%s' without '%s' (MLA needs both)", has_lora ? "kv_lora_rank" : "qk_rope_head_dim",
                       has_lora ? "qk_rope_head_dim" : "kv_lora_rank");
    if (rope % 2 != 0)
        return cj_fail(f, "qk_rope_head_dim %" PRId64 " is not even", rope);
    if ((rc = cj_int(f, &m->lm, "qk_nope_head_dim", true, 0, 1 << 20, &nope, &got, NULL)) != CLI_OK)
        return rc;
    bool inter = true; /* the checkpoint's q_pe / k_pe rotate pairs (2i, 2i+1) */
    if ((rc = cj_bool(f, &m->lm, "rope_interleave", &inter)) != CLI_OK)
        return rc;
    m->mla = true;
    m->interleaved = inter;
    m->D = lora + rope;
    m->R = rope;
    m->rotary_offset = lora;
    m->dv = lora;
    m->Hkv = 1;
    m->qk_head_dim = nope + rope;
    return CLI_OK;
}

/* rope_scaling.mrope_section: three non-negative integers summing to R/2. */
static int read_sections(const cj_file *f, model_rope *m)
{
    const cJSON *j = m->rs.item ? cJSON_GetObjectItemCaseSensitive(m->rs.item, "mrope_section") : NULL;
    bool inter = false;
    int rc = cj_bool(f, &m->rs, "mrope_interleaved", &inter);
    if (rc != CLI_OK)
        return rc;
    if (!j || cJSON_IsNull(j)) {
        if (inter)
            return cj_fail(f, "key '%s.mrope_interleaved' without '%s.mrope_section'", m->rs.name, m->rs.name);
        return CLI_OK;
    }
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 3)
        return cj_fail(f, "key '%s.mrope_section' must be a list of 3 integers (temporal, height, width frequencies)",
                       m->rs.name);
    int64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(j, i);
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1.0;
        if (!(v >= 0.0 && v <= (double)m->R && v == floor(v)))
            return cj_fail(f, "key '%s.mrope_section' entry %d is not an integer in [0, %" PRId64 "]", m->rs.name, i,
                           m->R / 2);
        m->mrope_section[i] = (int32_t)v;
        sum += m->mrope_section[i];
    }
    if (sum != m->R / 2)
        return cj_fail(f, "key '%s.mrope_section' [%d, %d, %d] sums to %" PRId64 ", not R/2 = %" PRId64
                          " (rotary dim %" PRId64 ")",
                       m->rs.name, m->mrope_section[0], m->mrope_section[1], m->mrope_section[2], sum, m->R / 2, m->R);
    m->mrope = true;
    m->mrope_interleaved = inter;
    return CLI_OK;
}

static void num(char *buf, size_t n, double v) { cli_fmt_double(buf, n, v); }

int config_variants(const cj_file *f, model_rope *m, strbuf *line, strbuf *notes)
{
    int rc;
    bool got = false;
    char a[64], b[64];
    if (m->mla) {
        flag_num(line, "--rotary-offset", (double)m->rotary_offset);
        double ms = 1.0, msa = 0.0;
        if ((rc = cj_num(f, &m->rs, "mscale_all_dim", false, &msa, &got)) != CLI_OK)
            return rc;
        if (msa != 0.0 && m->sc.factor > 1.0)
            ms = 0.1 * msa * log(m->sc.factor) + 1.0;
        m->scale = ms * ms / sqrt((double)m->qk_head_dim);
        num(a, sizeof a, ms);
        sb_add(notes, "# MLA (DeepSeek): absorbed form: Q = [q_nope W_UK | q_pe] per head, K = [c_kv | k_pe] "
                      "shared by all %" PRId64 " heads (Hkv 1), D %" PRId64 " = kv_lora_rank %" PRId64 " + "
                      "qk_rope_head_dim %" PRId64 ", the rotated dims last (--rotary-offset %" PRId64 ")%s\n",
               m->Hq, m->D, m->rotary_offset, m->R, m->rotary_offset,
               m->interleaved ? "; q_pe/k_pe rotate pairs (rope_interleave): interleaved" : "");
        sb_add(notes, "# MLA attention: V is c_kv, the first %" PRId64 " dims of K: ropeqk attention --v-from-k --dv "
                      "%" PRId64 " (then O W_UV)\n", m->dv, m->dv);
        sb_add(notes, "# MLA scale: (qk_nope_head_dim + qk_rope_head_dim)^-1/2 = %" PRId64 "^-1/2 x mscale^2, "
                      "mscale %s (0.1 mscale_all_dim ln(factor) + 1, 1 without mscale_all_dim)\n",
               m->qk_head_dim, a);
    }
    double cap = 0.0;
    if ((rc = cj_num_pos(f, &m->lm, "attn_logit_softcapping", false, &cap, &got)) != CLI_OK)
        return rc;
    if (got) {
        flag_num(line, "--softcap", cap);
        num(a, sizeof a, cap);
        sb_add(notes, "# softcap: attn_logit_softcapping %s: S' = %s tanh(S / %s) on the scaled scores, masked "
                      "stay -inf\n", a, a, a);
    }
    double q = 0.0;
    if ((rc = cj_num_pos(f, &m->lm, "query_pre_attn_scalar", false, &q, &got)) != CLI_OK)
        return rc;
    if (got && !m->mla) {
        m->scale = 1.0 / sqrt(q);
        num(a, sizeof a, q);
        sb_add(notes, "# scale: query_pre_attn_scalar %s: scale %s^-1/2 (not 1/sqrt(D) = 1/sqrt(%" PRId64 "))\n", a, a,
               m->D);
    }
    double local = 0.0;
    if ((rc = cj_num_pos(f, &m->lm, "rope_local_base_freq", false, &local, &got)) != CLI_OK)
        return rc;
    if (got) {
        num(a, sizeof a, local);
        sb_add(notes, "# local layers: the sliding-window layers rotate with base %s (rope_local_base_freq) and "
                      "no frequency scaling: --base %s without --scaling for those; the line is the global "
                      "layers'\n", a, a);
    }
    if ((rc = read_sections(f, m)) != CLI_OK)
        return rc;
    if (m->mrope) {
        sb_add(line, " --mrope-section %d,%d,%d%s", m->mrope_section[0], m->mrope_section[1], m->mrope_section[2],
               m->mrope_interleaved ? " --mrope-interleaved" : "");
        sb_add(notes, "# mrope: %s.mrope_section: frequencies by stream (temporal, height, width)%s; positions are "
                      "[3, S] (t, h, w rows from the processor's get_rope_index): --q-positions / --k-positions "
                      ".npy int [3,S]; text alone (offsets) is plain RoPE\n",
               m->rs.name, m->mrope_interleaved ? ", interleaved t,h,w (mrope_interleaved, Qwen3-VL)" : ", contiguous");
    }
    if (m->model_type && strcmp(m->model_type, "gpt_oss") == 0)
        sb_add(notes, "# sinks: gpt-oss learns one logit per query head and layer (self_attn.sinks in the weights, "
                      "[%" PRId64 "]): ropeqk attention --sinks FILE (.npy <f4 [%" PRId64 "])\n", m->Hq, m->Hq);
    if (m->scale != 0.0) {
        flag_num(line, "--scale", m->scale);
        if (m->mla) {
            num(b, sizeof b, m->scale);
            sb_add(notes, "# scale %s replaces ropeqk's default 1/sqrt(%" PRId64 ")\n", b, m->D);
        }
    }
    return CLI_OK;
}
