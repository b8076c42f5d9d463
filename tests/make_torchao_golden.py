"""Writes tests/golden/torchao_mx.txt: torchao's MX recipe (torchao.prototype.mx_formats
to_mx, eager, on the CPU) on inputs that tests/test_torchao_golden.c rebuilds bit for bit,
one line a case: float type, element type, torchao's scale mode, then FNV-1a 64 hashes of
its UE8M0 scale bytes and of its element codes (E2M1 packed two a byte, the lower index in
the low nibble, as torchao and this library store them). The C test runs the library's CPU
reference (tests/reference_mxops.h, held to the kernels by the emulated and GPU suites)
with the rule of the same name and compares the hashes. Needs torch and torchao:

    python3 tests/make_torchao_golden.py   (prints torchao's version, rewrites the file)

The inputs keep to what torchao's recipe and the contract agree on: finite values, group
maxima of at least 2^-100 (torchao divides by 2^-126 where the scale byte is 0, the contract
by 2^-127: docs/numerics.md), and groups of zeros."""
import os
import sys

import torch
import torchao
from torchao.prototype.mx_formats.mx_tensor import ScaleCalculationMode, to_mx

ROWS, K, G = 48, 256, 32
MASK64 = (1 << 64) - 1


def lcg(seed):
    s = seed
    while True:
        s = (s * 6364136223846793005 + 1442695040888963407) & MASK64
        yield s >> 33


def input_bits(bf16):
    """f32 bit patterns [ROWS * K]: a row magnitude 2^[-40, 40), elements within 2^[-6, 6)
    of it (exponent at least 2^-100), random mantissas, every 7th element on a coarse grid
    (ties of the element types' rounding), now and then a group of zeros; bf16: the low 16
    bits cleared (values of bf16)"""
    g = lcg(0x5EED0FB0 + bf16)
    out = []
    for r in range(ROWS):
        rowe = next(g) % 80 - 40
        zero_group = next(g) % (K // G) if r % 5 == 0 else -1
        for c in range(K):
            u, v = next(g), next(g)
            if c // G == zero_group:
                out.append(0 if u % 2 else 0x80000000)
                continue
            e = max(rowe + (u % 12) - 6, -100)
            mant = (v & 0x7FFFFF) if c % 7 else (v % 16) << 19
            bits = ((u >> 8) & 1) << 31 | (e + 127) << 23 | mant
            out.append(bits & 0xFFFF0000 if bf16 else bits)
    return out


def fnv(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def main():
    lines = ["# torchao %s, to_mx eager on the CPU; rows %d, cols %d, groups of %d (tests/make_torchao_golden.py)"
             % (torchao.__version__, ROWS, K, G)]
    elems = (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2), ("e2m1", torch.float4_e2m1fn_x2))
    modes = (("floor", ScaleCalculationMode.FLOOR), ("ceil", ScaleCalculationMode.CEIL),
             ("even", ScaleCalculationMode.EVEN), ("rceil", ScaleCalculationMode.RCEIL))
    for ft in ("f32", "bf16"):
        bits = torch.tensor(input_bits(ft == "bf16"), dtype=torch.int64).to(torch.int32)
        x = bits.view(torch.float32).view(ROWS, K)
        if ft == "bf16":
            x = x.to(torch.bfloat16)  # (exact: the low bits are 0)
        for en, et in elems:
            for mn, mode in modes:
                s, q = to_mx(x.contiguous(), et, G, mode)
                sb = s.view(torch.uint8).contiguous().view(-1).tolist()
                qb = q.view(torch.uint8).contiguous().view(-1).tolist()
                lines.append("%s %s %s %016x %016x" % (ft, en, mn, fnv(sb), fnv(qb)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "torchao_mx.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("torchao %s: %d cases into %s" % (torchao.__version__, len(lines) - 1, path), file=sys.stderr)


if __name__ == "__main__":
    main()
