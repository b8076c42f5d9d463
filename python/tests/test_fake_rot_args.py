"""Fake quantize's fused rotation (docs/numerics.md, "Rotation") through the DLPack front end
with no device and no torch: fake_quantize (every granularity, either rounding),
fake_quantize_per_tensor_affine, _per_channel_affine and fake_quantize_backward hand
desc.rotation (a ".rot" SKU), desc.random_signs, args.rotation_block and the seed keying the
signs (the backward pass: the forward's seed, no offset, rounding to nearest) to the library,
whose own checks pass them, and never a mask; the options' errors name the option before
anything is imported, allocated or launched. test_gpu_fake_rot.py runs them on a GPU."""
import re

import pytest

import baracuda_quant as bq
from baracuda_quant import _lib
from baracuda_quant._enums import Direction, DType, Granularity, Op

M64 = 1 << 64


def _got(launches):
    """(op, direction, granularity, signs, rounding, rotation, block, seed, offset, mask) a launch"""
    return [(Op(k[0]).name, Direction(k[1]).name[0], Granularity(k[2]).name[4:], k[14], k[15], k[16],
             a.rotation_block, a.seed, a.offset, a.mask) for k, a in launches]


def test_fake_quantize_carries_the_rotation_at_every_granularity(launches, allocs):
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, x3 = Producer((4, 64), DType.BF16), Producer((4, 6, 32), DType.F16)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    dlpack.fake_quantize(x, 0.5, 3, -128, 127, rotation_block=32)
    dlpack.fake_quantize(x3, f32(6), None, dtype="float8_e4m3fn", axis=1, rotation_block=8, random_signs=True,
                         seed=-3)
    dlpack.fake_quantize(x, f32(4), None, 0, 255, rotation_block=16, rounding="stochastic", seed=4, offset=-1)
    dlpack.fake_quantize(x, f32(4, 2), None, dtype="float8_e5m2", group_size=32, rotation_block=64,
                         random_signs=True, seed=5, rounding="stochastic", offset=6)
    dlpack.fake_quantize(x, f32(1, 4), None, dtype="int8", block_size=16, rotation_block=2)
    dlpack.fake_quantize_per_tensor_affine(x, 0.25, 1, -128, 127, rotation_block=4, random_signs=True, seed=7)
    dlpack.fake_quantize_per_channel_affine(x, f32(64), Producer((64,), DType.S32), 1, 0, 255, rotation_block=64,
                                            rounding="stochastic", seed=8)
    dlpack.fake_quantize(x, 0.5, 3, -128, 127)
    F = "FAKE_QUANTIZE"
    assert _got(launches) == [
        (F, "F", "TENSOR", 0, 0, 1, 32, 0, 0, None), (F, "F", "CHANNEL", 1, 0, 1, 8, M64 - 3, 0, None),
        (F, "F", "TOKEN", 0, 1, 1, 16, 4, M64 - 1, None), (F, "F", "GROUP", 1, 1, 1, 64, 5, 6, None),
        (F, "F", "BLOCK", 0, 0, 1, 2, 0, 0, None), (F, "F", "TENSOR", 1, 0, 1, 4, 7, 0, None),
        (F, "F", "CHANNEL", 0, 1, 1, 64, 8, 0, None), (F, "F", "TENSOR", 0, 0, 0, 0, 0, 0, None)], _got(launches)
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(s.startswith("fake_quantize.fwd.") for s in skus), skus
    assert all(".rot.sm_" in s for s in skus[:7]) and ".rot." not in skus[7], skus
    assert ".sr.rot." in skus[2] and ".sr.rot." in skus[3], skus
    assert len(allocs) == 8  # (one output each: no mask)


