"""Stochastic rounding's options (rounding, seed, offset) checked before any launch, with no
device: each error names the option; the descriptor and the arguments carry them."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import DType, Rounding
from conftest import count_buffers


def test_rounding_options_are_checked():
    assert _core.sr_fields("nearest", None, 0) == (0, 0, 0)
    assert _core.sr_fields("stochastic", 5, 3) == (1, 5, 3)
    assert _core.sr_fields("stochastic", -1, -2) == (1, (1 << 64) - 1, (1 << 64) - 2)  # modulo 2^64
    with pytest.raises(bq.InvalidArgumentError, match="rounding"):
        _core.sr_fields("up", None, 0)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        _core.sr_fields("stochastic", None, 0)
    with pytest.raises(bq.InvalidArgumentError, match="seed and offset"):
        _core.sr_fields("nearest", 3, 0)
    with pytest.raises(bq.InvalidArgumentError, match="offset"):
        _core.sr_fields("stochastic", 1, 0.5)


def test_rounding_reaches_the_descriptor_and_the_sku():
    key = _lib.desc_key(bq.Op.QUANTIZE, granularity=bq.Granularity.PER_GROUP, float_type=DType.BF16,
                        int_type=DType.E2M1, rounding=Rounding.STOCHASTIC)
    d = _lib.make_desc(key, 0)
    assert d.rounding == 1 and key[-2] == 1
    assert ".sr.sm_" in _lib.sku(d)
    a = _lib.Args(seed=(1 << 64) - 1, offset=12)
    assert (a.seed, a.offset) == ((1 << 64) - 1, 12)


@pytest.fixture
def launches(monkeypatch):
    from baracuda_quant import dlpack
    from dlpack_fakes import HostBuffer
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)  # (the library's own checks, where it is loaded)
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    monkeypatch.setattr(dlpack, "DeviceBuffer", HostBuffer)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    yield seen


def test_dlpack_mx_ops_carry_the_rounding(launches):
    """The DLPack front end's mx_quant (static and dynamic) and mx_fake_quant hand the
    descriptor's rounding and the seed and offset to the library; round to nearest none"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x = Producer((4, 64), DType.BF16)
    dlpack.mx_quant(x, rounding="stochastic", seed=-1, offset=9)
    dlpack.mx_quant(x, scales=Producer((4, 2), DType.UE8M0), rounding="stochastic", seed=3)
    dlpack.mx_fake_quant(x, Producer((4, 2), DType.UE8M0), rounding="stochastic", seed=5, offset=1 << 64)
    dlpack.mx_quant(x)
    got = [(key[-2], a.seed, a.offset) for key, a in launches]
    assert got == [(1, (1 << 64) - 1, 9), (1, 3, 0), (1, 5, 0), (0, 0, 0)]
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        dlpack.mx_quant(x, rounding="stochastic")
    assert len(launches) == 4


