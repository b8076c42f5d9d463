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


def graph_calls(f, inp, tail, error):
    """the baracuda_quant ops (name, last `tail` arguments) of f's graph, compiled whole
    (fullgraph) and run on a copy of the host tensor inp, which raises error naming CUDA"""
    import torch
    import torch._dynamo as dynamo
    backend, seen = graph_recorder(tail)
    dynamo.reset()
    with pytest.raises(error, match="CUDA"):
        torch.compile(f, fullgraph=True, backend=backend)(inp.clone())
    return seen


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
def to_c(monkeypatch):
    """the implementations' bq calls with host tensors standing in for device ones and the
    library's own validation in place of the launch: (op key, launch pointers, (key, args))
    (torch needed)"""
    from baracuda_quant import _core, _lib, ops
    calls = []

    def view(t, name="tensor"):
        if t is None:
            return None
        return _core.View(t.data_ptr(), t.shape, t.stride(), ops._DT[t.dtype], 0)

    def call(key, device_index, build, ptrs):
        calls.append((key, ptrs, build(0, None)))

    def launch(key, device, args, stream, alloc, prepare=False):
        _lib.validate(key, device, args)
        return key, _lib.Args.from_buffer_copy(args)
    monkeypatch.setattr(ops, "_check_cuda", lambda name, t: None)
    monkeypatch.setattr(ops, "_view", view)
    monkeypatch.setattr(ops, "_call", call)
    monkeypatch.setattr(_core, "_launch", launch)
    return calls


@pytest.fixture
def fast_path(monkeypatch):
    """the fused producers' eager fast path keeping two geometries, int8 per token, its runs
    recorded: (x [4, 64], w [64], g [4, 128], runs); rms_norm_quant(x, w, 1e-6) and
    silu_and_mul_quant(g) take it. The kept geometries are dropped afterwards (torch needed)"""
    import torch
    from baracuda_quant import ops
    ran = []
    monkeypatch.setattr(ops, "_run_rows", lambda *a: ran.append(a) or 0)
    monkeypatch.setattr(ops, "_raw_stream", lambda index: 0)
    monkeypatch.setattr(ops, "_eager", lambda *t: True)
    kept = type("Kept", (), {"plan": 1, "args_address": 2})()
    x, w, g = torch.randn(4, 64), torch.ones(64), torch.randn(4, 128)
    ops._fast[("rms", x.shape, x.stride(), x.dtype, x.get_device(), w.shape, w.stride(), w.dtype, w.get_device(),
               None, 1e-6, torch.int8, None)] = kept
    ops._fast[("gated", 1, g.shape, g.stride(), g.dtype, g.get_device(), torch.int8, None)] = kept
    try:
        yield x, w, g, ran
    finally:
        ops._fast.clear()


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


@pytest.fixture
def runs(monkeypatch, allocs):
    """The plan, its workspace size and the run replaced by stand-ins of the library's contract
    (after allocs' stand-ins, the test file's own where it defines one): a fused descriptor
    rounding stochastically or rotating without args.out reports rows * cols elements of the
    float type (bq_plan_workspace_size); each run records (key, args.out, workspace, bytes)."""
    from baracuda_quant import _lib
    from baracuda_quant._enums import DType, Op
    from test_fused_args import KNOWS_FUSED
    ROUNDING, ROTATION = 15, 16  # desc_key's indices of desc.rounding, .rotation
    size = {DType.F32: 4, DType.F64: 8, DType.F16: 2, DType.BF16: 2}
    seen = []

    def workspace_size(plan, args):
        key = plan
        if key[0] in (Op.RMSNORM_QUANTIZE, Op.GATED_QUANTIZE) and (key[ROUNDING] or key[ROTATION]) and not args.out:
            return args.rows * args.cols * size[DType(key[3])]
        return 0

    def run(plan, args, ws, n, stream):
        if KNOWS_FUSED:
            _lib.validate(plan, 0, args)
        seen.append((plan, args.out, ws, n))
    monkeypatch.setattr(_lib, "plan_for", lambda key, device: key)
    monkeypatch.setattr(_lib, "workspace_size", workspace_size)
    monkeypatch.setattr(_lib, "run", run)
    return seen