def test_fake_quantize_backward_carries_the_forward_rotation(launches, allocs):
    """the backward pass at every granularity: the block, the signs and their seed (no
    offset, rounding to nearest), x read (the mask of the rotated x), dy's shape"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, dy = Producer((4, 64), DType.F32), Producer((4, 64), DType.F32)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    dlpack.fake_quantize_backward(dy, x, 0.5, 3, -128, 127, rotation_block=64, random_signs=True, seed=-1)
    dlpack.fake_quantize_backward(dy, x, f32(64), None, dtype="float8_e4m3fn", axis=1, rotation_block=16)
    dlpack.fake_quantize_backward(dy, x, f32(4), None, 0, 255, rotation_block=2, random_signs=True, seed=M64 + 9)
    dlpack.fake_quantize_backward(dy, x, f32(4, 2), None, dtype="int8", group_size=32, rotation_block=128 // 4)
    dlpack.fake_quantize_backward(dy, x, f32(1, 4), None, dtype="float8_e5m2", block_size=16, rotation_block=8,
                                  random_signs=True, seed=11)
    dlpack.fake_quantize_backward(dy, x, 0.5, 3, -128, 127)
    F = "FAKE_QUANTIZE"
    assert _got(launches) == [
        (F, "B", "TENSOR", 1, 0, 1, 64, M64 - 1, 0, None), (F, "B", "CHANNEL", 0, 0, 1, 16, 0, 0, None),
        (F, "B", "TOKEN", 1, 0, 1, 2, 9, 0, None), (F, "B", "GROUP", 0, 0, 1, 32, 0, 0, None),
        (F, "B", "BLOCK", 1, 0, 1, 8, 11, 0, None), (F, "B", "TENSOR", 0, 0, 0, 0, 0, 0, None)], _got(launches)
    assert all(a.x and a.dy and a.dx and not a.y for _, a in launches)
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(s.startswith("fake_quantize.bwd.") and ".rot.sm_" in s for s in skus[:5]), skus
    assert ".rot." not in skus[5], skus


def test_refusals_name_the_option_before_anything_is_imported(launches, allocs):
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, dy, s = Producer((4, 64), DType.F32), Producer((4, 64), DType.F32), Producer((4,), DType.F32)
    cases = [
        ("seed: the random signs", lambda: dlpack.fake_quantize(x, 0.5, 0, -128, 127, rotation_block=16,
                                                                random_signs=True)),
        ("random_signs", lambda: dlpack.fake_quantize(x, s, None, -128, 127, random_signs=True, seed=1)),
        ("seed and offset", lambda: dlpack.fake_quantize(x, s, None, -128, 127, rotation_block=16, seed=1)),
        ("rotation_block", lambda: dlpack.fake_quantize(x, 0.5, 0, -128, 127, rotation_block="16")),
        ("seed: the random signs", lambda: dlpack.fake_quantize_per_tensor_affine(
            x, 0.5, 0, -128, 127, rotation_block=16, random_signs=True)),
        ("random_signs", lambda: dlpack.fake_quantize_per_channel_affine(x, s, s, 0, -128, 127, random_signs=True,
                                                                         seed=2)),
        ("seed: the random signs", lambda: dlpack.fake_quantize_backward(dy, x, 0.5, 0, -128, 127, rotation_block=8,
                                                                         random_signs=True)),
        ("seed and offset", lambda: dlpack.fake_quantize_backward(dy, x, 0.5, 0, -128, 127, rotation_block=8,
                                                                  seed=3)),
        ("rounding", lambda: dlpack.fake_quantize_backward(dy, x, s, None, -128, 127, rotation_block=8,
                                                           rounding="stochastic", seed=3)),
        ("random_signs", lambda: dlpack.fake_quantize_backward(dy, x, s, None, -128, 127, random_signs=True,
                                                               seed=3)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and dy.streams == [] and s.streams == []  # (no input was imported)
    # the quantize and dequantize backward functions have no rotation options at all
    with pytest.raises(TypeError):
        dlpack.quantize_backward(dy, x, 0.5, rotation_block=8)
    with pytest.raises(TypeError):
        dlpack.dequantize_backward(dy, 0.5, rotation_block=8)


def test_the_block_must_divide_the_last_dimension(launches):
    """per tensor and per channel too (where the library's blocks run along the flat array),
    forward and backward"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, x3 = Producer((8, 24), DType.F32), Producer((4, 6, 40), DType.BF16)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    cases = [
        ("(24)", lambda: dlpack.fake_quantize(x, 0.5, 0, -128, 127, rotation_block=16)),  # (192 elements)
        ("(24)", lambda: dlpack.fake_quantize_per_tensor_affine(x, 0.5, 0, -128, 127, rotation_block=16)),
        ("(40)", lambda: dlpack.fake_quantize(x3, f32(4), None, -128, 127, axis=0, rotation_block=16)),  # (960)
        ("(40)", lambda: dlpack.fake_quantize_per_channel_affine(x3, f32(6), None, 1, 0, 255, rotation_block=32)),
        ("(24)", lambda: dlpack.fake_quantize(x, f32(8), None, -128, 127, rotation_block=16)),
        ("(24)", lambda: dlpack.fake_quantize(x, f32(8, 3), None, -128, 127, group_size=8, rotation_block=16)),
        ("(24)", lambda: dlpack.fake_quantize(x, f32(1, 2), None, -128, 127, block_size=16, rotation_block=32)),
        ("(24)", lambda: dlpack.fake_quantize_backward(x, x, 0.5, 0, -128, 127, rotation_block=16)),
        ("(40)", lambda: dlpack.fake_quantize_backward(x3, x3, f32(6), None, -128, 127, axis=1, rotation_block=16)),
        ("(24)", lambda: dlpack.fake_quantize_backward(x, x, f32(8), None, -128, 127, rotation_block=64)),
    ]
    for dim, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=re.escape("dividing the last dimension " + dim)):
            call()
    for n in (0, 1, 3, 512):
        with pytest.raises(bq.InvalidArgumentError, match=r"rotation_block \(%d\) must be a power of two" % n):
            dlpack.fake_quantize(x, f32(8), None, -128, 127, rotation_block=n)
    assert launches == []
    dlpack.fake_quantize(x, 0.5, 0, -128, 127, rotation_block=8)
    dlpack.fake_quantize(x3, f32(6), None, -128, 127, axis=1, rotation_block=8)
    dlpack.fake_quantize_backward(x, x, f32(8), None, -128, 127, rotation_block=2)
    assert [a.rotation_block for _, a in launches] == [8, 8, 2]