def test_dlpack_mx_ops_carry_the_rotation(launches):
    """mx_quant and mx_dequant with rotation_block hand desc.rotation, random_signs and the
    block (and the signs' seed) to the library; random_signs alone is refused by name"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x = Producer((4, 64), DType.BF16)
    dlpack.mx_quant(x, rotation_block=32)
    dlpack.mx_quant(x, rotation_block=16, random_signs=True, seed=11, rounding="stochastic", offset=2)
    dlpack.mx_dequant(Producer((4, 32), DType.U8), Producer((4, 2), DType.UE8M0), rotation_block=64,
                      random_signs=True, seed=5, out_dtype="bfloat16")
    got = [(key[-1], key[-3], key[-2], a.rotation_block, a.seed, a.offset) for key, a in launches]
    assert got == [(1, 0, 0, 32, 0, 0), (1, 1, 1, 16, 11, 2), (1, 1, 0, 64, 5, 0)]
    with pytest.raises(bq.InvalidArgumentError, match="random_signs"):
        dlpack.mx_quant(x, random_signs=True, seed=1)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        dlpack.mx_quant(x, rotation_block=16, random_signs=True)
    assert len(launches) == 3


# ---- the affine ops (quantize and fake quantize, static scales) -------------------------------
def test_affine_rounding_options_are_checked():
    """_core.affine_sr: sr_fields, and dequantize and the backward passes refuse "stochastic"
    by name (before the seed is looked at)"""
    from baracuda_quant._enums import Direction, Op
    fwd, bwd = Direction.FORWARD, Direction.BACKWARD
    assert _core.affine_sr(Op.QUANTIZE, fwd, "stochastic", -1, 3) == (1, (1 << 64) - 1, 3)
    assert _core.affine_sr(Op.FAKE_QUANTIZE, fwd, "stochastic", 2, 1 << 64) == (1, 2, 0)
    assert _core.affine_sr(Op.DEQUANTIZE, fwd, "nearest", None, 0) == (0, 0, 0)
    for op, d in ((Op.DEQUANTIZE, fwd), (Op.QUANTIZE, bwd), (Op.DEQUANTIZE, bwd), (Op.FAKE_QUANTIZE, bwd)):
        with pytest.raises(bq.InvalidArgumentError, match="rounding .*stochastic.*rounds nothing"):
            _core.affine_sr(op, d, "stochastic", 1, 0)
    with pytest.raises(bq.InvalidArgumentError, match="rounding"):
        _core.affine_sr(Op.DEQUANTIZE, fwd, "down", None, 0)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        _core.affine_sr(Op.QUANTIZE, fwd, "stochastic", None, 0)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        _core.affine_sr(Op.QUANTIZE, fwd, "stochastic", "7", 0)
    with pytest.raises(bq.InvalidArgumentError, match="offset"):
        _core.affine_sr(Op.QUANTIZE, fwd, "stochastic", 7, 0.5)


@pytest.fixture
def allocs(monkeypatch):
    """dlpack's output buffers, counted (host memory in place of bq_malloc's)"""
    return count_buffers(monkeypatch)


def test_dlpack_affine_ops_carry_the_rounding(launches, allocs):
    """quantize at every granularity, fake quantize (generic, per tensor, per channel) hand
    desc.rounding (a ".sr" SKU), the seed and the offset modulo 2^64 to the library (its own
    checks pass them); round to nearest neither"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x = Producer((4, 64), DType.BF16)
    f32 = lambda *shape: Producer(shape, DType.F32)  # noqa: E731
    sr = dict(rounding="stochastic")
    dlpack.quantize_per_tensor(x, 0.5, 3, "uint8", **sr, seed=-1, offset=9)
    dlpack.quantize_per_channel(x, f32(64), Producer((64,), DType.S32), 1, **sr, seed=3, offset=1 << 64)
    dlpack.quantize_per_token(x, f32(4), **sr, seed=4, offset=-1)
    dlpack.quantize_per_group(x, f32(4, 2), None, 32, "float8_e4m3fn", **sr, seed=5)
    dlpack.quantize_per_block(x, f32(1, 4), None, 16, "float8_e5m2", **sr, seed=6)
    dlpack.fake_quantize(x, 0.5, 1, -100, 100, **sr, seed=7, offset=2)
    dlpack.fake_quantize(x, f32(4, 2), group_size=32, dtype="int8", **sr, seed=8)
    dlpack.fake_quantize(x, f32(4), dtype="float8_e4m3fn", **sr, seed=9)
    dlpack.fake_quantize_per_tensor_affine(x, 0.25, 0, -128, 127, **sr, seed=10, offset=5)
    dlpack.fake_quantize_per_channel_affine(x, f32(64), Producer((64,), DType.S32), 1, 0, 255, **sr, seed=11)
    dlpack.quantize_per_tensor(x, 0.5)
    dlpack.fake_quantize(x, f32(4), dtype="int8")
    got = [(key[-2], a.seed, a.offset) for key, a in launches]
    m = 1 << 64
    assert got == [(1, m - 1, 9), (1, 3, 0), (1, 4, m - 1), (1, 5, 0), (1, 6, 0), (1, 7, 2), (1, 8, 0), (1, 9, 0),
                   (1, 10, 5), (1, 11, 0), (0, 0, 0), (0, 0, 0)]
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(".sr.sm_" in s for s in skus[:10]) and not any(".sr." in s for s in skus[10:]), skus
    assert all(not a.mask for _, a in launches)  # (fake quantize per tensor and per channel: no mask)


