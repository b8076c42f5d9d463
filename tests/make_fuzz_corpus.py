#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz_api.c into tests/fuzz_corpus/ (the input format is
described at the top of fuzz_api.c): every prebuilt plan with a valid call, each launch
bound just inside and just outside, garbage descriptors, NULL descriptors, plans and args.
Files whose names start with regress_ are inputs the fuzzer once failed on; they are kept
as they were found and never rewritten here."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_corpus")

# tests/fuzz_api.c's TABLE, by name
T = {"quantize_tensor_f32": 0, "quantize_channel_f32": 1, "quantize_channel_f64": 2, "dequantize_token_bf16": 3,
     "fake_quantize_group_f16_bwd": 4, "quantize_group_f32": 5, "quantize_token_f64_bwd": 6,
     "dequantize_channel_f16_bwd": 7, "fake_quantize_tensor_bf16": 8, "dynamic_tensor_f32": 9,
     "dynamic_token_bf16": 10, "dynamic_group_f16_asym": 11, "weight_sums": 12, "smoothquant_tensor_f16": 13,
     "smoothquant_token_bf16_asym": 14, "quantized_linear_f32_f16": 15}
F = dict(x=0, y=1, dy=2, dx=3, numel=4, rank=5, shape=6, axis=7, rows=8, cols=9, x_row_stride=10, y_row_stride=11,
         group_size=12, group_row_stride=13, scale=14, zero_point=15, scales=16, zero_points=17, out_scales=18,
         out_zero_points=19, n=20, w=21, w_scales=22, bias=23, w_sums=24)
D = dict(op=0, direction=1, granularity=2, float_type=3, int_type=4, qmin=5, qmax=6, scale_type=7, device=8,
         asymmetric=9, out_type=10)


def size(v):  # raw 64-bit
    return bytes([255]) + struct.pack("<q", v)


def i32(v):
    return struct.pack("<i", v)


def edit(field, value):
    f = F[field]
    if field in ("rank", "axis", "zero_point"):
        return bytes([f]) + i32(value)
    if field == "scale":
        return bytes([f, 255]) + struct.pack("<d", value)
    if isinstance(value, tuple):  # shape[k]
        return bytes([f, value[0]]) + size(value[1])
    if field in ("x", "y", "dy", "dx", "scales", "zero_points", "out_scales", "out_zero_points", "w", "w_scales",
                 "bias", "w_sums"):
        return bytes([f, value])  # 0 NULL, 1..127 aligned, 128..239 misaligned
    return bytes([f]) + size(value)


def table(name, edits=(), base=1, ws=1, stream=0, desc_edits=()):
    b = bytes([0, T[name], len(desc_edits)])
    for field, v in desc_edits:
        b += bytes([D[field]]) + i32(v)
    b += bytes([base, ws, stream])
    for e in edits:
        b += edit(*e)
    return b


def raw(fields, edits=(), base=1, ws=1):
    b = bytes([1])
    for k in ("op", "direction", "granularity", "float_type", "int_type", "qmin", "qmax", "scale_type", "device",
              "asymmetric", "out_type"):
        b += i32(fields.get(k, 0))
    b += bytes([base, ws, 0])
    for e in edits:
        b += edit(*e)
    return b


seeds = {}
for name in T:
    seeds["valid_" + name] = table(name)
seeds["valid_quantize_tensor_f32_stream_no_workspace"] = table("quantize_tensor_f32", ws=0, stream=1)
seeds["dynamic_tensor_small_workspace"] = table("dynamic_tensor_f32", ws=2)
seeds["dynamic_tensor_misaligned_workspace"] = table("dynamic_tensor_f32", ws=3)
seeds["quantized_linear_no_workspace"] = table("quantized_linear_f32_f16", ws=0)
# per channel, the axis innermost (bq_affine_cols): 2^39 channels and one more
seeds["channel_cols_2p39"] = table("quantize_channel_f32", [("rank", 2), ("shape", (0, 3)), ("shape", (1, 1 << 39)),
                                                          ("axis", 1)])
seeds["channel_cols_2p39_plus_1"] = table("quantize_channel_f32", [("rank", 2), ("shape", (0, 3)),
                                                                  ("shape", (1, (1 << 39) + 1)), ("axis", 1)])
