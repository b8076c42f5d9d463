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