def test_dlpack_affine_refusals_name_the_option(launches, allocs):
    """bad options, and stochastic rounding where nothing is rounded into storage, raise
    naming the option before anything is imported, allocated or launched"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, q = Producer((4, 64), DType.F32), Producer((4, 64), DType.S8)
    st = dict(rounding="stochastic")  # (the refusing ops take rounding alone: no seed, no offset)
    cases = [
        ("seed", lambda: dlpack.quantize_per_tensor(x, 0.5, rounding="stochastic")),
        ("rounding", lambda: dlpack.quantize_per_tensor(x, 0.5, rounding="up", seed=1)),
        ("seed and offset", lambda: dlpack.quantize_per_token(x, Producer((4,), DType.F32), seed=1)),
        ("seed and offset", lambda: dlpack.quantize_per_group(x, Producer((4, 2), DType.F32), None, 32, offset=3)),
        ("offset", lambda: dlpack.quantize_per_block(x, Producer((1, 4), DType.F32), None, 16,
                                                     rounding="stochastic", seed=1, offset=0.5)),
        ("seed", lambda: dlpack.fake_quantize(x, 0.5, 0, -128, 127, rounding="stochastic", seed=[1])),
        ("seed", lambda: dlpack.fake_quantize_per_tensor_affine(x, 0.5, 0, -128, 127, rounding="stochastic")),
        ("seed", lambda: dlpack.fake_quantize_per_channel_affine(x, Producer((64,), DType.F32),
                                                                 Producer((64,), DType.S32), 1, -128, 127,
                                                                 rounding="stochastic")),
        ("rounding", lambda: dlpack.dequantize(q, 0.5, rounding="stochastic")),
        ("rounding", lambda: dlpack.dequantize(q, Producer((4,), DType.F32), rounding="stochastic")),
        ("rounding", lambda: dlpack.fake_quantize_backward(x, x, 0.5, 0, -128, 127, **st)),
        ("rounding", lambda: dlpack.quantize_backward(x, x, 0.5, **st)),
        ("rounding", lambda: dlpack.dequantize_backward(x, 0.5, **st)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and q.streams == []  # (no input was imported)


def test_affine_mask_is_refused_with_stochastic_rounding():
    """fake quantize per tensor with a saved mask rounds to nearest only (args.mask NULL)"""
    from baracuda_quant._enums import Direction, Granularity, Op
    v = _core.View(0x100000, (64,), (1,), DType.F32, 0)
    m = _core.View(0x200000, (2,), (1,), DType.S32, 0)
    with pytest.raises(bq.InvalidArgumentError, match="mask"):
        _core.affine(Op.FAKE_QUANTIZE, Direction.FORWARD, Granularity.PER_TENSOR, fl=v, x=v, y=v, int_type=DType.S8,
                     qmin=None, qmax=None, scale=0.5, mask=m, rounding="stochastic", seed=1)


# ---- dynamic quantize (integer and FP8, every granularity) -------------------------------------
def test_dynamic_rounding_options_are_checked():
    """_core.dynamic takes rounding, seed and offset through sr_fields: refused by name
    before any launch"""
    x = _core.View(0x100000, (4, 64), (64, 1), DType.F32, 0)
    y = _core.View(0x200000, (4, 64), (64, 1), DType.S8, 0)
    s = _core.View(0x300000, (4, 1), (1, 1), DType.F32, 0)
    for word, kw in (("rounding", dict(rounding="bogus", seed=1)), ("seed", dict(rounding="stochastic")),
                     ("seed and offset", dict(seed=2)), ("seed and offset", dict(offset=2)),
                     ("offset", dict(rounding="stochastic", seed=1, offset=0.5))):
        with pytest.raises(bq.InvalidArgumentError, match=word):
            _core.dynamic(bq.Granularity.PER_TOKEN, x=x, y=y, out_scales=s, **kw)


def test_dlpack_dynamic_ops_carry_the_rounding(launches, allocs):
    """dynamic_quant at every granularity (int8 symmetric and asymmetric, uint8, FP8) and
    dynamic_per_token_quant hand desc.rounding (a ".sr" SKU), the seed and the offset modulo
    2^64 to the library (its own checks pass them); round to nearest neither"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x = Producer((4, 64), DType.BF16)
    sr = dict(rounding="stochastic")
    dlpack.dynamic_quant(x, "tensor", **sr, seed=-1, offset=9)
    dlpack.dynamic_quant(x, "token", symmetric=False, **sr, seed=2, offset=1 << 64)
    dlpack.dynamic_quant(x, "group", group_size=32, dtype="float8_e4m3fn", **sr, seed=3, offset=-1)
    dlpack.dynamic_quant(x, "group", group_size=16, dtype="uint8", symmetric=False, scale_layout="mn", **sr, seed=4)
    dlpack.dynamic_quant(x, "block", block_size=16, dtype="float8_e5m2", scale_dtype="float8_e8m0fnu", **sr, seed=5)
    dlpack.dynamic_quant(x, "block", block_size=16, symmetric=False, pow2_scales=True, **sr, seed=6, offset=7)
    dlpack.dynamic_per_token_quant(x, **sr, seed=8, offset=10)
    dlpack.dynamic_per_token_quant(x, symmetric=False, **sr, seed=9)
    dlpack.dynamic_quant(x, "group", group_size=32)
    dlpack.dynamic_per_token_quant(x)
    got = [(key[-2], a.seed, a.offset) for key, a in launches]
    m = 1 << 64
    assert got == [(1, m - 1, 9), (1, 2, 0), (1, 3, m - 1), (1, 4, 0), (1, 5, 0), (1, 6, 7), (1, 8, 10), (1, 9, 0),
                   (0, 0, 0), (0, 0, 0)]
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(s.startswith("dynamic_quantize.") for s in skus), skus
    assert all(".sr.sm_" in s for s in skus[:8]) and not any(".sr." in s for s in skus[8:]), skus


