#!/usr/bin/env python3
"""Writes the fixtures of the `ropeqk config` tests: tests/data/configs/.

Four named Hugging Face config.json files (public values, trimmed to the keys that matter plus a few
architecture keys) and, per test case, a folder with:

    config_args.txt  the config file name (relative to tests/data/configs) and extra `ropeqk config` flags
    flags.txt        the expected first output line of `ropeqk config` (`@PREFIX@` = the --out-prefix)
    shapes.txt       the expected "Hq .., Hkv .., D .." part of the `# shapes:` line
    args.txt         extra `ropeqk scores` flags (positions, mask)
    q.npy, k.npy     small random inputs (f32, [1,2,Sq,D] and [1,1,Sk,D]) at the model's long context
    expected.npy     f64 scores [1,2,Sq,Sk], masked = -inf

The script reads each config the way Hugging Face's modeling_rope_utils does (rope_type / legacy
type, "su" = longrope, rope_theta default 10000, head_dim else hidden_size / num_attention_heads,
partial_rotary_factor, original_max_position_embeddings in rope_scaling or at the top level,
longrope factor = max_position_embeddings / original_max_position_embeddings), takes the inverse
frequencies from the formula functions of scripts/gen_scaling_fixtures.py, and evaluates the scores
in fp64 NumPy (rotate_half, i.e. half-split pairs (x[i], x[i+R/2]); cos and sin multiplied by the
attention factor). Nothing is shared with the C code.

Usage: python3 scripts/gen_config_fixtures.py [OUTDIR]   (default tests/data/configs; needs NumPy)
Deterministic: rerunning rewrites identical files.
"""
import json
import math
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scaling_fixtures as F  # noqa: E402  (the formula functions)

CONFIGS = {
    "llama-3.1-8b.json": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "torch_dtype": "bfloat16", "vocab_size": 128256},
    "qwen2.5-7b-yarn.json": {
        "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584,
        "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
        "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "use_sliding_window": False,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
        "torch_dtype": "bfloat16", "vocab_size": 152064},
    "phi-3.5-mini-instruct.json": {
        "architectures": ["Phi3ForCausalLM"], "hidden_act": "silu", "hidden_size": 3072,
        "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
        "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
        "rope_scaling": {"long_factor": F.PHI35_LONG, "short_factor": F.PHI35_SHORT, "type": "longrope"},
        "rope_theta": 10000.0, "sliding_window": 262144, "torch_dtype": "bfloat16", "vocab_size": 32064},
    "longchat-7b-32k-linear.json": {
        "architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 11008, "max_position_embeddings": 32768, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "rms_norm_eps": 1e-06,
        "rope_scaling": {"factor": 8.0, "type": "linear"}, "torch_dtype": "float16", "vocab_size": 32000},
}

# (case, config file, extra config flags, key position offset, Sq, Sk)
CASES = [
    ("llama31_128k", "llama-3.1-8b.json", [], 100000, 3, 8),
    ("qwen25_yarn_128k", "qwen2.5-7b-yarn.json", [], 120000, 3, 8),
    ("phi35_long", "phi-3.5-mini-instruct.json", [], 100000, 3, 8),
    ("phi35_short", "phi-3.5-mini-instruct.json", ["--seq-len", "4000"], 3990, 3, 8),
    ("longchat_linear_32k", "longchat-7b-32k-linear.json", [], 30000, 3, 8),
]


def num(x):
    """The number as `ropeqk config` prints it: integers without a point, else the shortest repr."""
    x = float(x)
    return str(int(x)) if x == math.floor(x) and abs(x) <= 2.0 ** 53 else repr(x)


def hf_rope(cfg, seq_len=None):
    """Reads a config as Hugging Face does. Returns (shape dict, formula dict for gen_scaling_fixtures,
    the expected `ropeqk config` flag list)."""
    Hq = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or Hq
    D = cfg.get("head_dim") or cfg["hidden_size"] // Hq
    R = int(D * cfg.get("partial_rotary_factor", 1.0))
    base = float(cfg.get("rope_theta", 10000.0))
    rs = cfg.get("rope_scaling") or {}
    t = rs.get("rope_type", rs.get("type", "default"))
    t = {"su": "longrope", "default": "none"}.get(t, t)
    l0 = rs.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
    c = dict(type=t, head_dim=D, rotary_dim=R, base=base)
    flags = ["--layout", "half-split", "--base", num(base), "--rotary-dim", num(R)]
    if t != "none":
        flags += ["--scaling", t]
    if t in ("linear", "dynamic", "yarn", "llama3"):
        c["factor"] = float(rs["factor"])
    if t in ("dynamic", "yarn"):
        c["original_max_position"] = l0 or cfg["max_position_embeddings"]
    if t == "llama3":
        c.update(original_max_position=l0, low_freq_factor=rs["low_freq_factor"],
                 high_freq_factor=rs["high_freq_factor"])
    if t == "longrope":
        c["original_max_position"] = l0 or cfg["max_position_embeddings"]
        c["factor"] = float(rs.get("factor", cfg["max_position_embeddings"] / c["original_max_position"]))
        c["long_factor"], c["short_factor"] = rs["long_factor"], rs["short_factor"]
    if t in ("dynamic", "longrope") and seq_len:
        c["seq_len"] = seq_len
    for key, flag in (("factor", "--factor"), ("original_max_position", "--original-max-pos"),
                      ("seq_len", "--seq-len"), ("beta_fast", "--beta-fast"), ("beta_slow", "--beta-slow"),
                      ("attention_factor", "--attention-factor"), ("low_freq_factor", "--low-freq-factor"),
                      ("high_freq_factor", "--high-freq-factor")):
        if key in c:
            flags += [flag, num(c[key])]
    if t == "longrope":
        flags += ["--long-factors", "@PREFIX@.long_factors.npy", "--short-factors", "@PREFIX@.short_factors.npy"]
    return dict(Hq=Hq, Hkv=Hkv, D=D, R=R), c, flags


