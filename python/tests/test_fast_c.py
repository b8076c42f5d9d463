"""The per-tensor fast path in C (baracuda_quant._fast), without torch or a GPU: fakes stand
in for torch's tensor, allocator and state, and a ctypes callback for the library's run, so
each refusal (None: ops.py takes its Python path) and each argument of the run is seen."""
import ctypes
import importlib.util
import sys

import pytest

if importlib.util.find_spec("baracuda_quant._fast") is None:
    pytest.skip("the package was built without the extension (no Python C headers)", allow_module_level=True)

from baracuda_quant import _fast  # noqa: E402

RUN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_double, ctypes.c_int64, ctypes.c_void_p)


class Tensor:
    def __init__(self, ptr, shape=(4, 8), stride=(8, 1), dtype="f32", device=0, requires_grad=False):
        self.ptr, self.shape, self._stride, self.dtype = ptr, shape, stride, dtype
        self.device, self.requires_grad = device, requires_grad

    def stride(self):
        return self._stride

    def get_device(self):
        return self.device

    def data_ptr(self):
        return self.ptr


class Sub(Tensor):
    pass


class Prep:
    def __init__(self, plan, args_address):
        self.plan, self.args_address = plan, args_address


@pytest.fixture
def env():
    st = {"modes": 0, "tracing": None, "functorch": False, "grad": True, "status": 0, "runs": [], "allocs": []}

    def empty_like(x, dtype=None):
        y = Tensor(0x9000 + 0x100 * len(st["allocs"]), x.shape, x._stride, dtype, x.device)
        st["allocs"].append((x, dtype))
        return y

    def run(plan, args, x, y, scale, zp, stream):
        st["runs"].append((plan, args, x, y, scale, zp, stream))
        return st["status"]

    cb = RUN(run)
    table = {}
    _fast.setup(Tensor, table, empty_like, lambda dev: 0x5000 + dev, lambda: st["modes"], lambda: st["tracing"],
                lambda: st["functorch"], lambda: st["grad"], ctypes.cast(cb, ctypes.c_void_p).value)
    yield st, table
    ops = sys.modules.get("baracuda_quant.ops")  # give the real module its setup back
    if ops is not None and ops._fastc is not None:
        ops._fastc_setup()


def qkey(x, dtype="s8", qmin=None, qmax=None):
    return ("qpt", x.shape, x.stride(), x.dtype, x.get_device(), dtype, qmin, qmax)


def test_runs_a_kept_geometry_with_this_calls_pointers(env):
    st, table = env
    x = Tensor(0x1000, device=1)
    assert _fast.quantize_per_tensor(x, 0.5, 3, "s8", None, None) is None  # not kept yet
    assert st["runs"] == [] and st["allocs"] == []
    table[qkey(x)] = Prep(0x77, 0x88)
    y = _fast.quantize_per_tensor(x, 0.5, 3, "s8", None, None)
    assert isinstance(y, Tensor) and y.dtype == "s8" and st["allocs"] == [(x, "s8")]
    assert st["runs"] == [(0x77, 0x88, 0x1000, y.ptr, 0.5, 3, 0x5001)]


def test_dequantize_key(env):
    st, table = env
    q = Tensor(0x2000, dtype="s8")
    table[("dqpt", q.shape, q.stride(), q.dtype, 0, "f16")] = Prep(1, 2)
    y = _fast.dequantize_per_tensor(q, 0.25, -7, "f16")
    assert y is not None and st["runs"] == [(1, 2, 0x2000, y.ptr, 0.25, -7, 0x5000)]
    assert _fast.dequantize_per_tensor(q, 0.25, -7, "bf16") is None  # another geometry


@pytest.mark.parametrize("change", ["scale_int", "zp_bool", "zp_range", "zp_neg_range", "zp_huge", "subclass",
                                    "other_shape", "other_qrange", "modes", "tracing", "functorch", "grad",
                                    "status"])
def test_refusals_take_the_python_path(env, change):
    st, table = env
    x = Tensor(0x1000)
    table[qkey(x)] = Prep(1, 2)
    args = [x, 0.5, 0, "s8", None, None]
    if change == "scale_int":
        args[1] = 1
    elif change == "zp_bool":
        args[2] = True
    elif change == "zp_range":
        args[2] = 1 << 31
    elif change == "zp_neg_range":
        args[2] = -(1 << 31) - 1
    elif change == "zp_huge":
        args[2] = 1 << 80
    elif change == "subclass":
        args[0] = Sub(0x1000)
    elif change == "other_shape":
        args[0] = Tensor(0x1000, shape=(8, 4), stride=(4, 1))
    elif change == "other_qrange":
        args[4] = -100
    elif change == "modes":
        st["modes"] = 1
    elif change == "tracing":
        st["tracing"] = object()
    elif change == "functorch":
        st["functorch"] = True
    elif change == "grad":
        x.requires_grad = True
    elif change == "status":
        st["status"] = 2
    assert _fast.quantize_per_tensor(*args) is None
    assert len(st["runs"]) == (1 if change == "status" else 0)