seeds["channel_cols_2p41"] = table("quantize_channel_f32", [("rank", 2), ("shape", (0, 3)), ("shape", (1, 1 << 41)),
                                                          ("axis", 1)])
seeds["channel_f64_axis0_2p39"] = table("quantize_channel_f64", [("rank", 2), ("shape", (0, 1 << 39)),
                                                                ("shape", (1, 5)), ("axis", 0)])
# per group, bq_affine_blocks past 2^24 blocks (the grid is capped, the warps stride)
seeds["group_blocks_2p28_items"] = table("quantize_group_f32", [("rows", 1 << 23), ("cols", 4096),
                                                               ("group_size", 4)])
seeds["token_f64_bwd_many_rows"] = table("quantize_token_f64_bwd", [("rows", 1 << 40), ("cols", 64)])
seeds["dequantize_token_max_elems"] = table("dequantize_token_bf16", [("rows", 1 << 28), ("cols", 1 << 28)])
seeds["dynamic_token_many_rows"] = table("dynamic_token_bf16", [("rows", 1 << 40), ("cols", 8)])
seeds["dynamic_group_long_rows"] = table("dynamic_group_f16_asym", [("rows", 3), ("cols", 1 << 40),
                                                                   ("group_size", 1 << 20)])
# weight sums: K = 2^24 and one more; N x K past 2^56
seeds["weight_sums_k_2p24"] = table("weight_sums", [("n", 0x7fffffff), ("cols", 1 << 24)])
seeds["weight_sums_k_2p24_plus_1"] = table("weight_sums", [("n", 4096), ("cols", (1 << 24) + 1)])
seeds["weight_sums_nk_too_large"] = table("weight_sums", [("n", 0x7fffffff), ("cols", (1 << 25) + 1)])
seeds["weight_sums_float_type_77"] = table("weight_sums", desc_edits=[("float_type", 77)])
seeds["weight_sums_asymmetric"] = table("weight_sums", desc_edits=[("asymmetric", 1)])
# linear layers: the largest grids validation allows
seeds["smoothquant_large_grid"] = table("smoothquant_tensor_f16", [("rows", 0x7fffffff), ("n", 0x7fffffff),
                                                                    ("cols", 16)])
seeds["quantized_linear_m_256"] = table("quantized_linear_f32_f16", [("rows", 256), ("n", 1 << 20)])
seeds["quantized_linear_m_1"] = table("quantized_linear_f32_f16", [("rows", 1), ("n", 0x7fffffff)])
# garbage fields, raw descriptors
seeds["raw_all_zero"] = raw({})
seeds["raw_op_77"] = raw({"op": 77, "float_type": 1})
seeds["raw_float_type_77"] = raw({"op": 1, "float_type": 77})
seeds["raw_negative_fields"] = raw({"op": 1, "direction": -1, "granularity": -1, "float_type": -1, "qmin": -999,
                                    "qmax": 999, "device": -5, "asymmetric": -1})
seeds["raw_dynamic_backward"] = raw({"op": 4, "direction": 1, "float_type": 1})
seeds["raw_linear_f64_scales"] = raw({"op": 6, "float_type": 2, "scale_type": 2, "out_type": 3})
seeds["raw_quantized_linear_per_tensor"] = raw({"op": 5, "granularity": 0, "float_type": 1})
seeds["raw_qrange_inverted"] = raw({"op": 1, "float_type": 1, "qmin": 5, "qmax": -5})
# NULLs
seeds["null_desc"] = bytes([2])
seeds["null_plan"] = bytes([3, 1, 1, 0])
seeds["null_args"] = table("quantize_tensor_f32", base=2)
seeds["garbage_args"] = table("quantize_channel_f32", [("rank", -3), ("axis", 1 << 30), ("x", 200), ("scale", -1.0)])
seeds["nan_scale"] = table("quantize_tensor_f32", [("scale", float("nan"))])

os.makedirs(OUT, exist_ok=True)
for f in os.listdir(OUT):
    if not f.startswith("regress_"):
        os.remove(os.path.join(OUT, f))
for name, data in sorted(seeds.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("%d seeds in %s" % (len(seeds), OUT))
