"""The fused producers' torch front end without a GPU: the fake kernels' shapes and dtypes
(meta tensors), and the wrappers' checks, which raise before anything reaches the library."""
import pytest

from conftest import HAS_TORCH

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops, _lib

M = "meta"


def test_fake_rms_norm_quant_shapes():
    d = torch.ops.baracuda_quant
    x = torch.empty(2, 3, 256, dtype=torch.bfloat16, device=M)
    w = torch.empty(256, dtype=torch.bfloat16, device=M)
    q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, None, 0, torch.int8, -128, 127, False)
    assert (q.shape, q.dtype, s.shape, s.dtype, z.shape, n.shape) == \
        (x.shape, torch.int8, (6, 1), torch.float32, (0,), (0,))
    r = torch.empty_like(x)
    q, s, z, n = d.rms_norm_quant(x, w, r, 1e-6, False, 128, None, 0, torch.uint8, 0, 255, True)
    assert (q.dtype, s.shape, z.shape, z.dtype, n.shape, n.dtype) == \
        (torch.uint8, (6, 2), (6, 2), torch.int32, x.shape, torch.bfloat16)
    q, s, z, n = d.rms_norm_quant(x, w, None, 1e-6, True, 0, 0.05, 3, torch.int8, -128, 127, False)
    assert q.shape == x.shape and s.shape == (0,) and z.shape == (0,)


def test_fake_gated_quant_shapes():
    d = torch.ops.baracuda_quant
    x = torch.empty(5, 2 * 384, dtype=torch.float16, device=M)
    for act in (1, 2):
        q, s, z, a = d.gated_quant(x, act, True, 0, None, 0, torch.int8, -128, 127, True)
        assert (q.shape, s.shape, z.shape, a.shape, a.dtype) == ((5, 384), (5, 1), (0,), (5, 384), torch.float16)
    q, s, z, a = d.gated_quant(x.view(1, 5, 768), 1, False, 64, None, 0, torch.int8, -128, 127, False)
    assert (q.shape, s.shape, z.shape, a.shape) == ((1, 5, 384), (5, 6), (5, 6), (0,))


def test_fused_under_torch_compile_fake_mode():
    """The ops trace with fake tensors (what torch.compile(fullgraph=True) does first)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(8, 4096, dtype=torch.bfloat16)
        w = torch.empty(4096, dtype=torch.bfloat16)
        r = torch.empty_like(x)
        q, s, z, n = torch.ops.baracuda_quant.rms_norm_quant(x, w, r, 1e-6, True, 0, None, 0, torch.int8, -128,
                                                             127, True)
        assert q.shape == x.shape and s.shape == (8, 1) and n.shape == x.shape
        g = torch.empty(8, 2 * 4096, dtype=torch.bfloat16)
        q, s, z, a = torch.ops.baracuda_quant.gated_quant(g, 1, True, 0, None, 0, torch.int8, -128, 127, False)
        assert q.shape == (8, 4096)


def test_wrappers_check_before_the_library():
    before = _lib.cached_plan_keys()
    x = torch.randn(4, 64)
    w = torch.ones(64)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.rms_norm_quant(x, w, 1e-6)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.rms_norm_quant(x, w, 1e-6)  # the top-level function dispatches tensors to ops
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        ops.silu_and_mul_quant(x)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.gelu_tanh_and_mul_quant(x)
    # the ops themselves refuse host tensors in their implementation
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        torch.ops.baracuda_quant.rms_norm_quant(x, w, None, 1e-6, True, 0, None, 0, torch.int8, -128, 127, False)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        torch.ops.baracuda_quant.gated_quant(x, 1, True, 0, None, 0, torch.int8, -128, 127, False)
    assert _lib.cached_plan_keys() == before


def test_quantization_arguments():
    """_fused_args: the checks every fused wrapper runs on its quantization arguments."""
    f = ops._fused_args
    assert f(True, None, None, 0, torch.int8, None, None) == (0, None, 0, -128, 127)
    assert f(False, 128, None, 0, torch.uint8, None, None) == (128, None, 0, 0, 255)
    assert f(True, None, 0.5, 7, torch.int8, -100, 100) == (0, 0.5, 7, -100, 100)
    for args, match in (((True, 128, 0.5, 0, torch.int8, None, None), "per tensor"),
                        ((True, None, torch.ones(1), 0, torch.int8, None, None), "a number"),
                        ((True, None, 0.0, 0, torch.int8, None, None), "scale"),
                        ((True, None, float("nan"), 0, torch.int8, None, None), "scale"),
                        ((True, None, None, 3, torch.int8, None, None), "zero_point"),
                        ((True, 0, None, 0, torch.int8, None, None), "group_size"),
                        ((True, None, None, 0, torch.uint8, 0, 0), "quant_min"),
                        ((True, None, None, 0, torch.int8, -128, 0), "quant_max"),
                        ((False, None, None, 0, torch.int8, 5, 5), "quant_max"),
                        ((True, None, None, 0, torch.int16, None, None), "int8")):
        with pytest.raises(bq.InvalidArgumentError, match=match):
            f(*args)


def test_fused_result():
    q, s, z, v = (torch.empty(1) for _ in range(4))
    assert ops._fused_result(q, s, z, v, True, None, 0, False) == (q, s, None)
    r = ops._fused_result(q, s, z, v, False, None, 0, True)
    assert r[0] is q and r[1] is s and r[2] is z and r[3] is v
    assert ops._fused_result(q, s, z, v, True, 0.5, 3, False) == (q, 0.5, 3)


def test_residual_rows():
    x = torch.empty(2, 3, 16)
    r = torch.empty(2, 3, 16)
    assert ops._residual_rows(r, x, 16).data_ptr() == r.data_ptr()
    with pytest.raises(bq.InvalidArgumentError, match="shape"):
        ops._residual_rows(torch.empty(6, 16), x, 16)
    with pytest.raises(bq.InvalidArgumentError, match="in place"):
        ops._residual_rows(torch.empty(2, 16, 3).transpose(1, 2), x, 16)
