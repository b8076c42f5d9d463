"""fp8_linear's arguments with no device (no torch needed): the bq_args and descriptor that
_core.fp8_linear builds pass the library's own validation for every layout it takes; the
Python-side checks refuse, naming the argument, what the library cannot express; the scale
mode (tensorwise, rowwise or blockwise) follows from the scales' shapes; and the DLPack front end
reads its inputs and shapes its output as the torch function does."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import DType, Granularity, Op

from dlpack_fakes import HostBuffer, Producer

V = _core.View
F, F16, BF16, F64, E4, E5, S8 = DType.F32, DType.F16, DType.BF16, DType.F64, DType.E4M3, DType.E5M2, DType.S8
_next = [0x100000]


def arr(shape, dtype, strides=None, device=0, ptr=None):
    if strides is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
    if ptr is None:
        ptr = _next[0]
        _next[0] += 1 << 20  # aligned for every element type
    return V(ptr, shape, strides, dtype, device)


@pytest.fixture
def validated(monkeypatch):
    """each launch replaced by the library's own validation: (key, args) recorded"""
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    return seen


def lin(m=20, n=48, k=256, xt=E4, out=BF16, rowwise=False, bias=True, **kw):
    """_core.fp8_linear's arguments for an [m, k] x [n, k] problem, kw replacing any of them"""
    a = dict(x=arr((m, k), xt), w=arr((n, k), E4), scale_a=arr((m if rowwise else 1,), F),
             scale_b=arr((n if rowwise else 1,), F), y=arr((m, n), out), bias=arr((n,), out) if bias else None,
             rowwise=rowwise)
    a.update(kw)
    return a


@pytest.mark.parametrize("out", [F, F16, BF16])
@pytest.mark.parametrize("xt", [E4, E5])
def test_layouts_pass_the_library(validated, xt, out):
    """tensorwise and rowwise, with and without a bias, dense and with row strides, M = 1 and
    a ragged M, N and K: each call's descriptor and bq_args pass the library's validation"""
    _core.fp8_linear(**lin(xt=xt, out=out))
    _core.fp8_linear(**lin(xt=xt, out=out, rowwise=True, bias=False))
    _core.fp8_linear(**lin(m=33, n=200, k=1000, xt=xt, out=out, rowwise=True, x=arr((33, 1000), xt, (1040, 1)),
                           y=arr((33, 200), out, (208, 1))))
    _core.fp8_linear(**lin(m=1, n=64, k=32, xt=xt, out=out, rowwise=True))
    _core.fp8_linear(**lin(m=7, n=1, k=48, xt=xt, out=out))
    assert len(validated) == 5
    for key, _ in validated:
        assert (Op(key[0]), DType(key[3]), DType(key[4]), DType(key[7]), DType(key[9])) == \
            (Op.FP8_LINEAR, out, xt, F, out)
        assert key[5:7] == (0, 0) and key[8] == 0  # no q-range, symmetric
    assert [Granularity(k[2]) for k, _ in validated] == [Granularity.PER_TENSOR, Granularity.PER_TOKEN,
                                                           Granularity.PER_TOKEN, Granularity.PER_TOKEN,
                                                           Granularity.PER_TENSOR]
    # tensorwise and rowwise compile to one kernel: the SKU names the types alone
    skus = {_lib.sku(_lib.make_desc(k, 0)) for k, _ in validated}
    assert skus == {"fp8_linear.a_%s.w_e4m3.out_%s.scale_f32.mma_m16n8k32.sm_80" % (
        {E4: "e4m3", E5: "e5m2"}[xt], {F: "f32", F16: "f16", BF16: "bf16"}[out])}


def test_args_fields(validated):
    x, y = arr((33, 1000), E5, (1040, 1)), arr((33, 200), F16, (208, 1))
    w, sa, sb, b = arr((200, 1000), E4), arr((33,), F), arr((200,), F), arr((200,), F16)
    _core.fp8_linear(x=x, w=w, scale_a=sa, scale_b=sb, y=y, bias=b, rowwise=True)
    _core.fp8_linear(x=x, w=w, scale_a=arr((1,), F), scale_b=arr((1, 1), F), y=y)
    (k1, a), (k2, a2) = validated
    assert (a.rows, a.cols, a.n, a.x_row_stride, a.y_row_stride) == (33, 1000, 200, 1040, 208)
    assert (a.x, a.w, a.y, a.scales, a.w_scales, a.bias) == (x.ptr, w.ptr, y.ptr, sa.ptr, sb.ptr, b.ptr)
    assert not (a.zero_points or a.w_sums or a.out_scales) and a.scale == 0 and a.zero_point == 0
    assert a2.bias is None and a2.scales and a2.w_scales
    assert (Granularity(k1[2]), Granularity(k2[2])) == (Granularity.PER_TOKEN, Granularity.PER_TENSOR)


