"""The DLPack front end's operations with no device: inputs come through real DLPack
capsules (of CUDA-typed arrays at made-up addresses), outputs from a host stand-in for
bq_malloc, and every launch is replaced by the library's own argument validation."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import DType

from dlpack_fakes import HostBuffer, Producer


@pytest.fixture
def launches(monkeypatch):
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append((key, stream))
    monkeypatch.setattr(_core, "_launch", launch)
    monkeypatch.setattr(dlpack, "DeviceBuffer", HostBuffer)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    before = dlpack.live_exports()
    yield seen
    import gc
    gc.collect()
    assert dlpack.live_exports() == before, "a consumed capsule's deleter did not run"


def test_quantize_family(launches):
    x = Producer((6, 10, 32), DType.BF16)
    q = bq.quantize_per_tensor(x, 0.1, 3, "uint8", 0, 200, stream=0x55)
    assert isinstance(q, dlpack.DeviceArray) and q.shape == (6, 10, 32) and q.dtype == DType.U8
    assert x.streams == [0x55]  # the consumer's stream, handed to the producer
    bq.quantize_per_channel(x, Producer((10,), DType.F32), Producer((10,), DType.S32), 1)
    bq.quantize_per_token(x, Producer((60, 1), DType.F32))
    bq.quantize_per_group(x, Producer((60, 4), DType.F32), None, 8)
    qs = Producer((6, 10, 32), DType.S8)
    y = bq.dequantize(qs, 0.1, 2, out_dtype="float16")
    assert y.dtype == DType.F16
    bq.dequantize(qs, Producer((10,), DType.F32), axis=1)
    bq.dequantize(qs, Producer((60,), DType.F32), Producer((60,), DType.S32))
    bq.dequantize(qs, Producer((60, 4), DType.F32), group_size=8, out_dtype="bfloat16")
    f = bq.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
    assert f.dtype == DType.BF16 and f.shape == x.arr.shape
    bq.fake_quantize_per_channel_affine(x, Producer((10,), DType.F32), Producer((10,), DType.S32), 1, 0, 255)
    assert len(launches) == 10
    assert launches[0][1] == 0x55 and all(s is None for _, s in launches[1:])


def test_row_strides_and_dynamic(launches):
    x = Producer((20, 128), DType.F16, strides=(160, 1))
    q, s, z = bq.dynamic_per_token_quant(x)
    assert q.shape == (20, 128) and s.shape == (20, 1) and s.dtype == DType.F32 and z is None
    q, s, z = bq.dynamic_per_token_quant(x, symmetric=False)
    assert z.shape == (20, 1) and z.dtype == DType.S32
    assert len(launches) == 2


def test_linear(launches):
    a, w = Producer((20, 256), DType.S8), Producer((48, 256), DType.S8)
    y = bq.int8_linear(a, w, Producer((20,), DType.F32), Producer((48,), DType.F32), Producer((48,), DType.F16))
    assert y.shape == (20, 48) and y.dtype == DType.F16
    y = bq.quantized_linear(Producer((20, 256), DType.BF16), w, Producer((48,), DType.F32))
    assert y.dtype == DType.BF16
    with pytest.raises(bq.NotSupportedError):
        bq.int8_linear(a, w, Producer((1,), DType.F32), Producer((48,), DType.F32))
    assert len(launches) == 2


def test_bad_inputs_release_their_capsules(launches):
    x = Producer((4, 8), DType.S8)  # not a float input
    with pytest.raises(bq.InvalidArgumentError, match="not a float type"):
        bq.quantize_per_tensor(x, 0.1)
    with pytest.raises(bq.InvalidArgumentError, match="dtype"):
        bq.quantize_per_tensor(Producer((4, 8), DType.F32), 0.1, dtype="int16")
    assert launches == []
