import importlib.util

import pytest


def _has(mod):
    return importlib.util.find_spec(mod) is not None


HAS_TORCH = _has("torch")
HAS_NUMPY = _has("numpy")


def cuda_available():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
needs_cuda = pytest.mark.skipif(not cuda_available(), reason="torch with a CUDA device is needed")
needs_numpy = pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")


class TensorProducer:
    """A DLPack producer that is not a torch.Tensor (so the DLPack front end takes it)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None, **kw):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()
