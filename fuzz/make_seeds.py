#!/usr/bin/env python3
"""Writes the committed seed corpora of the libFuzzer targets (scripts/fuzz.sh runs them):

  fuzz/corpus/validate/  calls in fuzz_validate.c's input format (described at the top of that
                         file; i64/i32/f64/tensor/factor_list below mirror its decoder): valid
                         problems of every kind (layouts, GQA, dtypes, strides, masks, positions,
                         each frequency scaling) and near-valid ones that each break one rule;
  fuzz/corpus/npy/       a few NumPy-written fixtures from tests/data/npy/ plus hand-made images
                         (every format version, odd but legal headers, and near misses).

Run from anywhere: python3 fuzz/make_seeds.py. Output is deterministic; commit it.
"""
import math
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VALIDATE = ROOT / "corpus" / "validate"
NPY = ROOT / "corpus" / "npy"
FIXTURES = ROOT.parent / "tests" / "data" / "npy"

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
F32, F16, BF16, F64 = 0, 1, 2, 3
ES = {F32: 4, F16: 2, BF16: 2, F64: 8}
NONE, LINEAR, DYNAMIC, YARN, LLAMA3, LONGROPE = range(6)

# ---- the encodings of rd_i64 / rd_i32 / rd_f64 in fuzz_validate.c --------------------------------