def inv_freq(c, seq_len):
    """Inverse frequencies and attention factor; dynamic/longrope take the current length L."""
    c = dict(c)
    c.setdefault("seq_len", seq_len)
    fns = dict(none=F.none, linear=F.linear, dynamic=F.dynamic, yarn=F.yarn, llama3=F.llama3, longrope=F.longrope)
    return fns[c["type"]](c)


def rope_half(x, pos, inv, R, attn):
    """rotate_half on the first R dims of x [..., S, D] (fp64); cos and sin times attn."""
    a = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    c, s = attn * np.cos(a), attn * np.sin(a)
    y = x.copy()
    x0, x1 = x[..., :R // 2], x[..., R // 2:R]
    y[..., :R // 2] = x0 * c - x1 * s
    y[..., R // 2:R] = x0 * s + x1 * c
    return y


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "configs")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if os.path.isdir(os.path.join(out, name)):
            shutil.rmtree(os.path.join(out, name))
    for name, cfg in CONFIGS.items():
        with open(os.path.join(out, name), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    rng = np.random.default_rng(20250505)
    for case, cfg_name, cfg_args, k_off, Sq, Sk in CASES:
        d = os.path.join(out, case)
        os.makedirs(d)
        with open(os.path.join(out, cfg_name)) as f:
            cfg = json.load(f)  # read back: the file is what the test reads
        seq_len = int(cfg_args[cfg_args.index("--seq-len") + 1]) if "--seq-len" in cfg_args else None
        shape, c, flags = hf_rope(cfg, seq_len)
        D, R = shape["D"], shape["R"]
        q_off = k_off + Sk - Sq  # the queries are the last Sq keys' positions: causal, every row sees keys
        pq, pk = q_off + np.arange(Sq), k_off + np.arange(Sk)
        # ropeqk's default L (no --seq-len): max(q_off + Sq, k_off + Sk)
        inv, attn = inv_freq(c, seq_len or max(q_off + Sq, k_off + Sk))
        q = rng.standard_normal((1, 2, Sq, D)).astype(np.float32)
        k = rng.standard_normal((1, 1, Sk, D)).astype(np.float32)
        qr = rope_half(q.astype(np.float64), pq, inv, R, attn)
        kr = np.repeat(rope_half(k.astype(np.float64), pk, inv, R, attn), 2, axis=1)
        s = np.einsum("bhid,bhjd->bhij", qr, kr) / np.sqrt(D)
        s[:, :, pk[None, :] > pq[:, None]] = -np.inf
        np.save(os.path.join(d, "q.npy"), q)
        np.save(os.path.join(d, "k.npy"), k)
        np.save(os.path.join(d, "expected.npy"), s)
        with open(os.path.join(d, "config_args.txt"), "w") as f:
            f.write(" ".join([cfg_name] + cfg_args) + "\n")
        with open(os.path.join(d, "flags.txt"), "w") as f:
            f.write(" ".join(flags) + "\n")
        with open(os.path.join(d, "shapes.txt"), "w") as f:
            f.write("Hq %d, Hkv %d, D %d\n" % (shape["Hq"], shape["Hkv"], D))
        with open(os.path.join(d, "args.txt"), "w") as f:
            f.write("--q-pos-offset %d --k-pos-offset %d --causal\n" % (q_off, k_off))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("# `ropeqk config` fixtures\n\n"
                "Written by `scripts/gen_config_fixtures.py`. The `*.json` files are Hugging Face config.json\n"
                "files of public models (trimmed): Llama 3.1 8B (llama3), Qwen2.5-7B-Instruct with the YaRN\n"
                "block of its model card, Phi-3.5-mini-instruct (LongRoPE), LongChat-7B-32k (linear).\n"
                "Each folder is one test case: `config_args.txt` (config file and extra flags), `flags.txt`\n"
                "(the expected `ropeqk config` line, `@PREFIX@` = --out-prefix), `shapes.txt`, `args.txt`\n"
                "(extra `ropeqk scores` flags), `q.npy`, `k.npy` and `expected.npy` (NumPy fp64 scores at\n"
                "the model's long context). Run by tests/cli/test_cli_config.c.\n")


if __name__ == "__main__":
    main()