def test_python_checks_name_the_argument(validated):
    cases = [
        ("x: dtype S8", lin(x=arr((20, 256), S8))),
        ("x: dtype F16", lin(x=arr((20, 256), F16))),
        ("w: dtype E5M2.*weights are E4M3", lin(w=arr((48, 256), E5))),
        ("w: dtype S8", lin(w=arr((48, 256), S8))),
        (r"w: shape \(48, 128\)", lin(w=arr((48, 128), E4))),
        (r"w: shape \(256, 48\) strides \(1, 256\)", lin(w=arr((256, 48), E4, (1, 256)))),  # a transposed view
        (r"w: shape \(48, 256\) strides \(300, 1\)", lin(w=arr((48, 256), E4, (300, 1)))),  # padded rows
        (r"y: shape \(20, 47\)", lin(y=arr((20, 47), BF16))),
        (r"y: shape \(19, 48\)", lin(y=arr((19, 48), BF16))),
        ("y: dtype F64", lin(y=arr((20, 48), F64), bias=False)),
        ("y: dtype E4M3", lin(y=arr((20, 48), E4), bias=False)),
        (r"scale_a: shape \(20,\), expected \(1,\)", lin(scale_a=arr((20,), F))),  # tensorwise: one element
        (r"scale_b: shape \(48,\), expected \(1,\)", lin(scale_b=arr((48,), F))),
        (r"scale_a: shape \(19,\), expected \(20,\)", lin(rowwise=True, scale_a=arr((19,), F))),
        (r"scale_b: shape \(1,\), expected \(48,\)", lin(rowwise=True, scale_b=arr((1,), F))),
        ("scale_a: dtype F16", lin(scale_a=arr((1,), F16))),
        ("scale_b: dtype BF16", lin(rowwise=True, scale_b=arr((48,), BF16))),
        ("scale_a: must be contiguous", lin(rowwise=True, scale_a=arr((20,), F, (2,)))),
        ("bias: dtype F32", lin(bias=False, y=arr((20, 48), F16)) | {"bias": arr((48,), F)}),
        (r"bias: shape \(47,\)", lin() | {"bias": arr((47,), BF16)}),
        ("x: row stride 100 is smaller", lin(x=arr((20, 256), E4, (100, 1)))),
        ("x: the last dimension must be contiguous", lin(x=arr((20, 256), E4, (512, 2)))),
        ("scale_b is on cuda:1", lin(scale_b=arr((1,), F, device=1))),
    ]
    for word, args in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            _core.fp8_linear(**args)
    assert validated == []


def test_the_library_refuses_what_python_lets_through(validated):
    """misaligned pointers are the library's to catch; its message names the field"""
    with pytest.raises(bq.InvalidArgumentError, match="args.y"):
        _core.fp8_linear(**lin(out=F, y=arr((20, 48), F, ptr=0x100002)))
    with pytest.raises(bq.InvalidArgumentError, match="args.bias"):
        _core.fp8_linear(**lin(out=F16, bias=False) | {"bias": arr((48,), F16, ptr=0x100001)})
    with pytest.raises(bq.InvalidArgumentError, match="args.scales"):
        _core.fp8_linear(**lin(scale_a=arr((1,), F, ptr=0x100006)))
    assert validated == []


