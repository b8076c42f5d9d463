"""The rotation's torch op without a GPU: its fake kernel, its autograd (the backward pass
is the inverse rotation with the same blocks and signs), and the wrapper's checks."""
import pytest

from conftest import HAS_TORCH

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

if HAS_TORCH:
    import torch
    import baracuda_quant as bq
    from baracuda_quant import ops


def test_fake_and_autograd():
    x = torch.empty(4, 3, 128, dtype=torch.bfloat16, device="meta", requires_grad=True)
    y = torch.ops.baracuda_quant.hadamard(x, 64, False, True, -5)
    assert y.shape == x.shape and y.dtype == x.dtype and y.grad_fn is not None
    seen = []
    real = ops._hadamard

    def spy(*args):
        seen.append(args[1:])
        return real(*args)
    ops._hadamard = spy
    try:
        y.sum().backward()
    finally:
        ops._hadamard = real
    assert seen == [(64, True, True, -5)] and x.grad.shape == x.shape


def test_wrapper_checks():
    x = torch.randn(4, 64)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        bq.hadamard(x, 16)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA tensor"):
        torch.ops.baracuda_quant.hadamard(x, 16, False, False, 0)
