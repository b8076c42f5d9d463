"""The fused producers through the DLPack front end with no device: inputs through real DLPack
capsules, outputs from a host stand-in for bq_malloc; each launch is recorded, and validated
by the library where it offers the fused ops."""
import pytest

import baracuda_quant as bq
from baracuda_quant import _core, _lib, dlpack
from baracuda_quant._enums import Activation, DType, Granularity, Op
from test_dlpack_ops import HostBuffer, Producer
from test_fused_args import KNOWS_FUSED


@pytest.fixture
def launches(monkeypatch):
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        if KNOWS_FUSED:
            _lib.validate(key, device, args)
        seen.append((key, _lib.Args.from_buffer_copy(args), stream))
    monkeypatch.setattr(_core, "_launch", launch)
    monkeypatch.setattr(dlpack, "DeviceBuffer", HostBuffer)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    before = dlpack.live_exports()
    yield seen
    import gc
    gc.collect()
    assert dlpack.live_exports() == before, "a consumed capsule's deleter did not run"


def test_rms_norm_quant(launches):
    x, w, r = Producer((2, 3, 256), DType.BF16), Producer((256,), DType.BF16), Producer((2, 3, 256), DType.BF16)
    q, s, z = bq.rms_norm_quant(x, w, 1e-6, stream=0x77)
    assert isinstance(q, dlpack.DeviceArray) and q.shape == (2, 3, 256) and q.dtype == DType.S8
    assert s.shape == (6, 1) and s.dtype == DType.F32 and z is None
    key, a, stream = launches[-1]
    assert key[0] == Op.RMSNORM_QUANTIZE and key[2] == Granularity.PER_TOKEN and stream == 0x77
    assert (a.rows, a.cols, a.eps, a.residual) == (6, 256, 1e-6, None) and a.norm_weight == w.arr.ptr
    q, s, z, n = bq.rms_norm_quant(x, w, 1e-5, residual=r, symmetric=False, group_size=64, out_dtype="uint8",
                                   return_normed=True)
    assert s.shape == (6, 4) and z.shape == (6, 4) and z.dtype == DType.S32
    assert n.shape == (2, 3, 256) and n.dtype == DType.BF16
    key, a, _ = launches[-1]
    assert key[2] == Granularity.PER_GROUP and key[8] == 1 and a.residual == r.arr.ptr and a.out == n.ptr
    q, s, z = bq.rms_norm_quant(x, w, 1e-6, scale=0.25, zero_point=4)
    assert (s, z) == (0.25, 4)
    key, a, _ = launches[-1]
    assert key[2] == Granularity.PER_TENSOR and (a.scale, a.zero_point) == (0.25, 4) and a.out_scales is None


def test_gated_quant(launches):
    x = Producer((5, 2 * 384), DType.F16)
    q, s, z, act = bq.silu_and_mul_quant(x, return_act=True)
    assert q.shape == (5, 384) and s.shape == (5, 1) and z is None and act.shape == (5, 384)
    key, a, _ = launches[-1]
    assert key[0] == Op.GATED_QUANTIZE and key[10] == Activation.SILU and (a.cols, a.x_row_stride) == (384, 768)
    bq.gelu_tanh_and_mul_quant(x, group_size=128)
    key, a, _ = launches[-1]
    assert key[10] == Activation.GELU_TANH and key[2] == Granularity.PER_GROUP and a.group_size == 128


def test_checks(launches):
    x, w = Producer((4, 64), DType.BF16), Producer((64,), DType.BF16)
    with pytest.raises(bq.InvalidArgumentError, match="group_size"):
        bq.rms_norm_quant(x, w, 1e-6, scale=0.1, group_size=32)
    with pytest.raises(bq.InvalidArgumentError, match="zero_point"):
        bq.rms_norm_quant(x, w, 1e-6, zero_point=3)
    with pytest.raises(bq.InvalidArgumentError, match="residual"):
        bq.rms_norm_quant(x, w, 1e-6, residual=Producer((4, 32), DType.BF16))
    with pytest.raises(bq.InvalidArgumentError, match="norm_weight"):
        bq.rms_norm_quant(x, Producer((64,), DType.F32), 1e-6)
    with pytest.raises(bq.InvalidArgumentError, match="x shape"):
        bq.silu_and_mul_quant(Producer((4, 63), DType.BF16))
    assert not launches