def test_gradient_off_runs(env):
    st, table = env
    x = Tensor(0x1000, requires_grad=True)
    table[qkey(x)] = Prep(1, 2)
    st["grad"] = False
    assert _fast.quantize_per_tensor(x, 0.5, -(1 << 31), "s8", None, None) is not None
    assert st["runs"][0][5] == -(1 << 31)


def test_errors_propagate(env):
    st, table = env

    class Broken:
        requires_grad = False

        @property
        def shape(self):
            raise RuntimeError("no shape")
    cb = RUN(lambda *a: 0)
    _fast.setup(Broken, table, lambda x, dtype=None: x, lambda d: 0, lambda: 0, lambda: None, lambda: False,
                lambda: True, ctypes.cast(cb, ctypes.c_void_p).value)
    with pytest.raises(RuntimeError, match="no shape"):
        _fast.quantize_per_tensor(Broken(), 0.5, 0, "s8", None, None)


def test_public_builtin_serves_a_kept_geometry_and_hands_on_the_rest(env):
    """public_quantize_per_tensor(fallback): the public function as a builtin. A kept geometry
    runs from C with the public defaults (zero point 0, the int8 dtype setup_public gave);
    anything else goes to fallback with the arguments exactly as passed."""
    st, table = env
    _fast.setup_public("s8")
    calls = []

    def fallback(*args, **kwargs):
        calls.append((args, kwargs))
        return "fallback"
    fn = _fast.public_quantize_per_tensor(fallback)
    assert fn.__self__ is fallback and fn.__name__ == "quantize_per_tensor"
    x = Tensor(0x1000)
    assert fn(x, 0.5) == "fallback" and calls[-1] == ((x, 0.5), {}) and st["runs"] == []  # not kept yet
    table[qkey(x)] = Prep(7, 8)
    y = fn(x, 0.5)
    assert isinstance(y, Tensor) and y.dtype == "s8" and st["runs"] == [(7, 8, 0x1000, y.ptr, 0.5, 0, 0x5000)]
    y = fn(x, scale=0.25, zero_point=-3)  # keywords, parsed in C
    assert isinstance(y, Tensor) and st["runs"][-1][4:6] == (0.25, -3)
    n = len(calls)
    assert fn(x, 0.5, 0, "u8") == "fallback" and calls[-1] == ((x, 0.5, 0, "u8"), {})  # another geometry
    assert fn(x, "abc") == "fallback"  # a scale C does not take
    assert fn(x) == "fallback" and calls[-1] == ((x,), {})  # too few arguments: fallback names them
    assert fn(x, 0.5, bogus=1) == "fallback" and calls[-1] == ((x, 0.5), {"bogus": 1})
    assert len(calls) == n + 4 and len(st["runs"]) == 2
    with pytest.raises(TypeError):
        _fast.public_quantize_per_tensor(3)


def test_public_builtin_output_dtype_keywords_follow_the_dtype(env):
    """empty_like's keywords are kept for the last output dtype, and remade for another."""
    st, table = env
    _fast.setup_public("s8")
    fn = _fast.public_quantize_per_tensor(lambda *a, **k: None)
    x = Tensor(0x1000)
    table[qkey(x)] = Prep(1, 2)
    table[qkey(x, "u8")] = Prep(3, 4)
    outs = [fn(x, 0.5), fn(x, 0.5, 0, "u8"), fn(x, 0.5, 0, "u8"), fn(x, 0.5)]
    assert [y.dtype for y in outs] == ["s8", "u8", "u8", "s8"]
    assert [a[1] for a in st["allocs"]] == ["s8", "u8", "u8", "s8"]


def _standin(*args, **kwargs):
    return "fallback"


def test_public_builtin_pickles_and_names_its_module_and_signature(env):
    """The builtin lives in its fallback's module, carries the public signature as text,
    and pickles by reference to its fallback (ops.py sets fallback.quantize_per_tensor)."""
    import pickle
    fn = _fast.public_quantize_per_tensor(_standin)
    assert fn.__module__ == __name__
    assert fn.__text_signature__ == "(x, scale, zero_point=0, dtype=torch.int8, quant_min=None, quant_max=None)"
    _standin.quantize_per_tensor = fn
    try:
        assert pickle.loads(pickle.dumps(fn)) is fn
    finally:
        del _standin.quantize_per_tensor
