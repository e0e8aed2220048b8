#!/usr/bin/env python3
"""Writes the fixtures of the `ropeqk scores` tests: tests/data/cli/<case>/.

Each case folder holds q.npy and k.npy (the inputs, f32 or f16, C order), optional position files,
expected.npy (f64 [B,Hq,Sq,Sk], masked entries -inf) and args.txt (the `ropeqk scores` flags of the
case; file names in it are relative to the case folder). The expected scores come from an
independent NumPy evaluation of docs/conventions.md in fp64 (no code shared with the library):

    inv_freq[i] = base^(-2i/R),  a = p * inv_freq[i]  (negated for --conjugate)
    interleaved pairs (x[2i], x[2i+1]), half-split pairs (x[i], x[i+R/2]); dims R..D-1 unrotated
    S[b,h,i,j] = scale * <rope(q[b,h,i], pq[i]), rope(k[b,h/G,j], pk[j])>, -inf where pk[j] > pq[i]
    (and, with a sliding window W, where pq[i] - pk[j] >= W)

Frequency-scaling cases take their inverse frequencies and attention factor (cos and sin multiplied)
from the formula functions of scripts/gen_scaling_fixtures.py; bf16 inputs are stored as their raw
bits in '<u2' files (rounded to nearest even from f32) and the expected scores use the bf16 values.

Usage: /usr/bin/python3 scripts/gen_cli_fixtures.py [OUTDIR]   (default tests/data/cli)
Needs NumPy. Deterministic: rerunning rewrites identical files.
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scaling_fixtures as F  # noqa: E402  (the frequency-scaling formulas)


def rope(x, pos, rotary_dim, base, layout, conjugate, inv=None, attn=1.0):
    """x: [..., S, D] float64, pos: [S] integers. Returns the rotated copy. inv: scaled inverse
    frequencies (default base^(-2i/R)); attn multiplies cos and sin."""
    R = rotary_dim
    if inv is None:
        inv = base ** (-2.0 * np.arange(R // 2, dtype=np.float64) / R)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]  # [S, R/2]
    if conjugate:
        ang = -ang
    c, s = attn * np.cos(ang), attn * np.sin(ang)
    if layout == "interleaved":
        i0 = np.arange(0, R, 2)
        i1 = i0 + 1
    elif layout == "half-split":
        i0 = np.arange(R // 2)
        i1 = i0 + R // 2
    else:
        raise ValueError(layout)
    y = x.copy()
    x0, x1 = x[..., i0], x[..., i1]
    y[..., i0] = x0 * c - x1 * s
    y[..., i1] = x0 * s + x1 * c
    return y


def scores(q, k, pq, pk, rotary_dim, base, layout, conjugate, scale, causal, inv=None, attn=1.0, window=0):
    """q: [B,Hq,Sq,D], k: [B,Hkv,Sk,D] float64 (BHSD). Returns [B,Hq,Sq,Sk] float64."""
    G = q.shape[1] // k.shape[1]
    qr = rope(q, pq, rotary_dim, base, layout, conjugate, inv, attn)
    kr = np.repeat(rope(k, pk, rotary_dim, base, layout, conjugate, inv, attn), G, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", qr, kr)
    if causal:
        mask = np.asarray(pk)[None, :] > np.asarray(pq)[:, None]
        s[:, :, mask] = -np.inf
    if window:
        mask = np.asarray(pq)[:, None] - np.asarray(pk)[None, :] >= window
        s[:, :, mask] = -np.inf
    return s


def to_bf16(x):
    """float32 array -> (raw bf16 bits as uint16, the bf16 values as float64); round to nearest even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return b, (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


SCALING_FLAGS = (("factor", "--factor"), ("original_max_position", "--original-max-pos"), ("seq_len", "--seq-len"),
                 ("beta_fast", "--beta-fast"), ("beta_slow", "--beta-slow"),
                 ("attention_factor", "--attention-factor"), ("low_freq_factor", "--low-freq-factor"),
                 ("high_freq_factor", "--high-freq-factor"))
SCALING_FNS = dict(none=F.none, linear=F.linear, dynamic=F.dynamic, yarn=F.yarn, llama3=F.llama3,
                   longrope=F.longrope)


def case(out, name, rng, *, B, Hq, Hkv, Sq, Sk, D, layout="interleaved", rotary_dim=None, base=10000.0,
         scale=None, causal=False, conjugate=False, q_off=0, k_off=0, q_pos=None, k_pos=None,
         dtype=np.float32, bshd=False, write_defaults=False, scaling=None, window=0):
    """Writes one case. q_pos/k_pos: (array, numpy int dtype) per-token position files. dtype "bf16":
    raw bf16 bits in '<u2' files (--dtype bf16). scaling: the `ropeqk scores` scaling parameters
    (gen_scaling_fixtures names: type, factor, ..., long_factor/short_factor/freq_factors lists, written
    as .npy files)."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    bf16 = isinstance(dtype, str) and dtype == "bf16"
    q = rng.standard_normal((B, Hq, Sq, D)).astype(np.float32 if bf16 else dtype)
    k = rng.standard_normal((B, Hkv, Sk, D)).astype(np.float32 if bf16 else dtype)
    if bf16:
        (q, q64), (k, k64) = to_bf16(q), to_bf16(k)
    else:
        q64, k64 = q.astype(np.float64), k.astype(np.float64)
    R = rotary_dim or D
    sc = scale if scale is not None else 1.0 / np.sqrt(D)
    pq = np.asarray(q_pos[0]) if q_pos is not None else q_off + np.arange(Sq)
    pk = np.asarray(k_pos[0]) if k_pos is not None else k_off + np.arange(Sk)
    inv, attn, sargs = None, 1.0, []
    if scaling is not None:
        c = dict(scaling, head_dim=D, rotary_dim=R, base=base)
        c.setdefault("seq_len", max(q_off + Sq, k_off + Sk))  # ropeqk's default L without position files
        inv, attn = SCALING_FNS[c["type"]](c)
        if "freq_factors" in c:
            inv = inv / np.array(c["freq_factors"])
        if c["type"] != "none":
            sargs += ["--scaling", c["type"]]
        for key, flag in SCALING_FLAGS:
            if key in scaling:
                sargs += [flag, repr(float(scaling[key])) if isinstance(scaling[key], float) else str(scaling[key])]
        for key, flag, fname, dt in (("long_factor", "--long-factors", "long.npy", np.float64),
                                     ("short_factor", "--short-factors", "short.npy", np.float32),
                                     ("freq_factors", "--freq-factors", "ff.npy", np.float64)):
            if key in scaling:
                # f32 lists are exact only if the values are f32: round them first, as the file holds them
                vals = np.asarray(scaling[key], dtype=dt)
                np.save(os.path.join(d, fname), vals)
                if dt == np.float32:
                    c2 = dict(c, **{key: list(vals.astype(np.float64))})
                    inv, attn = SCALING_FNS[c2["type"]](c2)
                    if "freq_factors" in c2:
                        inv = inv / np.array(c2["freq_factors"])
                sargs += [flag, fname]
    s = scores(q64, k64, pq, pk, R, base, layout, conjugate, sc, causal, inv, attn, window)
    if bshd:  # files in [B,S,H,D]
        np.save(os.path.join(d, "q.npy"), np.ascontiguousarray(q.transpose(0, 2, 1, 3)))
        np.save(os.path.join(d, "k.npy"), np.ascontiguousarray(k.transpose(0, 2, 1, 3)))
    else:
        np.save(os.path.join(d, "q.npy"), q)
        np.save(os.path.join(d, "k.npy"), k)
    np.save(os.path.join(d, "expected.npy"), s.astype(np.float64))
    args = []
    if bshd:
        args += ["--format", "bshd"]
    if layout != "interleaved" or write_defaults:
        args += ["--layout", layout]
    if base != 10000.0 or write_defaults:
        args += ["--base", repr(float(base))]
    if rotary_dim:
        args += ["--rotary-dim", str(rotary_dim)]
    if q_pos is not None:
        np.save(os.path.join(d, "q_pos.npy"), np.asarray(q_pos[0], dtype=q_pos[1]))
        args += ["--q-positions", "q_pos.npy"]
    elif q_off:
        args += ["--q-pos-offset", str(q_off)]
    if k_pos is not None:
        np.save(os.path.join(d, "k_pos.npy"), np.asarray(k_pos[0], dtype=k_pos[1]))
        args += ["--k-positions", "k_pos.npy"]
    elif k_off:
        args += ["--k-pos-offset", str(k_off)]
    if scale is not None:
        args += ["--scale", repr(float(scale))]
    if causal:
        args += ["--causal"]
    if conjugate:
        args += ["--conjugate"]
    if bf16:
        args += ["--dtype", "bf16"]
    if window:
        args += ["--window", str(window)]
    args += sargs
    with open(os.path.join(d, "args.txt"), "w") as f:
        f.write(" ".join(args) + "\n")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "cli")
    for name in os.listdir(out) if os.path.isdir(out) else []:
        if os.path.isdir(os.path.join(out, name)):
            shutil.rmtree(os.path.join(out, name))
    rng = np.random.default_rng(20240607)
    # Meta Llama layout, defaults for base and scale, shifted query positions.
    case(out, "interleaved", rng, B=1, Hq=2, Hkv=2, Sq=5, Sk=7, D=16, q_off=3, write_defaults=True)
    # HF/NeoX layout with GQA (4 on 2), causal with queries at the end, partial rotary, Llama 3 base.
    case(out, "half_split_gqa_causal_partial", rng, B=2, Hq=4, Hkv=2, Sq=4, Sk=9, D=32, layout="half-split",
         rotary_dim=16, base=500000.0, scale=0.2, causal=True, q_off=5)
    # [B,S,H,D] files, MQA (3 query heads on 1 key head).
    case(out, "bshd", rng, B=2, Hq=3, Hkv=1, Sq=5, Sk=6, D=8, bshd=True, k_off=2, q_off=4)
    # f16 inputs: the expected scores use the f16 values exactly.
    case(out, "f16_input", rng, B=1, Hq=2, Hkv=1, Sq=6, Sk=6, D=24, layout="half-split", causal=True,
         dtype=np.float16)
    # Per-token int64 positions: unsorted, repeated, up to 2^20; the mask follows positions, not rows.
    case(out, "positions_int64", rng, B=1, Hq=2, Hkv=2, Sq=5, Sk=7, D=16, causal=True,
         q_pos=([100, 5, 70000, 3, 1 << 20], np.int64),
         k_pos=([0, 5, 100, 1 << 20, 2, 69999, 70001], np.int64))
    # Conjugate (inverse) rotation, 1-based positions, int32 key positions with a gap.
    case(out, "conjugate", rng, B=1, Hq=1, Hkv=1, Sq=6, Sk=6, D=12, scale=0.25, conjugate=True, q_off=1,
         k_pos=([1, 2, 3, 10, 11, 12], np.int32))
    # Decode: one query row at the last key position, large positions.
    case(out, "decode_large_pos", rng, B=1, Hq=4, Hkv=2, Sq=1, Sk=8, D=64, layout="half-split", base=1e6,
         causal=True, q_off=1000006, k_off=999999)
    # bf16 inputs (raw bits in <u2 files, --dtype bf16), GQA, causal.
    case(out, "bf16_input", rng, B=1, Hq=4, Hkv=2, Sq=5, Sk=7, D=32, layout="half-split", causal=True, q_off=2,
         dtype="bf16")
    # Sliding window of 3 with the causal mask: each query sees its 3 latest keys.
    case(out, "window_causal", rng, B=1, Hq=2, Hkv=1, Sq=6, Sk=9, D=16, causal=True, q_off=3, window=3)
    # Frequency scaling given by flags (the config fixtures cover the named models).
    case(out, "yarn_betas_attention", rng, B=1, Hq=2, Hkv=1, Sq=3, Sk=6, D=64, layout="half-split",
         rotary_dim=48, base=10000.0, q_off=500003, k_off=500000,
         scaling=dict(type="yarn", factor=16.0, original_max_position=4096, beta_fast=16.0, beta_slow=2.0,
                      attention_factor=1.25))
    case(out, "dynamic_ntk_seq_len", rng, B=1, Hq=2, Hkv=2, Sq=4, Sk=4, D=32, q_off=20000, k_off=20000,
         causal=True, scaling=dict(type="dynamic", factor=4.0, original_max_position=2048, seq_len=30000))
    case(out, "llama3_defaults", rng, B=1, Hq=1, Hkv=1, Sq=2, Sk=5, D=64, layout="half-split", base=500000.0,
         q_off=200000, k_off=199998, scaling=dict(type="llama3"))
    half = 12
    case(out, "longrope_positions", rng, B=1, Hq=2, Hkv=1, Sq=3, Sk=5, D=24, layout="half-split",
         q_pos=([70000, 3, 65000], np.int64), k_pos=([0, 64999, 70000, 2, 65001], np.int32), causal=True,
         scaling=dict(type="longrope", original_max_position=4096, seq_len=131072, factor=32.0,
                      long_factor=list(1.0 + 60.0 * rng.random(half)), short_factor=list(1.0 + rng.random(half))))
    case(out, "freq_factors_partial", rng, B=1, Hq=2, Hkv=1, Sq=3, Sk=4, D=40, rotary_dim=32, q_off=9000,
         k_off=8999, scaling=dict(type="none", freq_factors=list(1.0 + 7.0 * rng.random(16))))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("# `ropeqk scores` fixtures\n\n"
                "Written by `scripts/gen_cli_fixtures.py` (NumPy, fp64, independent of the library). Each folder:\n"
                "`q.npy`, `k.npy` (inputs; raw bf16 bits in `<u2` files for `--dtype bf16`), optional\n"
                "`q_pos.npy`/`k_pos.npy` and factor lists (`long.npy`, `short.npy`, `ff.npy`), `expected.npy`\n"
                "(f64 scores, masked = -inf) and `args.txt` (the `ropeqk scores` flags; paths relative to the\n"
                "folder). Scaled cases take their frequencies from scripts/gen_scaling_fixtures.py's formulas.\n"
                "Run by tests/cli/test_cli_scores.c.\n")


if __name__ == "__main__":
    main()