def i64(v, es=1):
    if 0 <= v < 0xC0:
        return bytes([v])
    special = {-1: 0, INT64_MAX: 1, INT64_MIN: 2, INT32_MAX: 7, INT32_MIN: 8, INT32_MAX + 1: 9}
    if v in special:
        return bytes([0xC0 + special[v]])
    if v > 0 and v & (v - 1) == 0 and v.bit_length() - 1 < 63:
        return bytes([0xC3, v.bit_length() - 1])
    if v % es == 0 and 0 <= v // es < 65536:
        return bytes([0xC0 + 12]) + struct.pack("<H", v // es)
    return bytes([0xC0 + 13]) + struct.pack("<q", v)


def i32(v):
    if 0 <= v < 0xC0:
        return bytes([v])
    special = {-1: 0, INT32_MAX: 1, INT32_MIN: 2}
    if v in special:
        return bytes([0xC0 + special[v]])
    if 192 <= v < 448:
        return bytes([0xC7, v - 192])
    if 0 <= v < 65536:
        return bytes([0xC4]) + struct.pack("<H", v)
    return bytes([0xC3]) + struct.pack("<i", v)


def f64(v):
    if math.isnan(v):
        return bytes([0x80])
    if v == math.inf:
        return bytes([0x81])
    if v == -math.inf:
        return bytes([0x82])
    if v == 0 and math.copysign(1, v) < 0:
        return bytes([0x83])
    if v == int(v) and 0 <= v < 0x40:
        return bytes([int(v)])
    if 0 <= v * 16 < 0x40 and v * 16 == int(v * 16):
        return bytes([0x40 + int(v * 16)])
    named = {-1.0: 7, 10000.0: 9, 500000.0: 10, 1e300: 11, 1e-300: 8}
    if v in named:
        return bytes([0x80 + named[v]])
    return bytes([0x80 + 12]) + struct.pack("<d", v)


# ---- a call ----------------------------------------------------------------------------------------


def bhsd(dtype, B, H, S, D):
    return dict(dtype=dtype, ne=(B, H, S, D), mode=0)


def bshd(dtype, B, H, S, D):
    return dict(dtype=dtype, ne=(B, H, S, D), mode=1)


def strided(dtype, ne, nb):
    return dict(dtype=dtype, ne=ne, mode=2, nb=nb)


def tensor(t):
    es = ES.get(t["dtype"], 1)
    b = i32(t["dtype"]) + b"".join(i64(n) for n in t["ne"]) + bytes([t["mode"]])
    if t["mode"] == 2:
        b += b"".join(i64(n, es) for n in t["nb"])
    elif t["mode"] == 3:
        b += bytes([t["dim"]]) + i64(t["stride"], es)
    return b


def factor_list(spec):
    """None: NULL/0; ('null', n); ('auto', values): R/2 entries; ('n', n, values)."""
    if spec is None:
        return bytes([0])
    if spec[0] == "null":
        return bytes([1]) + i32(spec[1])
    if spec[0] == "auto":
        b, vals = bytes([3]), spec[1]
    else:
        b, vals = bytes([2]) + i32(spec[1]), spec[2]
    return b + bytes([len(vals)]) + b"".join(f64(v) for v in vals)


# Q/K fill bytes, cycled: f32 values 1, -0.5, 0.2, 2 (f16/bf16 read them two bytes at a time).
PAYLOAD = struct.pack("<4f", 1.0, -0.5, 0.2, 2.0)


def call(q, k, out, layout=0, rotary_dim=0, base=0.0, scale=0.0, causal=False, conjugate=False,
         qpos=False, kpos=False, real=True, pos_mode=0, q_off=0, k_off=0, window=0,
         stype=NONE, factor=0.0, l0=0, seq_len=0, beta_fast=0.0, beta_slow=0.0, attn=0.0,
         low_ff=0.0, high_ff=0.0, long_f=None, short_f=None, freq_f=None, payload=PAYLOAD):
    flags = causal | conjugate << 1 | qpos << 2 | kpos << 3 | real << 4 | pos_mode << 5
    b = bytes([flags]) + i32(layout) + i32(rotary_dim) + f64(base) + f64(scale)
    b += i64(q_off) + i64(k_off) + i64(window)
    b += i32(stype) + f64(factor) + i64(l0) + i64(seq_len)
    b += b"".join(f64(v) for v in (beta_fast, beta_slow, attn, low_ff, high_ff))
    b += tensor(q) + tensor(k) + tensor(out)
    b += factor_list(long_f) + factor_list(short_f) + factor_list(freq_f)
    return b + payload


def basic(B=1, Hq=2, Hkv=2, Sq=4, Sk=4, D=8, qt=F32, kt=F32, ot=F32, layout=bhsd, **kw):
    return call(layout(qt, B, Hq, Sq, D), layout(kt, B, Hkv, Sk, D), bhsd(ot, B, Hq, Sq, Sk), **kw)


def validate_seeds():
    s = {}
    # valid
    s["ok-basic-f32"] = basic()
    s["ok-bshd-half-split"] = call(bshd(F32, 1, 2, 3, 8), bshd(F32, 1, 2, 5, 8), bhsd(F32, 1, 2, 3, 5), layout=1)
    s["ok-partial-rotary"] = basic(D=12, rotary_dim=4)
    s["ok-causal-offsets"] = basic(Sq=3, Sk=6, causal=True, q_off=3)
    s["ok-window-conjugate"] = basic(Sq=6, Sk=6, causal=True, window=2, conjugate=True)
    s["ok-gqa"] = basic(Hq=4, Hkv=2, Sq=2, Sk=3)
    s["ok-mqa-f16-bf16"] = basic(Hq=3, Hkv=1, qt=F16, kt=BF16)
    s["ok-out-f64-scale-base"] = basic(ot=F64, scale=0.25, base=500000.0)
    s["ok-positions-arrays"] = basic(Sq=3, Sk=5, qpos=True, kpos=True, causal=True, pos_mode=0)
    s["ok-positions-raw"] = basic(Sq=2, Sk=3, qpos=True, kpos=True, pos_mode=1, window=3)
    s["ok-positions-extreme"] = basic(Sq=2, Sk=2, qpos=True, pos_mode=6, causal=True)
    s["ok-padded-strides"] = call(strided(F32, (2, 2, 3, 4), (512, 128, 32, 4)),
                                  strided(F32, (2, 1, 5, 4), (256, 256, 48, 4)),
                                  strided(F64, (2, 2, 3, 5), (1024, 256, 64, 8)))
    s["ok-transposed-out"] = call(bhsd(F32, 1, 1, 3, 4), bhsd(F32, 1, 1, 2, 4),
                                  strided(F32, (1, 1, 3, 2), (24, 24, 4, 12)))
    s["ok-broadcast-dims"] = call(strided(F32, (1, 1, 1, 2), (0, 0, 0, 4)),
                                  strided(F32, (1, 1, 1, 2), (0, 0, 0, 4)), strided(F32, (1, 1, 1, 1), (0, 0, 0, 0)))
    s["ok-d2"] = basic(D=2, Sq=1, Sk=1)
    s["ok-linear"] = basic(stype=LINEAR, factor=2.0)
    s["ok-dynamic"] = basic(stype=DYNAMIC, factor=2.0, l0=2, q_off=5, k_off=5)
    s["ok-dynamic-seq-len-positions"] = basic(stype=DYNAMIC, factor=4.0, l0=4, seq_len=64, qpos=True, kpos=True)
    s["ok-yarn"] = basic(D=16, stype=YARN, factor=4.0, l0=16)
    s["ok-yarn-betas-attn"] = basic(D=16, stype=YARN, factor=8.0, l0=32, beta_fast=16.0, beta_slow=2.0, attn=1.5)
    s["ok-llama3"] = basic(D=16, stype=LLAMA3)
    s["ok-llama3-explicit"] = basic(D=16, stype=LLAMA3, factor=32.0, l0=16, low_ff=1.0, high_ff=2.0)
    s["ok-longrope"] = basic(stype=LONGROPE, l0=2, factor=4.0, long_f=("auto", [1.0, 2.0]),
                             short_f=("auto", [1.0, 1.5]), q_off=4)
    s["ok-longrope-short"] = basic(stype=LONGROPE, l0=64, seq_len=8, long_f=("auto", [3.0]),
                                   short_f=("auto", [0.5, 1.0, 2.0]))
    s["ok-freq-factors"] = basic(D=8, rotary_dim=8, freq_f=("auto", [1.0, 2.0, 4.0, 8.0]))
    s["ok-big-validation-only"] = basic(B=2, Hq=8, Hkv=2, Sq=256, Sk=256, D=128, real=False)
    # near-valid: one broken rule each
    s["bad-rotary-odd"] = basic(rotary_dim=3)
    s["bad-rotary-too-big"] = basic(rotary_dim=10)
    s["bad-heads"] = basic(Hq=3, Hkv=2)
    s["bad-batch"] = call(bhsd(F32, 2, 1, 2, 4), bhsd(F32, 1, 1, 2, 4), bhsd(F32, 2, 1, 2, 2))
    s["bad-out-shape"] = call(bhsd(F32, 1, 1, 2, 4), bhsd(F32, 1, 1, 3, 4), bhsd(F32, 1, 1, 2, 2))
    s["bad-negative-stride"] = call(strided(F32, (1, 1, 2, 4), (32, 32, -16, 4)), bhsd(F32, 1, 1, 2, 4),
                                    bhsd(F32, 1, 1, 2, 2))
    s["bad-misaligned-stride"] = call(strided(F32, (1, 1, 2, 4), (32, 32, 18, 4)), bhsd(F32, 1, 1, 2, 4),
                                      bhsd(F32, 1, 1, 2, 2))
    s["bad-alias"] = call(strided(F32, (1, 2, 2, 4), (64, 16, 16, 4)), bhsd(F32, 1, 2, 2, 4),
                          bhsd(F32, 1, 2, 2, 2))
    s["bad-d-not-contiguous"] = call(strided(F32, (1, 1, 2, 4), (64, 64, 32, 8)), bhsd(F32, 1, 1, 2, 4),
                                     bhsd(F32, 1, 1, 2, 2))
    s["bad-stride-overflow"] = call(strided(F32, (1, 1, 3, 4), (16, 16, 2**62, 4)), bhsd(F32, 1, 1, 2, 4),
                                    bhsd(F32, 1, 1, 3, 2))
    s["bad-extent-near-limit"] = call(strided(F32, (1, 1, 2, 4), (16, 16, (INT64_MAX // 4 - 3) * 4, 4)),
                                      bhsd(F32, 1, 1, 2, 4), bhsd(F32, 1, 1, 2, 2))
    s["bad-numel-overflow"] = call(strided(F32, (2**31, 2**31, 4, 2), (0, 0, 0, 4)), bhsd(F32, 1, 1, 2, 2),
                                   bhsd(F32, 1, 1, 2, 2))
    s["bad-zero-dim"] = basic(Sq=0)
    s["bad-d-too-big"] = basic(D=65537, Sq=1, Sk=1, real=False)
    s["bad-q-f64"] = basic(qt=F64)
    s["bad-out-f16"] = basic(ot=F16)
    s["bad-dtype-7"] = basic(qt=7)
    s["bad-layout"] = call(bhsd(F32, 1, 1, 2, 4), bhsd(F32, 1, 1, 2, 4), bhsd(F32, 1, 1, 2, 2), layout=2)
    s["bad-base-negative"] = basic(base=-1.0)
    s["bad-base-nan"] = basic(base=math.nan)
    s["bad-scale-inf"] = basic(scale=math.inf)
    s["bad-window-negative"] = basic(window=-1)
    s["bad-position-range"] = basic(Sq=2, q_off=INT32_MAX)
    s["bad-position-range-low"] = basic(k_off=INT32_MIN - 1)
    s["bad-none-with-factor"] = basic(factor=2.0)
    s["bad-linear-no-factor"] = basic(stype=LINEAR)
    s["bad-dynamic-r2"] = basic(D=2, stype=DYNAMIC, factor=2.0, l0=4)
    s["bad-dynamic-positions-no-seq-len"] = basic(stype=DYNAMIC, factor=2.0, l0=4, qpos=True)
    s["bad-yarn-beta-nan"] = basic(stype=YARN, factor=2.0, l0=8, beta_fast=math.nan)
    s["bad-llama3-equal-ff"] = basic(stype=LLAMA3, low_ff=2.0, high_ff=2.0)
    s["bad-longrope-short-list"] = basic(stype=LONGROPE, l0=8, long_f=("n", 3, [1.0]), short_f=("auto", [1.0]))
    s["bad-longrope-null-claimed"] = basic(stype=LONGROPE, l0=8, long_f=("null", 4), short_f=("auto", [1.0]))
    s["bad-longrope-huge-count"] = basic(stype=LONGROPE, l0=8, long_f=("n", INT32_MAX, [1.0]),
                                         short_f=("n", -1, [1.0]))
    s["bad-lists-on-linear"] = basic(stype=LINEAR, factor=2.0, long_f=("auto", [1.0]))
    s["bad-freq-factors-negative"] = basic(freq_f=("auto", [1.0, -2.0]))
    s["bad-freq-factors-zero-count"] = basic(freq_f=("n", 0, [1.0]))
    s["bad-scaling-type"] = basic(stype=6)
    s["bad-attn-nan"] = basic(stype=YARN, factor=2.0, l0=8, attn=math.nan)
    return s


# ---- hand-made .npy images -------------------------------------------------------------------------


def npy_image(header, data=b"", major=1, pad=True):
    pre = 10 if major == 1 else 12
    h = header
    if pad:
        h += " " * ((64 - (pre + len(h) + 1) % 64) % 64)
    h = (h + "\n").encode("latin-1")
    ln = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + ln + h + data


def hdr(descr, shape, fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def npy_seeds():
    s = {}
    s["hand-v2-i32"] = npy_image(hdr("<i4", "(2,)"), struct.pack("<2i", -7, 7), major=2)
    s["hand-v3-u16"] = npy_image(hdr("<u2", "(3,)"), struct.pack("<3H", 1, 2, 65535), major=3)
    s["hand-tolerant-syntax"] = npy_image("{\"shape\":(2,1,),'fortran_order':False,\"descr\":'<f2'}",
                                          struct.pack("<2H", 0x3C00, 0xC000), pad=False)
    s["hand-8-dims"] = npy_image(hdr("<f8", "(1, 1, 1, 1, 1, 1, 1, 2)"), struct.pack("<2d", 0.5, -0.5))
    s["hand-zero-and-huge"] = npy_image(hdr("<i8", "(9223372036854775807, 0)"))
    s["hand-scalar-i64"] = npy_image(hdr("<i8", "()"), struct.pack("<q", -1))
    s["hand-big-endian"] = npy_image(hdr(">f4", "(1,)"), b"\0\0\x80\x3f")
    s["hand-structured"] = npy_image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                                     b"\0" * 4)
    s["hand-short-data"] = npy_image(hdr("<f4", "(4,)"), b"\0" * 12)
    s["hand-no-trailing-comma"] = npy_image(hdr("<f4", "(5)"), b"\0" * 20)
    s["hand-header-past-end"] = npy_image(hdr("<f4", "(1,)"), b"\0" * 4)[:40]
    return s


FIXTURE_SEEDS = ["f32_4d.npy", "f16_1d.npy", "f64_2d.npy", "scalar_0d.npy", "empty_2x0x3.npy",
                 "v3_f32.npy", "bad_fortran.npy"]


def write_dir(path, seeds):
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    for name, data in sorted(seeds.items()):
        (path / name).write_bytes(data)


def main():
    v = validate_seeds()
    write_dir(VALIDATE, v)
    n = npy_seeds()
    write_dir(NPY, n)
    for f in FIXTURE_SEEDS:
        shutil.copyfile(FIXTURES / f, NPY / f)
    total = sum(p.stat().st_size for d in (VALIDATE, NPY) for p in d.iterdir())
    print(f"make_seeds: {len(v)} validate seeds, {len(n) + len(FIXTURE_SEEDS)} npy seeds, {total} bytes")


if __name__ == "__main__":
    sys.exit(main())
