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
    assert d.rounding == 1 and key[-1] == 1
    assert ".sr.sm_" in _lib.sku(d)
    a = _lib.Args(seed=(1 << 64) - 1, offset=12)
    assert (a.seed, a.offset) == ((1 << 64) - 1, 12)
