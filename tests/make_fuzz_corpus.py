#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz_api.c into tests/fuzz_corpus/ (the input format is
described at the top of fuzz_api.c): a sample of the library's enumerated descriptors
(bq__all_descs, by index) each with a valid call of every variant, the environment switches
(lazy loading off, warpgroup MMA off, PTX), workspace and stream modes, descriptor edits,
raw and NULL descriptors, NULL plans and arguments, launch bounds just inside and just
outside, and the inputs that once found bugs (regress_*, rewritten here in the current
format: each names what it reproduces).

The member and slot numbers come from the header itself: bq_desc's members in order (each
int-sized) and bq_args' 8-byte slots, parsed from baracuda_quant.h, so the seeds keep their
meaning when a member is added. Enumerated indices do not: they pick whatever desc the
enumeration has there (any desc is a good seed)."""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fuzz_corpus")
HEADER = os.path.join(HERE, "..", "baracuda_quant.h")


def struct_members(name):
    """(member, byte offset, size) of `typedef struct name { ... } name;` in the header"""
    text = open(HEADER).read()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, off = [], 0
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        m = re.match(r"(.*?)([A-Za-z_]\w*(?:\s*,\s*\**\s*[A-Za-z_]\w*)*)\s*(\[\w+\])?$", decl, re.S)
        typ, names, arr = m.group(1), m.group(2), m.group(3)
        count = 8 if arr else 1  # BQ_MAX_RANK
        for n in names.split(","):
            ptr = "*" in typ or "*" in n
            n = n.replace("*", "").strip()
            size = 8 if ptr or re.search(r"int64_t|double", typ) else 4
            off = (off + size - 1) // size * size
            out.append((n, off, size * count))
            off += size * count
    return out


DESC = {n: off // 4 for n, off, _ in struct_members("bq_desc")}
ARGS = {n: off // 8 for n, off, _ in struct_members("bq_args")}
NDESC = len(DESC)

# the header's enums, by value
OP = dict(quantize=1, dequantize=2, fake_quantize=3, dynamic=4, quantized_linear=5, smoothquant=6, weight_sums=7,
          rmsnorm=8, gated=9)
GRAN = dict(tensor=1, channel=2, token=3, group=4, block=5)
T = dict(f32=1, f64=2, f16=3, bf16=4, s8=5, u8=6, s32=7, e4m3=8, e5m2=9, ue8m0=10, ue8m0x4=11)
INTERESTING = [0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 257, 1000, 4095, 4096,
               65535, 65536, (1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 27) + 3, 0x7fffffff, 0x80000000,
               0xffffffff, 1 << 32, (1 << 39) - 1, 1 << 39, (1 << 39) + 1, 1 << 41, (1 << 56) - 1, 1 << 56,
               (1 << 56) + 1, 1 << 62, (1 << 63) - 1, -1, -2, -4096, -(1 << 63), 32768, 32769, (1 << 30) + 1,
               1 << 61, (1 << 62) + 1, (1 << 54) + 1]


def i32(v):
    return struct.pack("<i", v)


def desc_bytes(fields):
    """a raw desc: every member, 0 unless named"""
    vals = [0] * NDESC
    for k, v in fields.items():
        vals[DESC[k]] = v
    return b"".join(i32(v) for v in vals)


def arg(field, value, how=None):
    """one bq_args edit: a size (raw 64-bit), a pointer (the fuzzer's ptr_value byte), a double,
    an int32; fields given as name or (name, k) for shape[k]"""
    slot = ARGS[field] if isinstance(field, str) else ARGS[field[0]] + field[1]
    name = field if isinstance(field, str) else field[0]
    if how is None:
        how = ("ptr" if name in ("x", "y", "dy", "dx", "scales", "zero_points", "out_scales", "out_zero_points", "w",
                                 "w_scales", "bias", "w_sums", "residual", "norm_weight", "out", "mask")
               else "double" if name in ("scale", "eps", "amax_bound")
               else "i32" if name in ("rank", "axis", "zero_point") else "size")
    if how == "size":
        if value in INTERESTING:
            return bytes([slot, 0, INTERESTING.index(value)])
        return bytes([slot, 0, 255]) + struct.pack("<q", value)
    if how == "ptr":  # 0 NULL, 1..31 aligned regions, 32..159 misaligned, 160..254 16-byte offsets
        return bytes([slot, 1, value])
    if how == "double":
        return bytes([slot, 2, 255]) + struct.pack("<d", value)
    if how == "i32":
        return bytes([slot, 3]) + i32(value)
    if how == "delta":
        return bytes([slot, 5, value & 255])
    raise ValueError(how)


def call(flags=1, variant=0, ws=1, stream=0, args=()):
    return bytes([flags, variant, ws, stream]) + b"".join(arg(*a) for a in args)


def enum(index, edits=(), **kw):
    """an enumerated desc (by index), edits of (member, how, value): how 0 raw i32, 1 the
    member of enumerated desc `value`, 2 small, 3 delta"""
    b = bytes([0]) + struct.pack("<H", index) + bytes([len(edits)])
    for m, how, v in edits:
        b += bytes([DESC[m], how]) + (i32(v) if how == 0 else struct.pack("<H", v) if how == 1 else bytes([v & 255]))
    return b + call(**kw)


def raw(fields, **kw):
    return bytes([1]) + desc_bytes(fields) + call(**kw)


seeds = {}
# a sample of the enumeration (about 2500 descs): every 9th, each variant in turn
for i in range(0, 2600, 9):
    seeds["enum_%04d_v%d" % (i, i % 8)] = enum(i, variant=i % 8)
# the environment: lazy off, wgmma off, PTX; a stream, no or a bad workspace
for i, (flags, name) in enumerate([(1 | 4, "lazy_off"), (1 | 8, "wgmma_off"), (1 | 16, "force_ptx"),
                                   (1 | 4 | 8 | 16, "all_env")]):
    for j in range(0, 2600, 211):
        seeds["env_%s_%04d" % (name, j + i)] = enum(j + i, flags=flags, variant=(j + i) % 8)
for k in range(1, 8):  # bq_sku for another sm as well
    for j in range(k, 2600, 433):
        seeds["sm%d_%04d" % (k, j)] = enum(j, flags=1 | k << 5, variant=j % 8)
for ws in range(5):
    seeds["ws%d_dynamic_tensor" % ws] = raw(dict(op=OP["dynamic"], float_type=T["f32"]), ws=ws, stream=1)
    seeds["ws%d_quantized_linear" % ws] = raw(dict(op=OP["quantized_linear"], float_type=T["bf16"]), ws=ws,
                                              variant=ws)
# descriptor edits: each member set from another enumerated desc, small values, deltas, raw
for m in DESC:
    seeds["edit_%s_copy" % m] = enum(7 * DESC[m] + 100, [(m, 1, 1500 + 37 * DESC[m])], variant=DESC[m] % 8)
    seeds["edit_%s_small" % m] = enum(11 * DESC[m] + 900, [(m, 2, -1), (m, 3, 2)], variant=(DESC[m] + 3) % 8)
    seeds["edit_%s_raw" % m] = enum(13 * DESC[m] + 1700, [(m, 0, 0x7fffffff)], variant=(DESC[m] + 5) % 8)
# entry points the sample may miss: the large tiles (warpgroup MMA off), weight streaming of
# 64 rows, the fused register and narrow entries
seeds["kernel_gemm_large"] = raw(dict(op=OP["smoothquant"], float_type=T["f16"]), flags=1 | 8, variant=4)
seeds["kernel_gemv64"] = raw(dict(op=OP["smoothquant"], float_type=T["bf16"], granularity=GRAN["token"]), variant=2)
seeds["kernel_fused_c2"] = raw(dict(op=OP["rmsnorm"], float_type=T["f32"]), variant=3, args=[("cols", 1500)])
seeds["kernel_fused_c2d"] = raw(dict(op=OP["gated"], float_type=T["f32"]), variant=6)
seeds["kernel_fused_c8"] = raw(dict(op=OP["rmsnorm"], float_type=T["f32"]), variant=3)
seeds["kernel_fused_m4"] = raw(dict(op=OP["rmsnorm"], float_type=T["bf16"]), variant=6)
seeds["kernel_fused_m8"] = raw(dict(op=OP["rmsnorm"], float_type=T["bf16"], granularity=GRAN["group"]), variant=7)
seeds["kernel_fused_m8f"] = raw(dict(op=OP["rmsnorm"], float_type=T["f32"]), variant=6, args=[("cols", 4096)])
seeds["kernel_fused_m16"] = raw(dict(op=OP["rmsnorm"], float_type=T["f32"], int_type=T["e4m3"]), variant=7)
# NULLs and garbage
seeds["null_desc"] = bytes([2]) + call()
seeds["null_plan"] = bytes([3]) + call()
seeds["null_args"] = enum(0, flags=3)
seeds["zero_args"] = enum(5, flags=0)
seeds["raw_all_zero"] = raw({})
seeds["raw_op_77"] = raw(dict(op=77, float_type=1))
seeds["raw_float_type_77"] = raw(dict(op=1, float_type=77))
seeds["raw_negative_fields"] = raw(dict(op=1, direction=-1, granularity=-1, float_type=-1, qmin=-999, qmax=999,
                                        device=-5, asymmetric=-1, activation=-1, pow2_scales=-1, scale_layout=-1))
seeds["raw_dynamic_backward"] = raw(dict(op=4, direction=1, float_type=1))
seeds["raw_linear_f64_scales"] = raw(dict(op=6, float_type=2, scale_type=2, out_type=3))
seeds["raw_quantized_linear_per_tensor"] = raw(dict(op=5, granularity=1, float_type=1))
seeds["raw_qrange_inverted"] = raw(dict(op=1, float_type=1, qmin=5, qmax=-5))
seeds["raw_gated_gelu_fp8_group"] = raw(dict(op=OP["gated"], activation=2, float_type=T["bf16"], int_type=T["e4m3"],
                                             granularity=GRAN["group"]), variant=2)
seeds["raw_ue8m0x4_mn_dynamic"] = raw(dict(op=OP["dynamic"], granularity=GRAN["group"], float_type=T["f16"],
                                           scale_type=T["ue8m0x4"], scale_layout=1), variant=1)
seeds["raw_pow2_quantize"] = raw(dict(op=1, float_type=1, pow2_scales=1))
seeds["raw_device_1"] = raw(dict(op=1, float_type=1, device=1))
seeds["garbage_args"] = raw(dict(op=1, granularity=GRAN["channel"], float_type=1),
                            args=[("rank", -3), ("axis", 1 << 30), ("x", 200), ("scale", -1.0)])
seeds["nan_scale"] = raw(dict(op=1, float_type=1), args=[("scale", float("nan"))])
seeds["amax_bound_asymmetric"] = raw(dict(op=4, float_type=1, granularity=GRAN["token"], asymmetric=1),
                                     args=[("amax_bound", 2.0)])
seeds["amax_bound_f32_overflow"] = raw(dict(op=4, float_type=1, granularity=GRAN["token"]),
                                       args=[("amax_bound", 1e300)])
seeds["mask_per_group"] = raw(dict(op=3, float_type=1, granularity=GRAN["group"]), args=[("mask", 5)])
seeds["residual_is_x_other_stride"] = raw(dict(op=OP["rmsnorm"], float_type=T["f16"]), variant=3,
                                          args=[("residual_row_stride", 4200)])
seeds["fused_cols_2p30_plus_1"] = raw(dict(op=OP["rmsnorm"], float_type=T["f32"]), args=[("cols", (1 << 30) + 1)])
# launch bounds: per channel, the axis innermost (bq_affine_cols): 2^39 channels and one more
for ft, name in ((T["f32"], "f32"), (T["f16"], "f16")):
    for c, cn in ((1 << 39, "2p39"), ((1 << 39) + 1, "2p39_plus_1"), (1 << 41, "2p41")):
        seeds["channel_cols_%s_%s" % (cn, name)] = raw(
            dict(op=1, granularity=GRAN["channel"], float_type=ft),
            args=[("rank", 2), (("shape", 0), 3), (("shape", 1), c), ("axis", 1)])
seeds["channel_f64_axis0_2p39"] = raw(dict(op=1, granularity=GRAN["channel"], float_type=T["f64"]),
                                      args=[("rank", 2), (("shape", 0), 1 << 39), (("shape", 1), 5), ("axis", 0)])
seeds["group_blocks_2p28_items"] = raw(dict(op=1, granularity=GRAN["group"], float_type=T["f32"]),
                                       args=[("rows", 1 << 23), ("cols", 4096), ("group_size", 4)])
seeds["token_f64_bwd_many_rows"] = raw(dict(op=1, direction=1, granularity=GRAN["token"], float_type=T["f64"]),
                                       args=[("rows", 1 << 40), ("cols", 64)])
seeds["dequantize_token_max_elems"] = raw(dict(op=2, granularity=GRAN["token"], float_type=T["bf16"]),
                                          args=[("rows", 1 << 28), ("cols", 1 << 28)])
seeds["dynamic_token_many_rows"] = raw(dict(op=4, granularity=GRAN["token"], float_type=T["bf16"]),
                                       args=[("rows", 1 << 40), ("cols", 8)])
seeds["dynamic_group_long_rows"] = raw(dict(op=4, granularity=GRAN["group"], float_type=T["f16"], asymmetric=1),
                                       args=[("rows", 3), ("cols", 1 << 40), ("group_size", 1 << 20)])
seeds["dynamic_block_32768"] = raw(dict(op=4, granularity=GRAN["block"], float_type=T["f32"]),
                                   args=[("rows", 40000), ("cols", 70000), ("group_size", 32768)])
seeds["dynamic_block_32769"] = raw(dict(op=4, granularity=GRAN["block"], float_type=T["f32"]),
                                   args=[("rows", 40000), ("cols", 70000), ("group_size", 32769)])
seeds["fused_many_rows"] = raw(dict(op=OP["gated"], float_type=T["bf16"]), args=[("rows", 1 << 40), ("cols", 64)])
seeds["weight_sums_k_2p24"] = raw(dict(op=7), args=[("n", 0x7fffffff), ("cols", 1 << 24)])
seeds["weight_sums_k_2p24_plus_1"] = raw(dict(op=7), args=[("n", 4096), ("cols", (1 << 24) + 1)])
seeds["weight_sums_nk_too_large"] = raw(dict(op=7), args=[("n", 0x7fffffff), ("cols", (1 << 25) + 1)])
seeds["weight_sums_float_type_77"] = raw(dict(op=7, float_type=77))
seeds["weight_sums_asymmetric"] = raw(dict(op=7, asymmetric=1))
seeds["smoothquant_large_grid"] = raw(dict(op=6, float_type=T["f16"]),
                                      args=[("rows", 0x7fffffff), ("n", 0x7fffffff), ("cols", 16)])
seeds["quantized_linear_m_256"] = raw(dict(op=5, float_type=T["f32"], out_type=T["f16"]),
                                      args=[("rows", 256), ("n", 1 << 20)])
seeds["quantized_linear_m_1"] = raw(dict(op=5, float_type=T["f32"], out_type=T["f16"]),
                                    args=[("rows", 1), ("n", 0x7fffffff)])
seeds["quantized_linear_k_0"] = raw(dict(op=5, float_type=T["f32"], asymmetric=1), args=[("cols", 0)])

# The inputs that once found bugs, in the current format.
# bq__affine_flat: 30 * B overflowed for per block with B near 2^62 (B > cols is valid: edge tiles)
for op in (1, 2, 3):
    for d in (0, 1):
        for ft in ("f32", "f16"):
            for b in (1 << 62, (1 << 63) - 1):
                seeds["regress_flat_block_%s_%s_%s_b%x" % (op, "bwd" if d else "fwd", ft, b)] = raw(
                    dict(op=op, direction=d, granularity=GRAN["block"], float_type=T[ft]),
                    args=[("rows", 3), ("cols", 5), ("group_size", b)])
# bq__group_shape: 4 * group_row_stride overflowed for packed UE8M0 scales with no rows
for op in (1, 2, 3, 4):
    for lay in (0, 1):
        for s in ((1 << 61, 1 << 62, (1 << 63) - 1) if lay == 0 else ((1 << 62) + 1,)):
            seeds["regress_ue8m0x4_zero_rows_op%d_%s_grs%x" % (op, "mn" if lay else "rows", s)] = raw(
                dict(op=op, granularity=GRAN["group"], float_type=T["f32"], int_type=T["e4m3"],
                     scale_type=T["ue8m0x4"], scale_layout=lay),
                args=[("rows", 0), ("cols", 64), ("group_size", 16), ("group_row_stride", s)])
# bq__affine_blocks_fill: the per-block divider made only where B fits 32 bits; per channel
# a channel's run past 2^32
seeds["regress_blocks_fill_block_2p32"] = raw(dict(op=1, granularity=GRAN["block"], float_type=T["f32"]),
                                              args=[("rows", 2), ("cols", 1 << 33), ("group_size", 1 << 32)])
seeds["regress_blocks_fill_channel_run_2p33"] = raw(
    dict(op=1, granularity=GRAN["channel"], float_type=T["f32"]),
    args=[("rank", 2), (("shape", 0), 3), (("shape", 1), 1 << 33), ("axis", 0)])
# BQ_DEVICE(n) of a device that does not exist: valid, and absent when selected
seeds["regress_device_absent"] = enum(600, [("device", 0, 23817067)], flags=0, stream=1)
# bq_plan_workspace_size validated a fused plan with the affine view: per tensor, it refused
# args.numel, which the fused ops never read (can_implement and run accepted the call)
for op in ("rmsnorm", "gated"):
    seeds["regress_fused_workspace_numel_%s" % op] = raw(
        dict(op=OP[op], granularity=GRAN["tensor"], float_type=T["f16"]), args=[("numel", -1)])
# bq_sku for a compute capability older than the library supports (sm 75 here; flags bits
# 5-7 = 6): BQ_ERROR_NOT_SUPPORTED naming sm, not "not a compute capability"
seeds["regress_sku_pre_ampere"] = raw(dict(op=1, float_type=T["f32"]), flags=1 | (6 << 5))
# bq__affine_flat's parameter rows: a per-group row stride past the rows' extent
seeds["regress_flat_grs_overflow"] = raw(dict(op=1, granularity=GRAN["group"], float_type=T["f32"]),
                                         args=[("rows", 1 << 15), ("cols", 1 << 40), ("group_size", 1 << 40),
                                               ("x", 33)])
# bq__fused_run checked the workspace before the held op's rules: a fused producer that
# rotates into a microscaling format, rows the held dynamic quantize refuses, no workspace:
# can_implement said NOT_SUPPORTED, run INSUFFICIENT_WORKSPACE (libFuzzer's find: its call
# bytes as found, variant 1, no workspace, then int32 edits of every slot to 0x3f3f3f3f)
seeds["regress_fused_held_check_before_workspace"] = bytes([1]) + desc_bytes(
    dict(op=OP["gated"], activation=1, granularity=GRAN["group"], float_type=T["f64"], int_type=T["e5m2"],
         scale_type=T["ue8m0"], rounding=1, rotation=1)) + bytes.fromhex(
    "0101a03103" + "3f" * 71 + "01fb")
# the fused rotation's .rot SKU serves both sign choices: a plan with random signs parsed back
# with desc.random_signs 0 (libFuzzer's find, its bytes as found: an enumerated desc of that
# day's enumeration, edited)
seeds["regress_mx_rotation_random_signs_sku"] = bytes.fromhex(
    "0045454545454545454545454545454545454545457f0101ffffffffffff"
    "ffffff454545454545003e45454545454545454545a608006f0106b30100")
# an op refused on the device's arch (BQ_FP8_LINEAR before sm_89) must name the field:
# bq_sku said "fp8_linear needs compute capability 8.9" (libFuzzer's find, its bytes as found)
seeds["regress_fp8_linear_arch_names_op"] = bytes.fromhex(
    "003b7a6266393939393939393939393939393939393939393939393939393939393939393939393939393939"
    "39393939393939393939393939393939393939393939393939393939393939393939316b0270655f726d6c59"
    "656574014e0201696e0026")

# the FP8 linear layers' scale modes and FP8 QuantizedLinear (op 11 and 12), valid calls of
# each (blockwise MN-major with a padded stride; QuantizedLinear's workspace), sm_90 and sm_89
for v in range(2):
    seeds["fp8_linear_rowwise_v%d" % v] = raw(dict(op=11, granularity=GRAN["token"], out_type=T["bf16"]), variant=v)
    seeds["fp8_linear_blockwise_v%d" % v] = raw(dict(op=11, granularity=GRAN["block"], out_type=T["f16"],
                                                     int_type=T["e5m2"]), variant=v + 1)
    seeds["fp8_linear_blockwise_mn_v%d" % v] = raw(dict(op=11, granularity=GRAN["block"], out_type=T["f32"],
                                                        scale_layout=1), variant=v + 4, flags=1 | (3 << 5) * v)
    seeds["fp8_quantized_linear_v%d" % v] = raw(dict(op=12, float_type=T["bf16"]), variant=v + 2, ws=v)
    seeds["fp8_quantized_linear_blockwise_v%d" % v] = raw(dict(op=12, granularity=GRAN["block"], float_type=T["f16"]),
                                                          variant=v + 6, flags=1 | (3 << 5) * v)

os.makedirs(OUT, exist_ok=True)
for f in os.listdir(OUT):
    os.remove(os.path.join(OUT, f))
for name, data in sorted(seeds.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("%d seeds in %s (bq_desc: %d members, bq_args: %d slots)" % (len(seeds), OUT, NDESC, max(ARGS.values()) + 1))
