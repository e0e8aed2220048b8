#!/usr/bin/env python3
"""Writes tests/data/scaling/*.txt: inverse frequencies and attention factors for each frequency-
scaling variant, evaluated in fp64 with NumPy straight from the published formulas (Hugging Face
`rope_scaling` semantics, as restated in docs/conventions.md), independently of the library's C code.

Run from the repository root: python3 scripts/gen_scaling_fixtures.py
The named model configurations use public config.json values: Llama 3.1 8B (llama3), a
Qwen2.5-style YaRN setting, Phi-3.5-mini-instruct (the Phi-3 mini architecture with LongRoPE)
and a linear-scaled 32k Llama 2 style model."""
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "scaling")

PHI35_LONG = [1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
              1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
              4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
              17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
              32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
              50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
              62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
              63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
              64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
              64.51000213623047, 64.52999877929688, 64.83999633789062]
PHI35_SHORT = [1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
               1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
               1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
               1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
               1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
               2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
               2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
               2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
               2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
               2.729999542236328, 2.749999523162842, 2.8399994373321533]


def default_inv(base, R):
    return 1.0 / base ** (np.arange(0, R, 2, dtype=np.float64) / R)


def linear(c):
    return default_inv(c["base"], c["rotary_dim"]) / c["factor"], 1.0


def dynamic(c):
    R, s, L, L0 = c["rotary_dim"], c["factor"], c["seq_len"], c["original_max_position"]
    base = c["base"]
    if L > L0:
        base = base * ((s * L / L0) - (s - 1)) ** (R / (R - 2))
    return default_inv(base, R), 1.0


def yarn(c):
    R, s, base, L0 = c["rotary_dim"], c["factor"], c["base"], c["original_max_position"]
    bf, bs = c.get("beta_fast", 32.0), c.get("beta_slow", 1.0)

    def corr(r):
        return R * math.log(L0 / (2 * math.pi * r)) / (2 * math.log(base))
    low = max(math.floor(corr(bf)), 0)
    high = min(math.ceil(corr(bs)), R - 1)
    if low == high:
        high += 0.001
    inv = default_inv(base, R)
    ramp = np.clip((np.arange(R // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    e = 1 - ramp
    attn = c.get("attention_factor", 0.1 * math.log(s) + 1 if s > 1 else 1.0)
    return (inv / s) * (1 - e) + inv * e, attn


def llama3(c):
    R, base = c["rotary_dim"], c["base"]
    s, lo, hi, L0 = c.get("factor", 8.0), c.get("low_freq_factor", 1.0), c.get("high_freq_factor", 4.0), \
        c.get("original_max_position", 8192)
    out = []
    for f in default_inv(base, R):
        w = 2 * math.pi / f
        if w < L0 / hi:
            out.append(f)
        elif w > L0 / lo:
            out.append(f / s)
        else:
            sm = (L0 / w - lo) / (hi - lo)
            out.append((1 - sm) * f / s + sm * f)
    return np.array(out), 1.0


def longrope(c):
    R, base, L0 = c["rotary_dim"], c["base"], c["original_max_position"]
    ext = np.array(c["long_factor"] if c["seq_len"] > L0 else c["short_factor"])
    s = c.get("factor", 1.0)
    attn = c.get("attention_factor", math.sqrt(1 + math.log(s) / math.log(L0)) if s > 1 else 1.0)
    return 1.0 / (ext * base ** (np.arange(0, R, 2, dtype=np.float64) / R)), attn


def none(c):
    return default_inv(c["base"], c["rotary_dim"]), 1.0


CASES = {
    "linear_llama2_32k": dict(type="linear", head_dim=128, rotary_dim=128, base=10000.0, factor=8.0),
    "dynamic_ntk_long": dict(type="dynamic", head_dim=128, rotary_dim=128, base=10000.0, factor=2.0,
                             original_max_position=4096, seq_len=16384),
    "dynamic_ntk_short": dict(type="dynamic", head_dim=64, rotary_dim=64, base=10000.0, factor=2.0,
                              original_max_position=4096, seq_len=4096),
    "yarn_qwen25": dict(type="yarn", head_dim=128, rotary_dim=128, base=1000000.0, factor=4.0,
                        original_max_position=32768),
    "yarn_partial_betas": dict(type="yarn", head_dim=128, rotary_dim=64, base=10000.0, factor=16.0,
                               original_max_position=4096, beta_fast=16.0, beta_slow=2.0, attention_factor=1.25),
    "llama3_llama31_8b": dict(type="llama3", head_dim=128, rotary_dim=128, base=500000.0, factor=8.0,
                              low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192),
    "longrope_phi35_long": dict(type="longrope", head_dim=96, rotary_dim=96, base=10000.0, factor=32.0,
                                original_max_position=4096, seq_len=131072, long_factor=PHI35_LONG,
                                short_factor=PHI35_SHORT),
    "longrope_phi35_short": dict(type="longrope", head_dim=96, rotary_dim=96, base=10000.0, factor=32.0,
                                 original_max_position=4096, seq_len=2048, long_factor=PHI35_LONG,
                                 short_factor=PHI35_SHORT),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    ff = list(1.0 + rng.random(16) * 7)
    CASES["freq_factors_none"] = dict(type="none", head_dim=40, rotary_dim=32, base=10000.0, freq_factors=ff)
    fns = dict(linear=linear, dynamic=dynamic, yarn=yarn, llama3=llama3, longrope=longrope, none=none)
    for name, c in sorted(CASES.items()):
        inv, attn = fns[c["type"]](c)
        if "freq_factors" in c:
            inv = inv / np.array(c["freq_factors"])
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write("# generated by scripts/gen_scaling_fixtures.py (fp64 NumPy from the published formulas)\n")
            for k, v in c.items():
                if isinstance(v, list):
                    f.write("%s %s\n" % (k, " ".join(repr(float(x)) for x in v)))
                else:
                    f.write("%s %s\n" % (k, v))
            f.write("expect_attention_factor %r\n" % float(attn))
            f.write("expect_inv %s\n" % " ".join(repr(float(x)) for x in inv))


if __name__ == "__main__":
    main()
