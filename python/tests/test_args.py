"""The bq_args the package builds pass the library's own validation (run with no device:
the plan is built without a kernel), for every op and layout; and the library rejects what
it should, naming the field."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import DType, Direction, Granularity, Op

V = _core.View
_next = [0x100000]


def arr(shape, dtype, strides=None, device=0):
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    p = _next[0]
    _next[0] += 1 << 20  # aligned for every element type
    return V(p, shape, strides, dtype, device)


@pytest.fixture
def validated(monkeypatch):
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append(key)
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


F, S8, U8, S32, F16, BF16, F64 = DType.F32, DType.S8, DType.U8, DType.S32, DType.F16, DType.BF16, DType.F64


def affine(op, gran, fl, x, y, **kw):
    kw.setdefault("int_type", S8)
    kw.setdefault("qmin", None)
    kw.setdefault("qmax", None)
    _core.affine(op, kw.pop("direction", Direction.FORWARD), gran, fl=fl, x=x, y=y, **kw)


@pytest.mark.parametrize("ft", [F, F64, F16, BF16])
def test_affine_layouts(validated, ft):
    x, q = arr((6, 10, 32), ft), arr((6, 10, 32), U8)
    affine(Op.QUANTIZE, Granularity.PER_TENSOR, x, x, q, int_type=U8, qmin=3, qmax=200, scale=0.1, zero_point=7)
    affine(Op.DEQUANTIZE, Granularity.PER_TENSOR, x, q, x, int_type=U8, scale=0.1, zero_point=-9)
    sc = arr((10,), F)
    affine(Op.QUANTIZE, Granularity.PER_CHANNEL, x, x, q, int_type=U8, scales=sc, zero_points=arr((10,), S32),
           axis=1)
    affine(Op.FAKE_QUANTIZE, Granularity.PER_CHANNEL, x, x, arr((6, 10, 32), ft), scales=arr((32,), ft), axis=-1)
    dy, dx = arr((6, 10, 32), ft), arr((6, 10, 32), ft)
    affine(Op.FAKE_QUANTIZE, Granularity.PER_CHANNEL, x, x, None, dy=dy, dx=dx, scales=sc, axis=1,
           direction=Direction.BACKWARD)
    affine(Op.FAKE_QUANTIZE, Granularity.PER_TENSOR, x, x, None, dy=dy, dx=dx, scale=0.5,
           direction=Direction.BACKWARD)
    # per token with row strides (x rows 48 apart, y rows 40 apart), per group
    x2, q2 = arr((60, 32), ft, (48, 1)), arr((60, 32), S8, (40, 1))
    affine(Op.QUANTIZE, Granularity.PER_TOKEN, x2, x2, q2, scales=arr((60,), ft), zero_points=arr((60,), S32))
    affine(Op.DEQUANTIZE, Granularity.PER_TOKEN, x2, q2, x2, scales=arr((60,), F))
    affine(Op.QUANTIZE, Granularity.PER_GROUP, x2, x2, q2, scales=arr((60, 4), F, (6, 1)),
           zero_points=arr((60, 4), S32, (6, 1)), group_size=8)
    assert len(validated) == 9
    assert {k[2] for k in validated} == {Granularity.PER_TENSOR, Granularity.PER_CHANNEL, Granularity.PER_TOKEN,
                                         Granularity.PER_GROUP}


def test_dynamic_and_linear(validated):
    x = arr((33, 200), BF16, (256, 1))
    _core.dynamic(Granularity.PER_TOKEN, x=x, y=arr((33, 200), S8), out_scales=arr((33, 1), F))
    _core.dynamic(Granularity.PER_TOKEN, x=x, y=arr((33, 200), U8), out_scales=arr((33, 1), F),
                  out_zero_points=arr((33, 1), S32))
    _core.dynamic(Granularity.PER_GROUP, x=x, y=arr((33, 200), S8), out_scales=arr((33, 5), F), group_size=40)
    _core.dynamic(Granularity.PER_TENSOR, x=arr((33, 200), F), y=arr((33, 200), S8), out_scales=arr((1,), F))
    w = arr((48, 256), S8)
    for out in (F16, BF16, F):
        _core.linear(Op.SMOOTHQUANT_LINEAR, x=arr((20, 256), S8, (320, 1)), w=w, w_scales=arr((48,), F),
                     y=arr((20, 48), out, (64, 1)), a_scales=arr((20,), F), bias=arr((48,), out))
    _core.linear(Op.SMOOTHQUANT_LINEAR, x=arr((20, 256), S8), w=w, w_scales=arr((48,), F64),
                 y=arr((20, 48), F64), a_scales=arr((20,), F64))
    _core.linear(Op.QUANTIZED_LINEAR, x=arr((7, 256), F16), w=w, w_scales=arr((48,), F), y=arr((7, 48), F16),
                 bias=arr((48,), F16))
    assert len(validated) == 9


def test_library_rejects_what_python_lets_through(validated):
    # misaligned pointers are the library's to catch; its message names the field
    x = V(0x100001, (4, 8), (8, 1), F, 0)
    with pytest.raises(bq.InvalidArgumentError, match="args.x"):
        affine(Op.QUANTIZE, Granularity.PER_TENSOR, x, x, arr((4, 8), S8), scale=0.1)
    # K beyond the accumulator's bound
    k = 1 << 17
    with pytest.raises(bq.InvalidArgumentError, match="args.cols"):
        _core.linear(Op.SMOOTHQUANT_LINEAR, x=arr((2, k), S8), w=arr((4, k), S8), w_scales=arr((4,), F),
                     y=arr((2, 4), F16), a_scales=arr((2,), F))
