"""Stochastic rounding's options (rounding, seed, offset) checked before any launch, with no
device: each error names the option; the descriptor and the arguments carry them."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib
from baracuda_quant._enums import DType, Rounding


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