def test_dlpack_dynamic_refusals_name_the_option(launches, allocs):
    """rounding="bogus", stochastic rounding without a seed, a seed or an offset with rounding
    to nearest raise naming the option before anything is imported, allocated or launched
    (dynamic_per_token_quant with a static scale too: the scale is not read)"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, one = Producer((4, 64), DType.F32), Producer((1,), DType.F32)
    cases = [
        ("rounding", lambda: dlpack.dynamic_quant(x, rounding="bogus", seed=1)),
        ("rounding", lambda: dlpack.dynamic_per_token_quant(x, rounding="bogus")),
        ("seed", lambda: dlpack.dynamic_quant(x, "group", group_size=32, rounding="stochastic")),
        ("seed", lambda: dlpack.dynamic_per_token_quant(x, rounding="stochastic")),
        ("seed", lambda: dlpack.dynamic_per_token_quant(x, scale=one, rounding="stochastic")),
        ("seed and offset", lambda: dlpack.dynamic_quant(x, "block", block_size=16, seed=1)),
        ("seed and offset", lambda: dlpack.dynamic_quant(x, "tensor", rounding="nearest", offset=3)),
        ("seed and offset", lambda: dlpack.dynamic_per_token_quant(x, seed=1)),
        ("seed and offset", lambda: dlpack.dynamic_per_token_quant(x, scale=one, seed=1)),
        ("offset", lambda: dlpack.dynamic_quant(x, rounding="stochastic", seed=1, offset=[2])),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == [] and allocs == []
    assert x.streams == [] and one.streams == []  # (no input was imported)


def test_dlpack_dynamic_ops_carry_the_rotation(launches, allocs):
    """dynamic_quant per token and dynamic_per_token_quant with rotation_block hand
    desc.rotation (a ".rot" SKU), random_signs and the seed (the signs' key) and the block to
    the library; without a seed the signs are refused, as are random_signs without a block
    and a block with a static scale, before anything is imported or launched"""
    from baracuda_quant import dlpack
    from dlpack_fakes import Producer
    x, one = Producer((4, 64), DType.BF16), Producer((1,), DType.F32)
    dlpack.dynamic_quant(x, "token", rotation_block=32)
    dlpack.dynamic_quant(x, "token", dtype="float8_e4m3fn", rotation_block=64, random_signs=True, seed=-3)
    dlpack.dynamic_per_token_quant(x, symmetric=False, rotation_block=16, random_signs=True, seed=7)
    got = [(key[-1], key[-3], a.rotation_block, a.seed) for key, a in launches]
    assert got == [(1, 0, 32, 0), (1, 1, 64, (1 << 64) - 3), (1, 1, 16, 7)], got
    skus = [_lib.sku(_lib.make_desc(key, 0)) for key, _ in launches]
    assert all(s.startswith("dynamic_quantize.") and ".rot.sm_" in s for s in skus), skus
    del launches[:]
    cases = [
        ("seed", lambda: dlpack.dynamic_quant(x, "token", rotation_block=32, random_signs=True)),
        ("rotation_block", lambda: dlpack.dynamic_per_token_quant(x, random_signs=True, seed=1)),
        ("rotation_block", lambda: dlpack.dynamic_per_token_quant(x, scale=one, rotation_block=32)),
    ]
    for word, call in cases:
        with pytest.raises(bq.InvalidArgumentError, match=word):
            call()
    assert launches == []
