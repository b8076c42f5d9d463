"""The fused rotation on the affine ops (static-scale quantize and dequantize; docs/numerics.md,
"Rotation") with no device and no torch: rotation_block and random_signs checked before any
launch, each error naming the option; fake quantize takes them both ways (no saved mask),
the quantize and dequantize backward passes refuse them; the descriptor (desc.rotation,
desc.random_signs) and the arguments (args.rotation_block, the seed keying the signs) that
the DLPack front end hands the library, whose own checks pass them. test_gpu_affine_rot.py
and test_gpu_fake_rot.py run the ops on a GPU."""
import re

import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import Direction, DType, Granularity, Op

FWD, BWD = Direction.FORWARD, Direction.BACKWARD


def _v(shape, dtype, at=0x100000):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.insert(0, acc)
        acc *= s
    return _core.View(at, shape, strides, dtype, 0)


def test_affine_rotation_options_are_checked():
    """_core.affine_rot: rot_fields on quantize and dequantize, forward, and on fake quantize
    either way; the quantize and dequantize backward passes refuse either option by name"""
    assert _core.affine_rot(Op.QUANTIZE, FWD, None, False) == (0, 0, 0)
    assert _core.affine_rot(Op.QUANTIZE, FWD, 32, False) == (1, 32, 0)
    assert _core.affine_rot(Op.DEQUANTIZE, FWD, 64.0, True) == (1, 64, 1)
    assert _core.affine_rot(Op.FAKE_QUANTIZE, FWD, None, False) == (0, 0, 0)
    assert _core.affine_rot(Op.FAKE_QUANTIZE, FWD, 16, False) == (1, 16, 0)
    assert _core.affine_rot(Op.FAKE_QUANTIZE, BWD, 128, True) == (1, 128, 1)
    assert _core.affine_rot(Op.QUANTIZE, BWD, None, False) == (0, 0, 0)
    cases = [(Op.QUANTIZE, BWD, 16, True, "rotation_block: quantize backward takes no fused rotation"),
             (Op.QUANTIZE, BWD, None, True, "random_signs: quantize backward takes"),
             (Op.DEQUANTIZE, BWD, 8, False, "rotation_block: dequantize backward takes"),
             (Op.FAKE_QUANTIZE, BWD, None, True, "random_signs: the fused rotation's"),
             (Op.FAKE_QUANTIZE, FWD, 8.5, False, "rotation_block"),
             (Op.QUANTIZE, FWD, None, True, "random_signs"),
             (Op.QUANTIZE, FWD, "16", False, "rotation_block")]
    for op, d, block, signs, word in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            _core.affine_rot(op, d, block, signs)
    # the signs need a seed; dequantize takes one for them (and none else)
    assert _core.affine_sr(Op.DEQUANTIZE, FWD, "nearest", -1, 0, 1) == (0, (1 << 64) - 1, 0)
    assert _core.affine_sr(Op.QUANTIZE, FWD, "stochastic", 5, 2, 1) == (1, 5, 2)
    with pytest.raises(bq.InvalidArgumentError, match="seed: the random signs"):
        _core.affine_sr(Op.QUANTIZE, FWD, "nearest", None, 0, 1)
    with pytest.raises(bq.InvalidArgumentError, match="seed and offset"):
        _core.affine_sr(Op.DEQUANTIZE, FWD, "nearest", 3, 0, 0)
    # fake quantize's backward pass takes the forward's seed for the signs, and rounds nothing
    assert _core.affine_sr(Op.FAKE_QUANTIZE, BWD, "nearest", -2, 0, 1) == (0, (1 << 64) - 2, 0)
    with pytest.raises(bq.InvalidArgumentError, match="rounding"):
        _core.affine_sr(Op.FAKE_QUANTIZE, BWD, "stochastic", 1, 0, 1)


