"""Every kernel the C library offers is reachable from a Python function.

The library enumerates its kernels (one normalized descriptor per SKU: what `baracuda-quant
warm --all` compiles). For each one this test builds the Python call that should reach it,
through the DLPack front end with no device (inputs are DLPack capsules of CUDA-typed
arrays at made-up addresses; each launch is replaced by the library's own argument
validation), and checks that the descriptor the call produced compiles to that very SKU. A
C feature without a Python entry (a new op, granularity, storage or scale format, layout
or flag) has no call here, or a call that reaches another SKU: the test fails and names it.
The torch front end builds its calls with the same _core functions (test_gpu_* run them)."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import Activation, DType, Direction, Granularity, Op

from dlpack_fakes import HostBuffer, Producer

ROWS, COLS, G, B = 40, 256, 32, 16


@pytest.fixture
def skus(monkeypatch):
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append(_lib.sku(_lib.make_desc(key, 0)))
    monkeypatch.setattr(_core, "_launch", launch)
    monkeypatch.setattr(dlpack, "DeviceBuffer", HostBuffer)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    return seen


_NAMES = {DType.F32: "float32", DType.F64: "float64", DType.F16: "float16", DType.BF16: "bfloat16",
          DType.S8: "int8", DType.U8: "uint8", DType.E4M3: "float8_e4m3fn", DType.E5M2: "float8_e5m2",
          DType.UE8M0: "float8_e8m0fnu", DType.UE8M0X4: "ue8m0x4", DType.E2M1: "e2m1"}
_MX_LAYOUTS = ("row", "mn", "blocked")
_MX_RULES = ("default", "floor", "ceil", "even", "rceil", "rceil_sat", "torchao", "te")


def _is_mx(d):
    """A microscaling descriptor (the C library's bq__is_mx)."""
    return (Op(d.op) in (Op.QUANTIZE, Op.DEQUANTIZE, Op.FAKE_QUANTIZE, Op.DYNAMIC_QUANTIZE) and
            (d.int_type == DType.E2M1 or d.scale_type == DType.E4M3 or d.scale_layout == 2 or d.scale_rule != 0 or
             ((d.rounding != 0 or d.rotation != 0) and d.granularity == 4 and d.scale_type == DType.UE8M0 and
              d.int_type in (DType.E4M3, DType.E5M2))))


def _mx_call(d):
    """The call that should reach a microscaling kernel: mx_quant (static with scales, or
    dynamic) or mx_dequant, groups of G, scales in the layout"""
    op, ft, it, st = Op(d.op), DType(d.float_type), DType(d.int_type), DType(d.scale_type)
    lay = _MX_LAYOUTS[d.scale_layout]
    shape, strides, _ = _core.mx_scales_shape(d.scale_layout, ROWS, COLS // G)
    scales = Producer(shape, st, strides=strides if d.scale_layout == 1 else None)
    ts = Producer((1,), DType.F32) if st == DType.E4M3 else None
    kw = {"group_size": G, "dtype": _NAMES[it], "tensor_scale": ts, "scale_layout": lay}
    if d.direction == Direction.BACKWARD:
        dy = Producer((ROWS, COLS), ft)
        if op == Op.DEQUANTIZE:
            return bq.mx_dequant_backward(dy, scales, **kw)
        f = bq.mx_quant_backward if op == Op.QUANTIZE else bq.mx_fake_quant_backward
        return f(dy, Producer((ROWS, COLS), ft), scales, **kw)
    sr = {"rounding": "stochastic", "seed": 1} if d.rounding else {}
    rot = {"rotation_block": 16, "random_signs": bool(d.random_signs)} if d.rotation else {}
    if d.random_signs:
        rot["seed"] = 1
    sr.update(rot)
    if op == Op.FAKE_QUANTIZE:
        return bq.mx_fake_quant(Producer((ROWS, COLS), ft), scales, **kw, **sr)
    if op == Op.DYNAMIC_QUANTIZE:
        return bq.mx_quant(Producer((ROWS, COLS), ft), group_size=G, dtype=_NAMES[it], scale_dtype=_NAMES[st],
                           scale_layout=lay, scale_rule=_MX_RULES[d.scale_rule], **sr)
    if op == Op.QUANTIZE:
        return bq.mx_quant(Producer((ROWS, COLS), ft), group_size=G, dtype=_NAMES[it], scales=scales,
                           tensor_scale=ts, scale_layout=lay, **sr)
    q = Producer((ROWS, COLS // 2), DType.U8) if it == DType.E2M1 else Producer((ROWS, COLS), it)
    return bq.mx_dequant(q, scales, group_size=G, dtype=_NAMES[it], tensor_scale=ts, scale_layout=lay,
                         out_dtype=_NAMES[ft], **rot)


def _scales(gran, st, layout, rows=ROWS, cols=COLS):
    """A scale array (and its keyword) for a static call of this granularity."""
    at = DType.S32 if st == DType.UE8M0X4 else st
    if gran == Granularity.PER_CHANNEL:
        return Producer((cols,), at), {"axis": 1}
    if gran == Granularity.PER_TOKEN:
        return Producer((rows,), at), {}
    if gran == Granularity.PER_BLOCK:
        return Producer((-(-rows // B), -(-cols // B)), at), {"block_size": B}
    ng = cols // G
    if st == DType.UE8M0X4:
        ng = -(-ng // 4)
    if layout:
        return Producer((rows, ng), at, strides=(1, -(-rows // 4) * 4)), {"group_size": G}
    return Producer((rows, ng), at), {"group_size": G}


def _is_fused_mx(d):
    """A fused producer emitting a microscaling format (the C library's bq__fused_mx)."""
    return (Op(d.op) in (Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE) and
            (d.int_type == DType.E2M1 or d.scale_type in (DType.UE8M0, DType.E4M3) or d.scale_layout == 2 or
             d.scale_rule != 0))


def _fused_sr_rot(d):
    """the fused producers' rounding and rotation options of a ".sr" / ".rot" SKU"""
    kw = {"rounding": "stochastic", "seed": 1} if d.rounding else {}
    if d.rotation:
        kw.update(rotation_block=16, random_signs=bool(d.random_signs))
    if d.random_signs:
        kw["seed"] = 1
    return kw


def _fused_mx_call(d):
    """rms_norm_mx_quant or the gated ones, groups of G, the format, layout and rule"""
    ft, it, st = DType(d.float_type), DType(d.int_type), DType(d.scale_type)
    kw = {"group_size": G, "dtype": _NAMES[it], "scale_dtype": _NAMES[st], "scale_layout": _MX_LAYOUTS[d.scale_layout],
          "scale_rule": _MX_RULES[d.scale_rule]}
    kw.update(_fused_sr_rot(d))
    if Op(d.op) == Op.RMSNORM_QUANTIZE:
        return bq.rms_norm_mx_quant(Producer((ROWS, COLS), ft), Producer((COLS,), ft), 1e-6, **kw)
    f = bq.silu_and_mul_mx_quant if d.activation == Activation.SILU else bq.gelu_tanh_and_mul_mx_quant
    return f(Producer((ROWS, 2 * COLS), ft), **kw)


def _call(d):
    """The Python call that should reach desc d (a normalized _lib.Desc)."""
    if _is_mx(d):
        return _mx_call(d)
    if _is_fused_mx(d):
        return _fused_mx_call(d)
    if Op(d.op) == Op.HADAMARD:
        return bq.hadamard(Producer((ROWS, COLS), DType(d.float_type)), 64, inverse=d.direction == Direction.BACKWARD,
                           seed=12345 if d.random_signs else None)
    op, gran = Op(d.op), Granularity(d.granularity)
    ft, it, st = DType(d.float_type), DType(d.int_type), DType(d.scale_type)
    fp8 = it in _core.FP8_TYPES
    x = Producer((ROWS, COLS), ft) if ft else None
    if op in (Op.QUANTIZE, Op.DEQUANTIZE, Op.FAKE_QUANTIZE):
        if gran == Granularity.PER_TENSOR:
            scale, kw = 0.25, {}
        else:
            scale, kw = _scales(gran, st, d.scale_layout)
        if d.direction == Direction.BACKWARD:
            dy = Producer((ROWS, COLS), ft)
            if op == Op.QUANTIZE:
                return bq.quantize_backward(dy, x, scale, dtype=_NAMES[it], **kw)
            if op == Op.DEQUANTIZE:
                return bq.dequantize_backward(dy, scale, dtype=_NAMES[it], **kw)
            rot = {"rotation_block": 16, "random_signs": True, "seed": 1} if d.rotation else {}
            return bq.fake_quantize_backward(dy, x, scale, dtype=_NAMES[it], **kw, **rot)
        sr = {"rounding": "stochastic", "seed": 1} if d.rounding else {}
        rot = {"rotation_block": 16} if d.rotation else {}
        sr.update(rot)
        if op == Op.QUANTIZE:
            if gran == Granularity.PER_TENSOR:
                return bq.quantize_per_tensor(x, scale, dtype=_NAMES[it], **sr)
            if gran == Granularity.PER_CHANNEL:
                return bq.quantize_per_channel(x, scale, None, 1, dtype=_NAMES[it], **sr)
            if gran == Granularity.PER_TOKEN:
                return bq.quantize_per_token(x, scale, dtype=_NAMES[it], **sr)
            if gran == Granularity.PER_GROUP:
                return bq.quantize_per_group(x, scale, None, G, dtype=_NAMES[it], **sr)
            return bq.quantize_per_block(x, scale, None, B, dtype=_NAMES[it], **sr)
        if op == Op.DEQUANTIZE:
            return bq.dequantize(Producer((ROWS, COLS), it), scale, out_dtype=_NAMES[ft], **kw, **rot)
        return bq.fake_quantize(x, scale, dtype=_NAMES[it], **kw, **sr)
    if op == Op.DYNAMIC_QUANTIZE:
        g = {Granularity.PER_TENSOR: "tensor", Granularity.PER_TOKEN: "token", Granularity.PER_GROUP: "group",
             Granularity.PER_BLOCK: "block"}[gran]
        kw = {"group_size": G} if g == "group" else {"block_size": B} if g == "block" else {}
        sr = {"rounding": "stochastic", "seed": 1} if d.rounding else {}
        rot = {"rotation_block": 16} if d.rotation else {}
        return bq.dynamic_quant(x, g, dtype=_NAMES[it], symmetric=not d.asymmetric, scale_dtype=_NAMES[st],
                                scale_layout="mn" if d.scale_layout else "row", pow2_scales=bool(d.pow2_scales),
                                **kw, **sr, **rot)
    if op in (Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE):
        kw = {"out_dtype": _NAMES[it], "symmetric": not d.asymmetric}
        kw.update(_fused_sr_rot(d))
        if gran == Granularity.PER_TENSOR:
            kw["scale"] = 0.5
        else:
            kw["scale_dtype"] = _NAMES[st]
            if gran == Granularity.PER_GROUP:
                kw["group_size"] = G
        if op == Op.RMSNORM_QUANTIZE:
            return bq.rms_norm_quant(x, Producer((COLS,), ft), 1e-6, **kw)
        x2 = Producer((ROWS, 2 * COLS), ft)
        f = bq.silu_and_mul_quant if d.activation == Activation.SILU else bq.gelu_tanh_and_mul_quant
        return f(x2, **kw)
    if op == Op.FP8_LINEAR:  # FP8 activations x an E4M3 weight; tensorwise and rowwise share a kernel
        ot = DType(d.out_type)
        rows = gran == Granularity.PER_TOKEN
        sa, sb = Producer((ROWS if rows else 1,), DType.F32), Producer((48 if rows else 1,), DType.F32)
        return bq.fp8_linear(Producer((ROWS, COLS), it), Producer((48, COLS), DType.E4M3), sa, sb,
                             Producer((48,), ot), out_dtype=_NAMES[ot])
    w = Producer((48, COLS), DType.S8)
    if op == Op.LINEAR_WEIGHT_SUMS:
        return bq.linear_weight_sums(w)
    ot = DType(d.out_type) or ft
    ws = Producer((48,), st)
    if op == Op.QUANTIZED_LINEAR:
        return bq.quantized_linear(Producer((ROWS, COLS), ot), w, ws, symmetric=not d.asymmetric, dtype=_NAMES[it])
    a = Producer((ROWS, COLS), it)
    if gran == Granularity.PER_TENSOR:
        return bq.int8_linear(a, w, 0.5, ws, out_dtype=_NAMES[ot], a_zero_points=3 if d.asymmetric else None)
    return bq.int8_linear(a, w, Producer((ROWS,), st), ws, out_dtype=_NAMES[ot],
                          a_zero_points=Producer((ROWS,), DType.S32) if d.asymmetric else None)


def test_every_kernel_has_a_python_entry(skus):
    descs = _lib.all_descs()
    assert len(descs) > 1000  # the enumeration itself: every family, type and format
    missing = []
    for d in descs:
        want = _lib.sku(d)
        del skus[:]
        try:
            _call(d)
        except Exception as e:  # noqa: BLE001 - reported with the SKU below
            missing.append("%s: %s: %s" % (want, type(e).__name__, e))
            continue
        if want not in skus:
            missing.append("%s: the call reached %s" % (want, skus))
    assert not missing, "%d of %d kernels have no Python entry:\n%s" % (len(missing), len(descs),
                                                                       "\n".join(missing[:40]))


def test_the_check_fails_for_a_kernel_with_no_entry(skus):
    """The test above can fail: a descriptor whose call is missing is reported."""
    d = _lib.all_descs()[0]
    d.granularity = 99  # no such granularity: no Python call reaches it
    with pytest.raises(Exception):
        _call(d)