def test_scale_modes():
    def r(m, n, a, b, k=256):
        mode = _core.fp8_scales_mode(m, n, k, a, b)
        return None if mode == "blockwise" else mode == "rowwise"
    # tensorwise: one element each, any shape of one element
    for a, b in (((), ()), ((1,), (1,)), ((1, 1), ()), ((), (1, 1))):
        assert r(20, 48, a, b) is False
    # rowwise: [M] or [M, 1], and [N] or [1, N]
    for a, b in (((20,), (48,)), ((20, 1), (1, 48)), ((20,), (1, 48)), ((20, 1), (48,))):
        assert r(20, 48, a, b) is True
    # blockwise: [M, ceil(K / 128)] and [ceil(N / 128), ceil(K / 128)] or its transpose
    for a, b, k in (((20, 2), (1, 2), 256), ((20, 2), (2, 1), 256), ((20, 3), (1, 3), 300), ((20, 3), (3, 1), 257)):
        assert r(20, 48, a, b, k) is None
    assert r(20, 300, (20, 8), (3, 8), 1000) is None and r(20, 300, (20, 8), (8, 3), 1000) is None
    # one K block, [M, 1] x [1, 1] where N = 1: rowwise comes first
    assert r(20, 1, (20, 1), (1, 1), 100) is True and r(20, 48, (20, 1), (1, 1), 100) is None
    # M = 1 (or N = 1): a one-element scale fits either mode, the other scale decides
    assert r(1, 48, (1, 1), (48,)) is True and r(1, 48, (), (1, 48)) is True and r(1, 48, (1,), ()) is False
    assert r(20, 1, (20, 1), (1,)) is True and r(20, 1, (), (1, 1)) is False and r(1, 1, (1,), (1,)) is False
    assert r(0, 48, (0,), (48,)) is True and r(0, 48, (0, 1), (1, 48)) is True  # no rows: rowwise
    cases = [
        (r"scale_a \(shape \(\), tensorwise\) and scale_b \(shape \(48,\), rowwise\) differ", (20, 48, (), (48,))),
        (r"scale_a \(shape \(20, 1\), rowwise\) and scale_b \(shape \(1,\), tensorwise\) differ",
         (20, 48, (20, 1), (1,))),
        (r"scale_a: shape \(48,\), expected one element \(tensorwise\) or \[20\] or \[20, 1\]",
         (20, 48, (48,), (48,))),
        (r"scale_a: shape \(1, 20\)", (20, 48, (1, 20), (48,))),
        (r"scale_b: shape \(48, 1\), expected one element \(tensorwise\) or \[48\] or \[1, 48\]",
         (20, 48, (20,), (48, 1))),
        (r"scale_b: shape \(2,\)", (20, 48, (), (2,))),
        (r"scale_a: shape \(0,\)", (20, 48, (0,), ())),
        (r"scale_a: shape \(20, 3\), .* or \[20, 2\] \(blockwise", (20, 48, (20, 3), (1, 2))),
        (r"scale_b: shape \(2, 2\), .* or \[1, 2\] or \[2, 1\] \(blockwise", (20, 48, (20, 2), (2, 2))),
        (r"scale_a \(shape \(20, 2\), blockwise\) and scale_b \(shape \(48,\), rowwise\) differ",
         (20, 48, (20, 2), (48,))),
    ]
    for word, args in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            r(*args)


# ---- the DLPack front end ------------------------------------------------------------------------
@pytest.fixture
def launches(monkeypatch, validated):
    """validated's stand-ins, with dlpack's buffers from host memory (counted) and no device"""
    made = []

    class Counted(HostBuffer):
        def __init__(self, nbytes):
            super().__init__(nbytes)
            made.append(nbytes)
    monkeypatch.setattr(dlpack, "DeviceBuffer", Counted)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    before = dlpack.live_exports()
    yield validated, made
    import gc
    gc.collect()
    assert dlpack.live_exports() == before, "a consumed capsule's deleter did not run"


def test_dlpack_fp8_linear(launches):
    seen, made = launches
    x, w = Producer((2, 10, 256), E4), Producer((48, 256), E4)
    y = bq.fp8_linear(x, w, Producer((), F), Producer((1,), F), stream=0x77)
    assert isinstance(y, dlpack.DeviceArray) and y.shape == (2, 10, 48) and y.dtype == BF16  # the default
    assert x.streams == [0x77]
    y = bq.fp8_linear(x, w, Producer((20, 1), F), Producer((1, 48), F), Producer((48,), F16), out_dtype="float16")
    assert y.shape == (2, 10, 48) and y.dtype == F16
    y = bq.fp8_linear(Producer((30, 256), E5, strides=(272, 1)), w, Producer((30,), F), Producer((48,), F),
                      out_dtype="float32")
    assert y.shape == (30, 48) and y.dtype == F
    y = bq.fp8_linear(Producer((256,), E4), w, Producer((1,), F), Producer((48,), F))  # one row: rowwise
    assert y.shape == (48,)
    got = [(Granularity(k[2]), DType(k[4]), DType(k[9]), a.rows, a.x_row_stride) for k, a in seen]
    assert got == [(Granularity.PER_TENSOR, E4, BF16, 20, 256), (Granularity.PER_TOKEN, E4, F16, 20, 256),
                   (Granularity.PER_TOKEN, E5, F, 30, 272), (Granularity.PER_TOKEN, E4, BF16, 1, 256)]
    assert made == [2 * 10 * 48 * 2, 2 * 10 * 48 * 2, 30 * 48 * 4, 48 * 2]  # the outputs alone: no workspace