def test_core_refuses_the_rotation_before_the_library(monkeypatch):
    """_core.affine with rotation_block on the quantize and dequantize backward passes, or
    with fake quantize's saved mask (which the library's run refuses), raises naming the
    option before any plan or launch; the library refuses those descriptors too. Fake
    quantize either way passes _core and the library with the same arguments."""
    ran = []
    monkeypatch.setattr(_core, "_launch", lambda *a, **k: ran.append(a))
    x, y = _v((4, 64), DType.F32), _v((4, 64), DType.F32, 0x200000)
    mask = _v((8,), DType.S32, 0x300000)
    common = dict(int_type=DType.S8, qmin=None, qmax=None, scale=0.5)
    cases = [
        ("rotation_block: quantize backward", lambda: _core.affine(
            Op.QUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=x, y=None, dy=x, dx=y, rotation_block=16, **common)),
        ("random_signs: quantize backward", lambda: _core.affine(
            Op.QUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=x, y=None, dy=x, dx=y, random_signs=True, seed=1,
            **common)),
        ("rotation_block: dequantize backward", lambda: _core.affine(
            Op.DEQUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=None, y=None, dy=x, dx=y, rotation_block=32,
            **common)),
        ("mask: fake quantize with the fused rotation keeps no mask", lambda: _core.affine(
            Op.FAKE_QUANTIZE, FWD, Granularity.PER_TENSOR, fl=x, x=x, y=y, mask=mask, rotation_block=16, **common)),
        ("mask: fake quantize with the fused rotation", lambda: _core.affine(
            Op.FAKE_QUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=None, y=None, dy=x, dx=y, mask=mask,
            rotation_block=8, random_signs=True, seed=2, **common)),
        ("seed: the random signs", lambda: _core.affine(
            Op.FAKE_QUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=x, y=None, dy=x, dx=y, rotation_block=2,
            random_signs=True, **common)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert ran == []
    a = _lib.Args(numel=256, scale=0.5, rotation_block=16)
    a.x, a.y, a.dy, a.dx = x.ptr, y.ptr, x.ptr, y.ptr
    for op, d in ((Op.QUANTIZE, BWD), (Op.DEQUANTIZE, BWD)):
        key = _lib.desc_key(op, d, Granularity.PER_TENSOR, DType.F32, DType.S8, -128, 127, rotation=1)
        with pytest.raises(bq.InvalidArgumentError):
            _lib.validate(key, 0, a)
    # quantize and dequantize forward, and fake quantize either way, pass the library's checks
    for op, d in ((Op.QUANTIZE, FWD), (Op.DEQUANTIZE, FWD), (Op.FAKE_QUANTIZE, FWD), (Op.FAKE_QUANTIZE, BWD)):
        key = _lib.desc_key(op, d, Granularity.PER_TENSOR, DType.F32, DType.S8, -128, 127, rotation=1)
        _lib.validate(key, 0, a)
    # and _core hands them over: fake quantize forward and backward, the seed keying the signs
    seen = []
    monkeypatch.setattr(_core, "_launch", lambda key, device, args, *r, **k: seen.append(
        (key, _lib.Args.from_buffer_copy(args))))
    _core.affine(Op.FAKE_QUANTIZE, FWD, Granularity.PER_TENSOR, fl=x, x=x, y=y, rotation_block=16, **common)
    _core.affine(Op.FAKE_QUANTIZE, BWD, Granularity.PER_TENSOR, fl=y, x=x, y=None, dy=x, dx=y, rotation_block=64,
                 random_signs=True, seed=-1, **common)
    for key, args in seen:
        _lib.validate(key, 0, args)
    assert [(key[-3], key[-2], key[-1], a.rotation_block, a.seed, a.mask) for key, a in seen] == [
        (0, 0, 1, 16, 0, None), (1, 0, 1, 64, (1 << 64) - 1, None)]


def test_dlpack_affine_ops_carry_the_rotation(launches, allocs):
    """quantize at every granularity (either rounding) and dequantize with rotation_block
    hand desc.rotation (a ".rot" SKU), desc.random_signs, the block and the seed (the signs'
    key, and stochastic rounding's with its offset) to the library; without the options
    none of them"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, xw = Producer((4, 64), DType.BF16), Producer((4, 256), DType.F32)
    x3 = Producer((4, 6, 40), DType.F16)
    q, q3 = Producer((4, 64), DType.S8), Producer((4, 6, 40), DType.E4M3)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    m = 1 << 64
    dlpack.quantize_per_tensor(x, 0.5, 3, "uint8", rotation_block=32)
    dlpack.quantize_per_channel(x, f32(64), Producer((64,), DType.S32), 1, rotation_block=64, random_signs=True,
                                seed=-3)
    dlpack.quantize_per_channel(x3, f32(4), None, 0, "float8_e4m3fn", rotation_block=8)  # (blocks of the last dim)
    dlpack.quantize_per_token(x, f32(4), rotation_block=16, rounding="stochastic", seed=4, offset=-1)
    dlpack.quantize_per_group(xw, f32(4, 8), None, 32, "float8_e4m3fn", rotation_block=256, random_signs=True,
                              seed=5)
    dlpack.quantize_per_block(x, f32(1, 4), None, 16, "float8_e5m2", rotation_block=2, random_signs=True, seed=6,
                              rounding="stochastic", offset=7)
    dlpack.dequantize(q, 0.5, 2, rotation_block=32)
    dlpack.dequantize(q, f32(4), rotation_block=64, random_signs=True, seed=9, out_dtype="bfloat16")
    dlpack.dequantize(q, f32(64), axis=1, rotation_block=4)
    dlpack.dequantize(q3, f32(6), axis=1, rotation_block=8, random_signs=True, seed=m + 10, out_dtype="float16")
    dlpack.dequantize(q, f32(4, 2), group_size=32, rotation_block=8)
    dlpack.dequantize(q, f32(1, 4), block_size=16, rotation_block=16)
    dlpack.quantize_per_tensor(x, 0.5)
    dlpack.dequantize(q, 0.5)
    got = [(Op(key[0]).name, key[-1], key[-3], key[-2], a.rotation_block, a.seed, a.offset) for key, a in launches]
    Q, D = "QUANTIZE", "DEQUANTIZE"
    assert got == [(Q, 1, 0, 0, 32, 0, 0), (Q, 1, 1, 0, 64, m - 3, 0), (Q, 1, 0, 0, 8, 0, 0), (Q, 1, 0, 1, 16, 4, m - 1),
                   (Q, 1, 1, 0, 256, 5, 0), (Q, 1, 1, 1, 2, 6, 7), (D, 1, 0, 0, 32, 0, 0), (D, 1, 1, 0, 64, 9, 0),
                   (D, 1, 0, 0, 4, 0, 0), (D, 1, 1, 0, 8, 10, 0), (D, 1, 0, 0, 8, 0, 0), (D, 1, 0, 0, 16, 0, 0),
                   (Q, 0, 0, 0, 0, 0, 0), (D, 0, 0, 0, 0, 0, 0)], got
    grans = [Granularity(key[2]).name for key, _ in launches]
    assert grans[:6] == ["PER_TENSOR", "PER_CHANNEL", "PER_CHANNEL", "PER_TOKEN", "PER_GROUP", "PER_BLOCK"]
    assert grans[6:12] == ["PER_TENSOR", "PER_TOKEN", "PER_CHANNEL", "PER_CHANNEL", "PER_GROUP", "PER_BLOCK"]
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(".rot.sm_" in s for s in skus[:12]) and not any(".rot." in s for s in skus[12:]), skus
    assert ".sr.rot." in skus[3] and ".rows.rot." in skus[0], skus


def test_dlpack_rotation_refusals_name_the_option(launches, allocs):
    """random_signs without a seed or without a block, a seed on dequantize without the
    signs, stochastic rounding on dequantize, a block that is not an integer: refused by name
    before anything is imported, allocated or launched"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, q, s = Producer((4, 64), DType.F32), Producer((4, 64), DType.S8), Producer((4,), DType.F32)
    cases = [
        ("seed: the random signs", lambda: dlpack.quantize_per_tensor(x, 0.5, rotation_block=32, random_signs=True)),
        ("seed: the random signs", lambda: dlpack.dequantize(q, 0.5, rotation_block=16, random_signs=True)),
        ("random_signs", lambda: dlpack.quantize_per_token(x, s, random_signs=True, seed=1)),
        ("random_signs", lambda: dlpack.dequantize(q, s, random_signs=True, seed=1)),
        ("seed and offset", lambda: dlpack.dequantize(q, 0.5, seed=3)),
        ("seed and offset", lambda: dlpack.quantize_per_group(x, Producer((4, 2), DType.F32), None, 32,
                                                              rotation_block=16, seed=3)),
        ("rounding", lambda: dlpack.dequantize(q, s, rotation_block=16, rounding="stochastic", seed=1)),
        ("rotation_block", lambda: dlpack.quantize_per_channel(x, Producer((64,), DType.F32), None, 1,
                                                               rotation_block="16")),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and q.streams == [] and s.streams == []  # (no input was imported)


def test_dlpack_rotation_block_must_divide_the_last_dimension(launches):
    """the block: a power of two from 2 to 256 dividing the last dimension, per tensor and per
    channel too (where the library's blocks run along the flat array: a block dividing numel
    but not the last dimension is refused)"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, x3, q = Producer((8, 24), DType.F32), Producer((4, 6, 40), DType.BF16), Producer((8, 24), DType.S8)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    for n in (0, 1, 3, 24, 512, -8):
        with pytest.raises(bq.InvalidArgumentError, match=r"rotation_block \(%d\) must be a power of two" % n):
            dlpack.quantize_per_token(x, f32(8), rotation_block=n)
    cases = [
        ("(24)", lambda: dlpack.quantize_per_tensor(x, 0.5, rotation_block=16)),  # (192 elements: 16 divides them)
        ("(40)", lambda: dlpack.quantize_per_channel(x3, f32(4), None, 0, rotation_block=16)),  # (960)
        ("(40)", lambda: dlpack.quantize_per_channel(x3, f32(40), None, 2, rotation_block=32)),
        ("(24)", lambda: dlpack.quantize_per_group(x, f32(8, 3), None, 8, rotation_block=16)),
        ("(24)", lambda: dlpack.quantize_per_block(x, f32(1, 2), None, 16, rotation_block=32)),
        ("(24)", lambda: dlpack.dequantize(q, 0.5, rotation_block=16)),
        ("(24)", lambda: dlpack.dequantize(q, f32(8), rotation_block=64)),
    ]
    for dim, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=re.escape("dividing the last dimension " + dim)):
            call()
    assert launches == []
    dlpack.quantize_per_tensor(x, 0.5, rotation_block=8)
    dlpack.quantize_per_channel(x3, f32(6), None, 1, rotation_block=8)
    dlpack.dequantize(q, f32(8), rotation_block=2)
    assert [a.rotation_block for _, a in launches] == [8, 8, 2]


def test_quantize_and_dequantize_backward_functions_take_no_rotation():
    """the public quantize and dequantize backward functions have no rotation options
    (compose hadamard with them); quantize, dequantize and the fake quantize functions
    (fake_quantize_backward with seed= for the signs) do"""
    import inspect
    from baracuda_quant import dlpack
    for name in ("quantize_backward", "dequantize_backward"):
        params = inspect.signature(getattr(dlpack, name)).parameters
        assert "rotation_block" not in params and "random_signs" not in params, name
    for name in ("quantize_per_tensor", "quantize_per_channel", "quantize_per_token", "quantize_per_group",
                 "quantize_per_block", "dequantize", "fake_quantize", "fake_quantize_per_tensor_affine",
                 "fake_quantize_per_channel_affine", "fake_quantize_backward"):
        params = inspect.signature(getattr(dlpack, name)).parameters
        assert params["rotation_block"].default is None and params["random_signs"].default is False, name
        assert params["rotation_block"].kind == inspect.Parameter.KEYWORD_ONLY, name
    assert inspect.signature(dlpack.fake_quantize_backward).parameters["seed"].default is None
