#!/usr/bin/env python3
"""Writes the fixtures of the `ropeqk scores` tests: tests/data/cli/<case>/.

Each case folder holds q.npy and k.npy (the inputs, f32 or f16, C order), optional position files,
expected.npy (f64 [B,Hq,Sq,Sk], masked entries -inf) and args.txt (the `ropeqk scores` flags of the
case; file names in it are relative to the case folder). The expected scores come from an
independent NumPy evaluation of ROPE.md in fp64 (no code shared with the library):

    inv_freq[i] = base^(-2i/R),  a = p * inv_freq[i]  (negated for --conjugate)
    interleaved pairs (x[2i], x[2i+1]), half-split pairs (x[i], x[i+R/2]); dims R..D-1 unrotated
    S[b,h,i,j] = scale * <rope(q[b,h,i], pq[i]), rope(k[b,h/G,j], pk[j])>, -inf where pk[j] > pq[i]

Usage: /usr/bin/python3 scripts/gen_cli_fixtures.py [OUTDIR]   (default tests/data/cli)
Needs NumPy. Deterministic: rerunning rewrites identical files.
"""
import os
import shutil
import sys

import numpy as np


def rope(x, pos, rotary_dim, base, layout, conjugate):
    """x: [..., S, D] float64, pos: [S] integers. Returns the rotated copy."""
    R = rotary_dim
    inv = base ** (-2.0 * np.arange(R // 2, dtype=np.float64) / R)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]  # [S, R/2]
    if conjugate:
        ang = -ang
    c, s = np.cos(ang), np.sin(ang)
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


def scores(q, k, pq, pk, rotary_dim, base, layout, conjugate, scale, causal):
    """q: [B,Hq,Sq,D], k: [B,Hkv,Sk,D] float64 (BHSD). Returns [B,Hq,Sq,Sk] float64."""
    G = q.shape[1] // k.shape[1]
    qr = rope(q, pq, rotary_dim, base, layout, conjugate)
    kr = np.repeat(rope(k, pk, rotary_dim, base, layout, conjugate), G, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", qr, kr)
    if causal:
        mask = np.asarray(pk)[None, :] > np.asarray(pq)[:, None]
        s[:, :, mask] = -np.inf
    return s


def case(out, name, rng, *, B, Hq, Hkv, Sq, Sk, D, layout="interleaved", rotary_dim=None, base=10000.0,
         scale=None, causal=False, conjugate=False, q_off=0, k_off=0, q_pos=None, k_pos=None,
         dtype=np.float32, bshd=False, write_defaults=False):
    """Writes one case. q_pos/k_pos: (array, numpy int dtype) per-token position files."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    q = rng.standard_normal((B, Hq, Sq, D)).astype(dtype)
    k = rng.standard_normal((B, Hkv, Sk, D)).astype(dtype)
    R = rotary_dim or D
    sc = scale if scale is not None else 1.0 / np.sqrt(D)
    pq = np.asarray(q_pos[0]) if q_pos is not None else q_off + np.arange(Sq)
    pk = np.asarray(k_pos[0]) if k_pos is not None else k_off + np.arange(Sk)
    s = scores(q.astype(np.float64), k.astype(np.float64), pq, pk, R, base, layout, conjugate, sc, causal)
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
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("# `ropeqk scores` fixtures\n\n"
                "Written by `scripts/gen_cli_fixtures.py` (NumPy, fp64, independent of the library). Each folder:\n"
                "`q.npy`, `k.npy` (inputs), optional `q_pos.npy`/`k_pos.npy`, `expected.npy` (f64 scores,\n"
                "masked = -inf) and `args.txt` (the `ropeqk scores` flags; paths relative to the folder).\n"
                "Run by tests/cli/test_cli_scores.c.\n")


if __name__ == "__main__":
    main()
