"""The torch front end without a GPU: fake kernels' shapes and dtypes (meta tensors) and the
wrappers' checks (which raise before anything reaches the library)."""
import pytest

from conftest import HAS_TORCH

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"


def test_fake_quantize_shapes():
    x = torch.empty(3, 5, 8, dtype=torch.bfloat16, device=M)
    d = torch.ops.baracuda_quant
    for y in (d.quantize_per_tensor(x, 0.1, 2, torch.uint8, 0, 255),
              d.quantize_per_channel(x, torch.empty(5, device=M), None, 1, torch.uint8, 0, 255),
              d.quantize_per_token(x, torch.empty(15, device=M), None, torch.uint8, 0, 255),
              d.quantize_per_group(x, torch.empty(15, 2, device=M), None, 4, torch.uint8, 0, 255)):
        assert y.shape == x.shape and y.dtype == torch.uint8 and y.device.type == M
    q = torch.empty(3, 5, 8, dtype=torch.int8, device=M)
    for y in (d.dequantize_per_tensor(q, 0.1, 0, torch.float16),
              d.dequantize_per_channel(q, torch.empty(8, device=M), None, -1, torch.float16),
              d.dequantize_per_token(q, torch.empty(15, device=M), None, torch.float16),
              d.dequantize_per_group(q, torch.empty(15, 4, device=M), None, 2, torch.float16)):
        assert y.shape == q.shape and y.dtype == torch.float16
    y = d.fake_quantize_per_tensor(x, 0.1, 0, -128, 127)
    assert y.shape == x.shape and y.dtype == x.dtype
    y = d.fake_quantize_per_channel_backward(x, x, torch.empty(5, device=M), torch.empty(5, dtype=torch.int32,
                                             device=M), 1, -128, 127)
    assert y.shape == x.shape and y.dtype == x.dtype


def test_fake_quantize_mask_shapes():
    """the ops that save the STE mask: (y, int32 words, a bit an element) and the backward pass"""
    d = torch.ops.baracuda_quant
    for shape, words in (((3, 5, 8), 4), ((33,), 2), ((0, 4), 0), ((64,), 2)):
        x = torch.empty(shape, dtype=torch.float16, device=M)
        y, m = d.fake_quantize_per_tensor_mask(x, 0.1, 0, -128, 127)
        assert y.shape == x.shape and y.dtype == x.dtype
        assert m.shape == (words,) and m.dtype == torch.int32
        y, m = d.fake_quantize_per_channel_mask(x, torch.empty(shape[0], device=M),
                                                torch.empty(shape[0], dtype=torch.int32, device=M), 0, -128, 127)
        assert y.shape == x.shape and m.shape == (words,) and m.dtype == torch.int32
        dx = d.fake_quantize_per_tensor_mask_backward(x, m, 0.1, 0, -128, 127)
        assert dx.shape == x.shape and dx.dtype == x.dtype
        dx = d.fake_quantize_per_channel_mask_backward(x, m, torch.empty(shape[0], device=M),
                                                       torch.empty(shape[0], dtype=torch.int32, device=M), 0,
                                                       -128, 127)
        assert dx.shape == x.shape and dx.dtype == x.dtype


def test_fake_dynamic_and_linear_shapes():
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 7, 64, dtype=torch.float16, device=M)
    q, s, z = d.dynamic_per_token_quant(x, True, torch.int8, -128, 127)
    assert (q.shape, q.dtype, s.shape, s.dtype, z.shape) == (x.shape, torch.int8, (14, 1), torch.float32, (0,))
    q, s, z = d.dynamic_per_token_quant(x, False, torch.int8, -128, 127)
    assert (z.shape, z.dtype) == ((14, 1), torch.int32)
    w = torch.empty(32, 64, dtype=torch.int8, device=M)
    y = d.int8_linear(q, w, s, torch.empty(32, device=M), None, torch.bfloat16)
    assert y.shape == (2, 7, 32) and y.dtype == torch.bfloat16
    y = d.quantized_linear(x, w, torch.empty(32, device=M), None)
    assert y.shape == (2, 7, 32) and y.dtype == torch.float16


def test_wrappers_check_before_the_library():
    before = _lib.cached_plan_keys()
    x = torch.randn(4, 8)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.quantize_per_tensor(x, 0.1)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.quantize_per_tensor(x, 0.1)  # the top-level function dispatches tensors to ops
    xm = torch.empty(4, 8, device=M)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.fake_quantize_per_tensor_affine(xm, 0.1, 0, -128, 127)
    with pytest.raises(bq.InvalidArgumentError, match="torch.uint8, torch.float8_e4m3fn or torch.float8_e5m2"):
        ops._check_int("dtype", torch.int16)
    # the device is checked first: the dtype message needs a CUDA tensor
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops._check_float("x", torch.empty(3, dtype=torch.int32, device=M))
    if torch.cuda.is_available():
        with pytest.raises(bq.InvalidArgumentError, match="float32"):
            ops._check_float("x", torch.empty(3, dtype=torch.int32, device="cuda"))
    # the ops themselves refuse host tensors in their implementation
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        torch.ops.baracuda_quant.quantize_per_tensor(x, 0.1, 0, torch.int8, -128, 127)
    assert _lib.cached_plan_keys() == before


def test_rows_keeps_row_strides():
    base = torch.empty(6, 16)
    v = ops._rows(base[:, :8], "x")
    assert v.shape == (6, 8) and v.stride() == (16, 1) and v.data_ptr() == base.data_ptr()
    v = ops._rows(base.view(2, 3, 16)[:, :, :8], "x")
    assert v.shape == (6, 8) and v.stride() == (16, 1)
    t = base.t()  # column-major: copied
    v = ops._rows(t, "x")
    assert v.is_contiguous() and v.shape == (16, 6)


def test_registration():
    """The quantize ops (their outputs are codes) are defined on the dispatcher directly,
    tagged pt2-compliant as custom_op tags its ops; an op with a float output and no
    gradient formula keeps custom_op's autograd kernel, so a backward through it raises
    rather than passing no gradient."""
    d = torch.ops.baracuda_quant
    for name in ("quantize_per_tensor", "quantize_per_channel", "quantize_per_token", "quantize_per_group",
                 "quantize_per_block"):
        assert isinstance(getattr(ops, "_" + name), ops._DefinedOp), name
        assert torch.Tag.pt2_compliant_tag in getattr(d, name).default.tags, name
    assert not isinstance(ops._dequantize_per_token, ops._DefinedOp)
    q = torch.empty(3, 8, dtype=torch.int8, device=M)
    s = torch.ones(3, device=M, requires_grad=True)
    y = d.dequantize_per_token(q, s, None, torch.float32)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="autograd"):
        y.sum().backward()
