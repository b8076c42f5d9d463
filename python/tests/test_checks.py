"""The Python-side argument checks raise InvalidArgumentError before the library is called
(no plan is selected, nothing touches a GPU)."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import DType, Direction, Granularity, Op

V = _core.View


def dense(shape, dtype, device=0, ptr=0x10000):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.insert(0, acc)
        acc *= s
    return V(ptr, shape, strides, dtype, device)


def no_plan(fn, match):
    before = _lib.cached_plan_keys()
    with pytest.raises(bq.InvalidArgumentError, match=match):
        fn()
    assert _lib.cached_plan_keys() == before


def q(gran, x, y, **kw):
    kw.setdefault("int_type", DType.S8)
    kw.setdefault("qmin", None)
    kw.setdefault("qmax", None)
    return lambda: _core.affine(Op.QUANTIZE, Direction.FORWARD, gran, fl=x, x=x, y=y, **kw)


def test_float_input_required():
    x = dense((4, 8), DType.S8)
    no_plan(q(Granularity.PER_TENSOR, x, dense((4, 8), DType.S8), scale=1.0), "not a float type")


def test_int_type_required():
    x = dense((4, 8), DType.F32)
    no_plan(q(Granularity.PER_TENSOR, x, dense((4, 8), DType.F16), scale=1.0, int_type=DType.F16),
            "int8, uint8, E4M3 or E5M2")


def test_fp8_has_no_qrange():
    # FP8 storage: the format's range, 0 and 0 to the library; an explicit range is refused
    assert _core.qrange(DType.E4M3, None, None) == (0, 0)
    assert _core.qrange(DType.E5M2, 0, 0) == (0, 0)
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.E4M3)
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, int_type=DType.E4M3, qmin=-100, qmax=100), "no q-range")
    with pytest.raises(bq.InvalidArgumentError, match="E4M3 or E5M2"):
        _core.check_storage("y", DType.S32)
    _core.check_storage("y", DType.E5M2)


def test_qrange_checked():
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.S8)
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, qmin=-200, qmax=0), "quant_min")
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, qmin=5, qmax=4), "quant_min")
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, qmin=0, qmax=0), "full range")


def test_scale_and_zero_point_checked():
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.S8)
    for s in (0.0, -1.0, float("inf"), float("nan")):
        no_plan(q(Granularity.PER_TENSOR, x, y, scale=s), "finite and > 0")
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, zero_point=2**31), "int32")


def test_devices_must_match():
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.S8, device=1)
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0), "cuda:1")


def test_per_tensor_needs_contiguous():
    x = V(0x10000, (4, 8), (16, 1), DType.F32, 0)
    no_plan(q(Granularity.PER_TENSOR, x, dense((4, 8), DType.S8), scale=1.0), "contiguous")


def test_mask_checked():
    """args.mask: fake quantize per tensor and per channel only, ceil(n / 32) int32 words"""
    x, y = dense((4, 40), DType.F32), dense((4, 40), DType.F32)

    def fq(gran, mask, op=Op.FAKE_QUANTIZE, **kw):
        kw.setdefault("scale", 1.0)
        return lambda: _core.affine(op, Direction.FORWARD, gran, fl=x, x=x, y=y, int_type=DType.S8, qmin=None,
                                    qmax=None, mask=mask, **kw)
    no_plan(fq(Granularity.PER_TENSOR, dense((5,), DType.F32)), "int32 words")
    no_plan(fq(Granularity.PER_TENSOR, dense((4,), DType.S32)), "5 contiguous int32 words")
    no_plan(fq(Granularity.PER_TENSOR, V(0x10000, (5,), (2,), DType.S32, 0)), "contiguous int32")
    no_plan(fq(Granularity.PER_TENSOR, dense((5,), DType.S32), op=Op.QUANTIZE), "only fake quantize")
    no_plan(fq(Granularity.PER_TOKEN, dense((5,), DType.S32), scale=None, scales=dense((4,), DType.F32)),
            "only fake quantize")
    no_plan(fq(Granularity.PER_TENSOR, dense((5,), DType.S32, device=1)), "cuda:1")


def test_per_channel_shapes():
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.S8)
    no_plan(q(Granularity.PER_CHANNEL, x, y, scales=dense((8,), DType.F32), axis=0), r"expected \(4,\)")
    no_plan(q(Granularity.PER_CHANNEL, x, y, scales=dense((4,), DType.F32), axis=2), "axis")
    no_plan(q(Granularity.PER_CHANNEL, x, y, scales=dense((4,), DType.F16), axis=0), "float32, the data")
    no_plan(q(Granularity.PER_CHANNEL, x, y, scales=dense((4,), DType.F32), zero_points=dense((4,), DType.S8),
              axis=0), "S32")
    no_plan(q(Granularity.PER_CHANNEL, x, y, axis=0), "scales are required")


def test_per_token_and_group_shapes():
    x, y = dense((4, 8), DType.F16), dense((4, 8), DType.S8)
    no_plan(q(Granularity.PER_TOKEN, x, y, scales=dense((3,), DType.F32)), r"expected \(4,\)")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8), (8, 2), DType.F16, 0), y, scales=dense((4,), DType.F32)),
            "last dimension must be contiguous")
    no_plan(q(Granularity.PER_TOKEN, x, dense((4, 7), DType.S8), scales=dense((4,), DType.F32)), "differ")
    no_plan(q(Granularity.PER_GROUP, x, y, scales=dense((4, 3), DType.F32), group_size=3), "divide")
    no_plan(q(Granularity.PER_GROUP, x, y, scales=dense((4, 3), DType.F32), group_size=4), r"expected \(4, 2\)")


def test_dynamic_checks():
    x = dense((4, 8), DType.F32)
    no_plan(lambda: _core.dynamic(Granularity.PER_TOKEN, x=x, y=dense((4, 8), DType.S8),
                                  out_scales=dense((3, 1), DType.F32)), "out_scales")
    no_plan(lambda: _core.dynamic(Granularity.PER_TOKEN, x=x, y=dense((4, 8), DType.S8),
                                  out_scales=dense((4, 1), DType.F16)), "F32")
    no_plan(lambda: _core.dynamic(Granularity.PER_TOKEN, x=x, y=dense((4, 8), DType.F32),
                                  out_scales=dense((4, 1), DType.F32)), "int8, uint8, E4M3 or E5M2")


def test_linear_checks():
    a, w = dense((16, 64), DType.S8), dense((32, 64), DType.S8)
    sa, sw, y = dense((16,), DType.F32), dense((32,), DType.F32), dense((16, 32), DType.F16)

    def lin(**kw):
        args = dict(x=a, w=w, w_scales=sw, y=y, a_scales=sa)
        args.update(kw)
        return lambda: _core.linear(Op.SMOOTHQUANT_LINEAR, **args)
    no_plan(lin(w=dense((32, 48), DType.S8)), "w: shape")
    no_plan(lin(w=dense((32, 64), DType.U8)), "int8")
    no_plan(lin(y=dense((16, 31), DType.F16)), "y: shape")
    no_plan(lin(a_scales=dense((15,), DType.F32)), "a_scales")
    no_plan(lin(w_scales=dense((32,), DType.F64)), "w_scales")
    no_plan(lin(bias=dense((32,), DType.F32)), "bias")
    no_plan(lin(x=dense((16, 64), DType.F16)), "a: dtype")
    no_plan(lin(x=dense((16, 64), DType.U8), a_zero_points=dense((16,), DType.S32), asymmetric=True), "w_sums")
    no_plan(lin(a_zero_points=dense((15,), DType.S32), asymmetric=True, w_sums=dense((32,), DType.S32)),
            "a_zero_points")
    no_plan(lin(a_scales=None, a_scale=float("nan")), "a_scale")
    no_plan(lin(a_scales=None), "a_scales is required")
    no_plan(lambda: _core.linear(Op.QUANTIZED_LINEAR, x=dense((16, 64), DType.F32), w=w, w_scales=sw, y=y),
            "one dtype")


def test_broadcast_flipped_and_overlapping_rows_refused():
    """A zero row stride (a broadcast view) reads as "dense" in the library, which would run
    past the array: refused by name, as are negative strides and rows that overlap."""
    y, s = dense((4, 8), DType.S8), dense((4,), DType.F32)
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8), (0, 1), DType.F16, 0), y, scales=s), "x: stride 0 .*broadcast")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8), (-8, 1), DType.F16, 0), y, scales=s), "x: stride -8 .*flipped")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8), (4, 1), DType.F16, 0), y, scales=s), "x: row stride 4 .*overlap")
    no_plan(q(Granularity.PER_TOKEN, dense((4, 8), DType.F16), V(0x20000, (4, 8), (0, 1), DType.S8, 0), scales=s),
            "y: stride 0")
    no_plan(q(Granularity.PER_TOKEN, dense((4, 8), DType.F16), y, scales=V(0x30000, (4,), (0,), DType.F32, 0)),
            "scales: stride 0")
    g = q(Granularity.PER_GROUP, dense((4, 8), DType.F16), y, scales=V(0x30000, (4, 2), (1, 1), DType.F32, 0),
          group_size=4)
    no_plan(g, "scales: row stride 1 is smaller than a row's 2 groups")
    # a broadcast residual would be written past its memory
    x, w = dense((4, 8), DType.F16), dense((8,), DType.F16)
    no_plan(lambda: _core.fused(Op.RMSNORM_QUANTIZE, x=x, y=y, out_scales=dense((4,), DType.F32), norm_weight=w,
                                residual=V(0x40000, (4, 8), (0, 1), DType.F16, 0), eps=1e-6), "residual: stride 0")
    # size-1 dimensions may have any stride; a row stride of 0 with one row is dense
    ok = V(0x10000, (1, 8), (0, 1), DType.F16, 0)
    _core.check_view("x", ok)


def test_sizes_and_spans_past_int64_refused():
    """Sizes past 2^63 would wrap in ctypes into a zero-size call; spans past 2^63 bytes
    overflow the library's offsets."""
    y, s = dense((4, 8), DType.S8), dense((4,), DType.F32)
    no_plan(q(Granularity.PER_TENSOR, V(0x10000, (2**64,), (1,), DType.F32, 0), y, scale=1.0), "past 2\\^63")
    no_plan(q(Granularity.PER_TENSOR, V(0x10000, (-1,), (1,), DType.F32, 0), y, scale=1.0), "negative")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (2**40, 2**30), (2**30, 1), DType.F32, 0),
              V(0x20000, (2**40, 2**30), (2**30, 1), DType.S8, 0), scales=dense((2**40,), DType.F32)),
            "2\\^63 elements or more")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (2**20, 16), (2**50, 1), DType.F32, 0),
              V(0x20000, (2**20, 16), (16, 1), DType.S8, 0), scales=dense((2**20,), DType.F32)),
            "span more than 2\\^63 bytes")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8), (2**64, 1), DType.F32, 0), y, scales=s), "span more")
    no_plan(q(Granularity.PER_TOKEN, V(0x10000, (4, 8.0), (8, 1), DType.F32, 0), y, scales=s), "must be integers")
    no_plan(q(Granularity.PER_TENSOR, V(-5, (4, 8), (8, 1), DType.F32, 0), y, scale=1.0), "64-bit address")
    no_plan(q(Granularity.PER_TENSOR, V(2**64 - 16, (4, 8), (8, 1), DType.F32, 0), y, scale=1.0), "span more")


def test_scalars_that_are_not_numbers_refused():
    x, y = dense((4, 8), DType.F32), dense((4, 8), DType.S8)
    for bad in ("abc", "1.5", None, [1.0], b"1"):
        no_plan(q(Granularity.PER_TENSOR, x, y, scale=bad), "scale .* is not a number")
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, zero_point="3"), "zero_point .* is not a number")
    no_plan(q(Granularity.PER_TENSOR, x, y, scale=1.0, zero_point=2.5), "zero_point .* is not an integer")
    no_plan(q(Granularity.PER_GROUP, x, y, scales=dense((4, 2), DType.F32), group_size="4"), "group_size")
    w = dense((8,), DType.F32)
    no_plan(lambda: _core.fused(Op.RMSNORM_QUANTIZE, x=x, y=y, out_scales=dense((4,), DType.F32), norm_weight=w,
                                eps="small"), "eps .* is not a number")
    no_plan(lambda: _core.fused(Op.RMSNORM_QUANTIZE, x=x, y=y, norm_weight=w, eps=1e-6, scale="x"),
            "scale .* is not a number")