def test_dlpack_fp8_linear_refuses_by_name(launches):
    seen, made = launches
    x, w = Producer((20, 256), E4), Producer((48, 256), E4)
    one, sa, sb = Producer((1,), F), Producer((20,), F), Producer((48,), F)
    cases = [
        ("out_dtype F64", lambda: bq.fp8_linear(x, w, one, one, out_dtype="float64")),
        ("out_dtype S8", lambda: bq.fp8_linear(x, w, one, one, out_dtype="int8")),
        ("scale_b is required", lambda: bq.fp8_linear(x, w, one, None)),
        ("scale_a .*tensorwise.* and scale_b .*rowwise.* differ", lambda: bq.fp8_linear(x, w, one, sb)),
        (r"scale_b: shape \(20,\)", lambda: bq.fp8_linear(x, w, sa, Producer((20,), F))),
        ("scale_a: must be contiguous", lambda: bq.fp8_linear(x, w, Producer((20, 1), F, strides=(2, 1)), sb)),
        ("w: dtype E5M2", lambda: bq.fp8_linear(x, Producer((48, 256), E5), one, one)),
        (r"w: shape \(48,\)", lambda: bq.fp8_linear(x, Producer((48,), E4), one, one)),
        ("x: dtype BF16", lambda: bq.fp8_linear(Producer((20, 256), BF16), w, one, one)),
        ("bias: dtype F32", lambda: bq.fp8_linear(x, w, one, one, Producer((48,), F))),
        ("scale_a: dtype F16", lambda: bq.fp8_linear(x, w, Producer((1,), F16), one)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert seen == []
    assert len(made) == 5  # outputs allocated before _core's checks (dtypes, strides), freed with the error


def test_blockwise_layouts_pass_the_library(validated):
    """blockwise: scale_a row-major (dense or with a row stride) or MN-major (torch's layout,
    rows padded or not), scale_b [NB, KB] or its transpose view; one row and one K block
    included; each call's descriptor and bq_args pass the library's validation"""
    def blk(m, n, k, sa, sb, **kw):
        return lin(m=m, n=n, k=k, scale_a=sa, scale_b=sb, blockwise=True, **kw)
    _core.fp8_linear(**blk(20, 300, 1000, arr((20, 8), F), arr((3, 8), F)))            # row-major, dense
    _core.fp8_linear(**blk(20, 300, 1000, arr((20, 8), F, (10, 1)), arr((8, 3), F, (1, 8))))  # row stride; b.t()
    _core.fp8_linear(**blk(20, 300, 1000, arr((20, 8), F, (1, 20)), arr((3, 8), F)))    # MN-major
    _core.fp8_linear(**blk(18, 300, 1000, arr((18, 8), F, (1, 20)), arr((3, 8), F)))    # MN-major, rows padded
    _core.fp8_linear(**blk(1, 64, 1000, arr((1, 8), F, (8, 4)), arr((1, 8), F)))         # one row, spaced: MN
    _core.fp8_linear(**blk(20, 48, 100, arr((20, 1), F, (3, 1)), arr((1, 1), F)))        # one K block
    got = [(Granularity(k[2]), k[12], a.group_row_stride) for k, a in validated]
    assert got == [(Granularity.PER_BLOCK, 0, 8), (Granularity.PER_BLOCK, 0, 10), (Granularity.PER_BLOCK, 1, 20),
                   (Granularity.PER_BLOCK, 1, 20), (Granularity.PER_BLOCK, 1, 4), (Granularity.PER_BLOCK, 0, 3)]
    skus = {_lib.sku(_lib.make_desc(k, 0)) for k, _ in validated}
    assert skus == {"fp8_linear.a_e4m3.w_e4m3.out_bf16.scale_f32.mma_m16n8k32.sm_80"}  # the one kernel


def test_blockwise_checks_name_the_argument(validated):
    def blk(sa, sb, **kw):
        return lin(m=20, n=300, k=1000, scale_a=sa, scale_b=sb, blockwise=True, **kw)
    cases = [
        (r"scale_a: shape \(20, 7\), expected \(20, 8\)", blk(arr((20, 7), F), arr((3, 8), F))),
        (r"scale_a: strides \(4, 1\)", blk(arr((20, 8), F, (4, 1)), arr((3, 8), F))),      # rows overlap
        (r"scale_a: strides \(1, 19\)", blk(arr((20, 8), F, (1, 19)), arr((3, 8), F))),    # columns overlap
        (r"scale_a: strides \(16, 2\)", blk(arr((20, 8), F, (16, 2)), arr((3, 8), F))),
        ("scale_a: dtype F16", blk(arr((20, 8), F16), arr((3, 8), F))),
        (r"scale_b: shape \(3, 8\) strides \(16, 1\)", blk(arr((20, 8), F), arr((3, 8), F, (16, 1)))),
        (r"scale_b: shape \(8, 3\) strides \(3, 1\)", blk(arr((20, 8), F), arr((8, 3), F))),  # not w's layout
        (r"scale_b: shape \(3, 7\)", blk(arr((20, 8), F), arr((3, 7), F))),
        ("scale_b: dtype BF16", blk(arr((20, 8), F), arr((3, 8), BF16))),
    ]
    for word, args in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            _core.fp8_linear(**args)
    assert validated == []


def test_dlpack_fp8_linear_blockwise(launches):
    seen, _ = launches
    x, w = Producer((2, 10, 1000), E4), Producer((300, 1000), E4)
    y = bq.fp8_linear(x, w, Producer((20, 8), F, strides=(1, 20)), Producer((3, 8), F))
    assert y.shape == (2, 10, 300)
    (k, a), = seen
    assert (Granularity(k[2]), k[12], a.group_row_stride) == (Granularity.PER_BLOCK, 1, 20)


def test_quantized_linear_args(validated):
    """_core.fp8_quantized_linear: float x (its row stride), per channel or blockwise weight
    scales; descriptor and bq_args pass the library's validation; the Python checks name the
    argument"""
    x, w, y = arr((20, 256), BF16, (300, 1)), arr((48, 256), E4), arr((20, 48), BF16)
    _core.fp8_quantized_linear(x=x, w=w, scale_b=arr((48,), F), y=y, bias=arr((48,), BF16))
    _core.fp8_quantized_linear(x=x, w=w, scale_b=arr((1, 2), F), y=y, blockwise=True, act_dtype=E5)
    (k1, a1), (k2, a2) = validated
    assert (Op(k1[0]), Granularity(k1[2]), DType(k1[3]), DType(k1[4]), DType(k1[9])) == (
        Op.FP8_QUANTIZED_LINEAR, Granularity.PER_TOKEN, BF16, E4, BF16)
    assert (Granularity(k2[2]), DType(k2[4])) == (Granularity.PER_BLOCK, E5)
    assert (a1.rows, a1.cols, a1.n, a1.x_row_stride, a1.scales) == (20, 256, 48, 300, None)
    cases = [
        ("x: dtype E4M3", dict(x=arr((20, 256), E4))),
        (r"x: K = 200, expected a multiple of 128", dict(x=arr((20, 200), BF16), w=arr((48, 200), E4),
                                                          scale_b=arr((1, 2), F), blockwise=True)),
        (r"scale_b: shape \(47,\)", dict(scale_b=arr((47,), F))),
        (r"scale_b: shape \(2, 2\)", dict(scale_b=arr((2, 2), F), blockwise=True)),
        ("act_dtype S8", dict(act_dtype=S8)),
        ("w: dtype E5M2", dict(w=arr((48, 256), E5))),
    ]
    for word, kw in cases:
        args = dict(x=x, w=w, scale_b=arr((48,), F), y=y)
        args.update(kw)
        with pytest.raises(bq.InvalidArgumentError, match=word):
            _core.fp8_quantized_linear(**args)
    assert len(validated) == 2


def test_dlpack_fp8_quantized_linear(launches):
    seen, made = launches
    x, w = Producer((2, 10, 256), F16), Producer((48, 256), E4)
    y = bq.fp8_quantized_linear(x, w, Producer((48,), F))
    assert y.shape == (2, 10, 48) and y.dtype == F16
    y = bq.fp8_quantized_linear(x, w, Producer((1, 2), F), act_dtype="float8_e5m2")
    got = [(Op(k[0]), Granularity(k[2]), DType(k[4]), a.rows) for k, a in seen]
    assert got == [(Op.FP8_QUANTIZED_LINEAR, Granularity.PER_TOKEN, E4, 20),
                   (Op.FP8_QUANTIZED_LINEAR, Granularity.PER_BLOCK, E5, 20)]
    assert made[:1] == [2 * 10 * 48 * 2]  # the output, then the workspace the layer asks for