def test_rms_norm_mx_quant(launches):
    """Microscaling output: codes (E2M1 two a byte), one-byte scales in the layout, NVFP4's
    tensor scale given or computed, the rule and layout in the descriptor"""
    x, w, r = Producer((2, 3, 256), DType.BF16), Producer((256,), DType.BF16), Producer((2, 3, 256), DType.BF16)
    q, s, g = bq.rms_norm_mx_quant(x, w, 1e-6, stream=0x77)
    assert q.shape == (2, 3, 128) and q.dtype == DType.U8 and s.shape == (6, 8) and s.dtype == DType.UE8M0
    assert g is None
    key, a, stream = launches[-1]
    assert key[0] == Op.RMSNORM_QUANTIZE and key[2] == Granularity.PER_GROUP and key[4] == DType.E2M1
    assert key[7] == DType.UE8M0 and (key[12], key[13]) == (0, 0) and stream == 0x77
    assert (a.rows, a.cols, a.group_size, a.y_row_stride, a.eps) == (6, 256, 32, 256, 1e-6)
    assert a.y == q.ptr and a.out_scales == s.ptr and a.tensor_scale is None and a.out_tensor_scale is None
    q, s, g, n = bq.rms_norm_mx_quant(x, w, 1e-5, residual=r, group_size=16, scale_dtype="float8_e4m3fn",
                                      scale_layout="blocked", scale_rule="te", return_normed=True)
    assert s.shape == (128 * 16 // 4 * 4,) and s.dtype == DType.E4M3 and g.shape == (1,) and g.dtype == DType.F32
    assert n.shape == (2, 3, 256) and n.dtype == DType.BF16
    key, a, _ = launches[-1]
    assert key[7] == DType.E4M3 and (key[12], key[13]) == (2, 7) and a.group_row_stride == 0
    assert a.out_tensor_scale == g.ptr and a.tensor_scale is None and a.residual == r.arr.ptr and a.out == n.ptr
    ts = Producer((1,), DType.F32)
    q, s, g = bq.rms_norm_mx_quant(x, w, 1e-6, group_size=16, scale_dtype="float8_e4m3fn", tensor_scale=ts,
                                   scale_layout="mn")
    assert g is None and s.shape == (6, 16) and s.strides == (1, 8)
    key, a, _ = launches[-1]
    assert key[12] == 1 and a.tensor_scale == ts.arr.ptr and a.out_tensor_scale is None and a.group_row_stride == 8


def test_gated_mx_quant(launches):
    x = Producer((5, 2 * 384), DType.F16)
    q, s, g, act = bq.silu_and_mul_mx_quant(x, dtype="float8_e4m3fn", scale_rule="floor", return_act=True)
    assert q.shape == (5, 384) and q.dtype == DType.E4M3 and s.shape == (5, 12) and g is None
    assert act.shape == (5, 384) and act.dtype == DType.F16
    key, a, _ = launches[-1]
    assert key[0] == Op.GATED_QUANTIZE and key[10] == Activation.SILU and key[4] == DType.E4M3 and key[13] == 1
    assert (a.cols, a.x_row_stride, a.y_row_stride) == (384, 768, 384)
    bq.gelu_tanh_and_mul_mx_quant(x, dtype="float8_e5m2", group_size=64, scale_rule="rceil")
    key, a, _ = launches[-1]
    assert key[10] == Activation.GELU_TANH and key[4] == DType.E5M2 and key[13] == 4 and a.group_size == 64


def test_mx_checks(launches):
    x, w = Producer((4, 64), DType.BF16), Producer((64,), DType.BF16)
    with pytest.raises(bq.InvalidArgumentError, match="group_size"):
        bq.rms_norm_mx_quant(x, w, 1e-6, group_size=48)
    with pytest.raises(bq.InvalidArgumentError, match="scale_layout"):
        bq.rms_norm_mx_quant(x, w, 1e-6, scale_layout="tiles")
    with pytest.raises(bq.InvalidArgumentError, match="scale_rule"):
        bq.rms_norm_mx_quant(x, w, 1e-6, scale_rule="nearest")
    with pytest.raises(bq.InvalidArgumentError, match="two codes a byte"):
        bq.silu_and_mul_mx_quant(Producer((4, 2 * 33), DType.BF16), group_size=3)
    with pytest.raises(bq.InvalidArgumentError, match="x shape"):
        bq.silu_and_mul_mx_quant(Producer((4, 63), DType.BF16))
    with pytest.raises(bq.InvalidArgumentError, match="residual"):
        bq.rms_norm_mx_quant(x, w, 1e-6, residual=Producer((4, 32), DType.BF16))
    assert not launches
    if KNOWS_FUSED:  # the library's own rules: a UE8M0 rule with NVFP4 scales
        with pytest.raises(bq.InvalidArgumentError, match="names a UE8M0 rule"):
            bq.rms_norm_mx_quant(x, w, 1e-6, group_size=16, scale_dtype="float8_e4m3fn", scale_rule="floor")


def test_hadamard(launches):
    """The rotation: blocks, direction, the seed and the signs in the descriptor"""
    x = Producer((3, 5, 256), DType.BF16)
    y = bq.hadamard(x, 64)
    assert y.shape == (3, 5, 256) and y.dtype == DType.BF16
    key, a, _ = launches[-1]
    assert key[0] == Op.HADAMARD and key[1] == 0 and key[14] == 0 and (a.rows, a.cols, a.group_size) == (15, 256, 64)
    assert a.seed == 0 and a.x == x.arr.ptr and a.y == y.ptr
    bq.hadamard(x, 256, inverse=True, seed=2**64 - 1)
    key, a, _ = launches[-1]
    assert key[1] == 1 and key[14] == 1 and a.seed == 2**64 - 1 and a.group_size == 256
    for bad in (1, 3, 512, 48):
        with pytest.raises(bq.InvalidArgumentError, match="block_size"):
            bq.hadamard(x, bad)
    with pytest.raises(bq.InvalidArgumentError, match="seed"):
        bq.hadamard(x, 64, seed=-1)
