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


def record_ops():
    """A TorchDispatchMode recording the baracuda_quant ops called, (name, args) in .calls,
    each run by its fake kernel (torch needed)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "baracuda_quant":
                self.calls.append((func._opname, args))
            return func(*args, **(kwargs or {}))

    return _Record()


def graph_recorder(tail):
    """(backend, seen): a torch.compile backend recording each baracuda_quant op a graph calls,
    (name, its last `tail` arguments) into the list seen, then running the graph as traced"""
    seen = []

    def backend(gm, example_inputs):
        seen.extend((str(n.target).split(".")[1], tuple(n.args[-tail:])) for n in gm.graph.nodes
                    if n.op == "call_function" and str(n.target).startswith("baracuda_quant."))
        return gm.forward
    return backend, seen


@pytest.fixture
def meta_ok(monkeypatch):
    """the torch wrappers take meta tensors (their CUDA check passes them), so their calls reach
    the fake kernels"""
    from baracuda_quant import ops
    monkeypatch.setattr(ops, "_check_cuda", lambda name, t: None)


def count_buffers(monkeypatch):
    """the DLPack front end's buffers (dlpack.DeviceBuffer) made as host memory and counted:
    the list of their sizes"""
    from baracuda_quant import dlpack
    from dlpack_fakes import HostBuffer
    made = []

    class Counted(HostBuffer):
        def __init__(self, nbytes):
            super().__init__(nbytes)
            made.append(nbytes)
    monkeypatch.setattr(dlpack, "DeviceBuffer", Counted)
    return made


@pytest.fixture
def launches(monkeypatch):
    """each launch replaced by the library's own validation, its (key, args) recorded (a test
    file may define its own)"""
    from baracuda_quant import _core, _lib, dlpack
    from dlpack_fakes import HostBuffer
    seen = []

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        seen.append((key, _lib.Args.from_buffer_copy(args)))
    monkeypatch.setattr(_core, "_launch", launch)
    monkeypatch.setattr(dlpack, "DeviceBuffer", HostBuffer)
    monkeypatch.setattr(dlpack, "_set_device", lambda index: None)
    yield seen


@pytest.fixture
def allocs(monkeypatch, launches):
    """dlpack's output buffers, counted (after launches' stand-ins)"""
    return count_buffers(monkeypatch)
