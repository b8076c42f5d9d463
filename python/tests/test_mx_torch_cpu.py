"""The microscaling torch ops without a GPU: the fake kernels' shapes, dtypes and strides
(meta tensors and FakeTensorMode, what torch.compile traces with), fake quantize's autograd
(its backward op, through meta tensors), and the wrappers' checks, which raise before
anything reaches the library. test_gpu_formats runs them on a GPU."""
import pytest

from conftest import HAS_TORCH

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

from baracuda_quant._enums import DType

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"
E2M1, E4M3, E5M2 = int(DType.E2M1), int(DType.E4M3), int(DType.E5M2)


def _fp4():
    return getattr(torch, "float4_e2m1fn_x2", torch.uint8)


def test_fake_mx_dynamic_quant_shapes():
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 150, 256, dtype=torch.bfloat16, device=M)
    q, s, g = d.mx_dynamic_quant(x, None, 32, E2M1, False, 0, 0, 0.0)
    assert (q.shape, q.dtype, s.shape, s.stride(), g.shape) == ((2, 150, 128), _fp4(), (300, 8), (8, 1), (0,))
    assert s.dtype == getattr(torch, "float8_e8m0fnu", torch.uint8)
    q, s, g = d.mx_dynamic_quant(x, None, 16, E2M1, True, 1, 7, 0.0)  # NVFP4, MN-major, TE's rule, g computed
    assert (s.shape, s.stride(), s.dtype, g.shape, g.dtype) == ((300, 16), (1, 300), torch.float8_e4m3fn, (1,),
                                                                torch.float32)
    t = torch.empty(1, dtype=torch.float32, device=M)
    q, s, g = d.mx_dynamic_quant(x, t, 16, E2M1, True, 2, 0, 0.0)  # blocked, g given
    assert s.shape == (384 * 4 * 4,) and g.shape == (0,)
    q, s, g = d.mx_dynamic_quant(x, None, 32, E4M3, False, 0, 1, 3.0)
    assert (q.shape, q.dtype) == (x.shape, torch.float8_e4m3fn)
    q, s, g = d.mx_dynamic_quant(x.view(-1, 256), None, 32, E5M2, False, 0, 4, 0.0)
    assert (q.shape, q.dtype, s.shape) == ((300, 256), torch.float8_e5m2, (300, 8))


def test_fake_mx_static_dequant_and_floats():
    d = torch.ops.baracuda_quant
    x = torch.empty(7, 64, dtype=torch.float16, device=M)
    s = torch.empty(7, 2, dtype=getattr(torch, "float8_e8m0fnu", torch.uint8), device=M)
    q = d.mx_quant(x, s, None, 32, E2M1, 0)
    assert (q.shape, q.dtype) == ((7, 32), _fp4())
    y = d.mx_dequant(q, s, None, 32, E2M1, 0, torch.bfloat16)
    assert (y.shape, y.dtype) == ((7, 64), torch.bfloat16)
    y = d.mx_dequant(torch.empty(7, 64, dtype=torch.float8_e5m2, device=M), s, None, 32, E5M2, 0, torch.float32)
    assert y.shape == (7, 64)
    for op in (d.mx_fake_quant_backward, d.mx_quant_backward):
        assert op(x, x, s, None, 32, E2M1, 0).shape == x.shape
    assert d.mx_dequant_backward(x, s, None, 32, E2M1, 0).dtype == torch.float16
    assert d.mx_fake_quant(x, s, None, 32, E4M3, 0).shape == x.shape


def test_fake_quant_autograd_takes_the_backward_op():
    """The gradient of mx_fake_quant is mx_fake_quant_backward's (the STE), for x alone"""
    d = torch.ops.baracuda_quant
    x = torch.empty(4, 64, dtype=torch.float32, device=M, requires_grad=True)
    s = torch.empty(4, 4, dtype=torch.float8_e4m3fn, device=M)
    t = torch.empty(1, dtype=torch.float32, device=M)
    y = d.mx_fake_quant(x, s, t, 16, E2M1, 2)
    assert y.requires_grad and y.grad_fn is not None
    seen = []
    real = ops._mx_fq_bwd

    def spy(*args):
        seen.append(args[3] is not None)
        return real(*args)
    ops._mx_fq_bwd = spy
    try:
        y.sum().backward()
    finally:
        ops._mx_fq_bwd = real
    assert x.grad is not None and x.grad.shape == x.shape and seen == [True]


def test_fused_mx_fakes():
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 3, 512, dtype=torch.bfloat16, device=M)
    w = torch.empty(512, dtype=torch.bfloat16, device=M)
    q, s, g, n = d.rms_norm_mx_quant(x, w, torch.empty_like(x), 1e-6, 16, E2M1, True, None, 2, 6, True)
    assert (q.shape, q.dtype, s.shape, g.shape, n.shape) == ((2, 3, 256), _fp4(), (128 * 32,), (1,), x.shape)
    q, s, g, a = d.gated_mx_quant(torch.empty(5, 1024, dtype=torch.float16, device=M), 2, 32, E4M3, False, None, 1,
                                  1, False)
    assert (q.shape, q.dtype, s.shape, s.stride(), g.shape, a.shape) == ((5, 512), torch.float8_e4m3fn, (5, 16),
                                                                         (1, 8), (0,), (0,))


def test_mx_ops_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(8, 4096, dtype=torch.bfloat16)
        q, s, g = torch.ops.baracuda_quant.mx_dynamic_quant(x, None, 16, E2M1, True, 2, 0, 0.0)
        assert q.shape == (8, 2048) and s.shape == (128 * 256,) and g.shape == (1,)
        w = torch.empty(4096, dtype=torch.bfloat16)
        q, s, g, n = torch.ops.baracuda_quant.rms_norm_mx_quant(x, w, None, 1e-6, 32, E4M3, False, None, 0, 0, False)
        assert q.shape == x.shape and s.shape == (8, 128)


def test_wrappers_check_before_the_library():
    before = _lib.cached_plan_keys()
    x = torch.randn(4, 64)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.mx_quant(x)  # the top-level function sends tensors to ops
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.rms_norm_mx_quant(x, torch.ones(64), 1e-6)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        torch.ops.baracuda_quant.mx_dynamic_quant(x, None, 32, E2M1, False, 0, 0, 0.0)
    assert _lib.cached_plan_keys() == before


def test_wrapper_arguments():
    f = ops._mx_elem
    assert f("e2m1") == E2M1 and f(_fp4()) == (E2M1 if _fp4() is not torch.uint8 else f("e2m1"))
    assert f(torch.float8_e4m3fn) == E4M3 and f("float8_e5m2") == E5M2
    with pytest.raises(bq.InvalidArgumentError, match="microscaling elements"):
        f(torch.int8)
    assert ops._mx_nv(None) is False and ops._mx_nv(torch.float8_e4m3fn) is True
    with pytest.raises(bq.InvalidArgumentError, match="scale_dtype"):
        ops._mx_nv(torch.float32)
    assert ops._mx_group(32, 256, E2M1) == 32
    with pytest.raises(bq.InvalidArgumentError, match="divide"):
        ops._mx_group(48, 256, E4M3)
    with pytest.raises(bq.InvalidArgumentError, match="odd"):
        ops._mx_group(7, 63, E2M1)
    with pytest.raises(bq.InvalidArgumentError, match="scale_layout"):
        ops._mx_choice("scale_layout", "tiles", {"row": 0})
