"""The fused producers' arguments with no GPU and no torch: _core.fused's checks raise before
the library is called, and the bq_args it builds pass the library's own validation (skipped
while the library does not know the ops)."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import Activation, DType, Direction, Granularity, Op

V = _core.View
_next = [0x40000000]
F, S8, U8, S32, F16, BF16, F64 = DType.F32, DType.S8, DType.U8, DType.S32, DType.F16, DType.BF16, DType.F64
RMS, GATED = Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE


def arr(shape, dtype, strides=None, device=0):
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    p = _next[0]
    _next[0] += 1 << 20  # aligned for every element type
    return V(p, shape, strides, dtype, device)


def _library_knows_fused():
    a = _lib.Args(rows=1, cols=8, x=0x100000, y=0x200000, out_scales=0x300000, norm_weight=0x400000)
    key = _lib.desc_key(RMS, Direction.FORWARD, Granularity.PER_TOKEN, BF16, S8, -128, 127, F)
    try:
        _lib.validate(key, 0, a)
    except bq.Error as e:
        return "desc.op" not in str(e)
    return True


KNOWS_FUSED = _library_knows_fused()


@pytest.fixture
def launched(monkeypatch):
    """_core._launch replaced: records (key, args) and launches nothing."""
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


@pytest.fixture
def validated(monkeypatch):
    if not KNOWS_FUSED:
        pytest.skip("this library does not offer the fused producers yet")
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append(key)
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


def rms(rows=4, d=64, t=BF16, **kw):
    kw.setdefault("x", arr((rows, d), t))
    kw.setdefault("y", arr((rows, d), S8))
    if "scale" not in kw:
        kw.setdefault("out_scales", arr((rows, 1), F))
    kw.setdefault("norm_weight", arr((d,), t))
    kw.setdefault("eps", 1e-6)
    return _core.fused(RMS, **kw)


def gated(rows=4, d=64, t=BF16, **kw):
    kw.setdefault("x", arr((rows, 2 * d), t))
    kw.setdefault("y", arr((rows, d), S8))
    if "scale" not in kw:
        kw.setdefault("out_scales", arr((rows, 1), F))
    return _core.fused(GATED, **kw)


def test_keys_and_args(launched):
    x, r, w = arr((4, 96), BF16, (128, 1)), arr((4, 64), BF16, (80, 1)), arr((64,), BF16)
    y, o = arr((4, 64), S8, (72, 1)), arr((4, 64), BF16, (70, 1))
    rms(x=V(x.ptr, (4, 64), (128, 1), BF16, 0), y=y, residual=r, norm_weight=w, out=o, eps=1e-5)
    key, a = launched[-1]
    assert key == _lib.desc_key(RMS, Direction.FORWARD, Granularity.PER_TOKEN, BF16, S8, -128, 127, F)
    assert (a.rows, a.cols, a.x_row_stride, a.y_row_stride, a.residual_row_stride, a.out_row_stride) == \
        (4, 64, 128, 72, 80, 70)
    assert (a.residual, a.norm_weight, a.out, a.eps) == (r.ptr, w.ptr, o.ptr, 1e-5)
    # per group, asymmetric
    rms(out_scales=arr((4, 2), F), out_zero_points=arr((4, 2), S32), group_size=32)
    key, a = launched[-1]
    assert key[2] == Granularity.PER_GROUP and key[8] == 1 and a.group_size == 32
    # static per tensor: the scale on the host, no scale arrays, scale type default
    rms(scale=0.02, zero_point=3, y=arr((4, 64), U8), qmin=0, qmax=255)
    key, a = launched[-1]
    assert key[2] == Granularity.PER_TENSOR and key[7] == DType.DEFAULT and (a.scale, a.zero_point) == (0.02, 3)
    assert a.out_scales is None
    # gated: activation in the key, x [rows, 2 D]
    gated()
    key, a = launched[-1]
    assert key[0] == GATED and key[10] == Activation.SILU and (a.cols, a.x_row_stride) == (64, 128)
    gated(activation=Activation.GELU_TANH)
    assert launched[-1][0][10] == Activation.GELU_TANH


@pytest.mark.parametrize("call,match", [
    (lambda: rms(x=arr((4, 64), S8)), "not a float type"),
    (lambda: rms(y=arr((4, 64), F)), "int8, uint8, E4M3 or E5M2"),
    (lambda: rms(x=arr((4, 32), BF16)), "x shape"),
    (lambda: rms(x=arr((5, 64), BF16)), "x shape"),
    (lambda: rms(norm_weight=None), "norm_weight is required"),
    (lambda: rms(norm_weight=arr((63,), BF16)), "norm_weight"),
    (lambda: rms(norm_weight=arr((64,), F16)), "norm_weight"),
    (lambda: rms(eps=-1.0), "eps"),
    (lambda: rms(eps=float("inf")), "eps"),
    (lambda: rms(eps=float("nan")), "eps"),
    (lambda: rms(residual=arr((4, 64), F16)), "residual"),
    (lambda: rms(residual=arr((4, 32), BF16)), "residual"),
    (lambda: rms(out=arr((4, 64), F)), "out"),
    (lambda: rms(activation=Activation.SILU), "activation"),
    (lambda: rms(out_scales=None), "out_scales is required"),
    (lambda: rms(out_scales=arr((4, 1), F16)), "F32 or x's"),
    (lambda: rms(out_scales=arr((3, 1), F)), "out_scales"),
    (lambda: rms(out_zero_points=arr((4, 1), F)), "out_zero_points"),
    (lambda: rms(out_scales=arr((4, 3), F), group_size=24), "group_size"),
    (lambda: rms(out_scales=arr((4, 3), F), group_size=32), "out_scales"),
    (lambda: rms(scale=0.0), "scale"),
    (lambda: rms(scale=float("inf")), "scale"),
    (lambda: rms(scale=0.1, zero_point=2**31), "zero_point"),
    (lambda: rms(scale=0.1, out_scales=arr((4, 1), F)), "static scale"),
    (lambda: rms(qmin=-5, qmax=300), "quant_max"),
    (lambda: rms(x=arr((4, 64), BF16, device=1)), "cuda:"),
    (lambda: gated(x=arr((4, 64), BF16)), "x shape"),
    (lambda: gated(activation=7), "activation"),
    (lambda: gated(residual=arr((4, 64), BF16)), "RMSNorm"),
    (lambda: gated(norm_weight=arr((64,), BF16)), "RMSNorm"),
    (lambda: _core.fused(Op.QUANTIZE, x=arr((4, 64), BF16), y=arr((4, 64), S8)), "not a fused producer"),
])
def test_checks_before_the_library(launched, call, match):
    with pytest.raises(bq.InvalidArgumentError, match=match):
        call()
    assert not launched


@pytest.mark.parametrize("t", [F, F64, F16, BF16])
def test_library_accepts_the_args(validated, t):
    rms(t=t)
    rms(t=t, residual=arr((4, 64), t), out=arr((4, 64), t))
    rms(t=t, out_scales=arr((4, 2), F), out_zero_points=arr((4, 2), S32), group_size=32)
    rms(t=t, scale=0.05, zero_point=-3)
    gated(t=t)
    gated(t=t, activation=Activation.GELU_TANH, out=arr((4, 64), t), out_scales=arr((4, 4), F), group_size=16)
    gated(t=t, scale=0.05)
    rms(t=t, rows=1, d=4095)  # odd rows
    assert len(validated) == 8


def test_library_names_the_field(validated):
    # a residual row stride below cols: the library's own check, naming the field
    with pytest.raises(bq.InvalidArgumentError, match="residual"):
        x = arr((4, 64), BF16)
        a_res = V(arr((4, 64), BF16).ptr, (4, 64), (32, 1), BF16, 0)
        rms(x=x, residual=a_res)
