"""PyTorch custom ops (namespace "baracuda_quant") over the library, with fake kernels for
torch.compile(fullgraph=True) and autograd for fake quantize (the library's STE backward).

Each op runs on the input's device (made current for the call, so the plan binds that
device's context) and on torch.cuda.current_stream(); workspaces come from the caching
allocator; nothing synchronizes the host."""
import ctypes
import threading
import types
from typing import Optional, Tuple

import torch

from . import _core, _lib
from ._enums import Activation, DType, Direction, Granularity, Op

_DT = {torch.float32: DType.F32, torch.float64: DType.F64, torch.float16: DType.F16, torch.bfloat16: DType.BF16,
       torch.int8: DType.S8, torch.uint8: DType.U8, torch.int32: DType.S32}
# FP8 storage: symmetric, no q-range and no zero points (docs/numerics.md)
FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))
_DT.update({t: (DType.E4M3 if t is getattr(torch, "float8_e4m3fn", None) else DType.E5M2) for t in FP8_DTYPES})
# UE8M0 scales (a power of two a byte) where torch has the type; int32 per-group scales are
# UE8M0X4 words (_core.scale_type_of)
E8M0 = getattr(torch, "float8_e8m0fnu", None)
if E8M0 is not None:
    _DT[E8M0] = DType.UE8M0
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_QRANGE = {torch.int8: (-128, 127), torch.uint8: (0, 255)}


def _view(t, name="tensor"):
    if t is None:
        return None
    dt = _DT.get(t.dtype)
    if dt is None:
        raise _lib.invalid("%s: dtype %s is not supported" % (name, t.dtype))
    if t.device.type != "cuda":
        raise _lib.invalid("%s: must be a CUDA tensor, got device %s" % (name, t.device))
    return _core.View(t.data_ptr(), t.shape, t.stride(), dt, t.device.index)


def _rows(t, name):
    """An input t as [rows, last dim] with a unit last stride: a view where the rows have one
    stride and neither overlap nor repeat, else a contiguous copy (a broadcast input, as
    expand makes, is materialized: the library reads a zero row stride as dense)."""
    if t.dim() == 0:
        raise _lib.invalid("%s: expected at least 1 dimension" % name)
    k = t.shape[-1]

    def whole_rows(v):
        return (v.stride(1) == 1 or k <= 1) and (v.shape[0] <= 1 or v.stride(0) >= k)
    if t.dim() == 2 and whole_rows(t):
        return t
    try:
        v = t.view(-1, k)
        if whole_rows(v):
            return v
    except RuntimeError:
        pass
    return t.contiguous().view(-1, k)


def _check_cuda(name, t):
    if not isinstance(t, torch.Tensor):
        raise _lib.invalid("%s: expected a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.device.type != "cuda":
        raise _lib.invalid("%s: must be a CUDA tensor, got device %s" % (name, t.device))


def _check_float(name, t):
    _check_cuda(name, t)
    if t.dtype not in FLOAT_DTYPES:
        raise _lib.invalid("%s: dtype %s, expected float32, float64, float16 or bfloat16" % (name, t.dtype))


def _check_int(name, dtype):
    if dtype not in (torch.int8, torch.uint8) + FP8_DTYPES:
        raise _lib.invalid("%s: dtype %s, expected torch.int8, torch.uint8, torch.float8_e4m3fn or "
                           "torch.float8_e5m2" % (name, dtype))


# Validated calls, one per geometry (the shapes, strides, dtypes, devices and scalars of a
# call): a repeated call skips the Python-side checks and the plan lookup and only swaps in
# its tensors' pointers. Bounded: cleared when full.
_prepared = {}
_PREPARED_MAX = 4096

try:
    _raw_stream = torch._C._cuda_getCurrentRawStream  # the current stream's handle, no Stream object
except AttributeError:  # pragma: no cover
    def _raw_stream(device_index):
        return torch.cuda.current_stream(device_index).cuda_stream


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _g(t):
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


def _p(t):
    return None if t is None else t.data_ptr()


def _alloc_on(device_index):
    def alloc(n):
        t = torch.empty(n, dtype=torch.uint8, device=torch.device("cuda", device_index))
        return t, t.data_ptr()
    return alloc


def _call(key, device_index, build, ptrs):
    """Launch the call of this geometry key on device_index (made current, so a new plan binds
    its context) and torch's current stream there. build(stream, alloc) validates and returns
    the Prepared call the first time; ptrs are the pointer fields for this launch."""
    if device_index is None:
        raise _lib.invalid("the inputs must be CUDA tensors")
    if _current_device() != device_index:
        with torch.cuda.device(device_index):
            return _call(key, device_index, build, ptrs)
    alloc = _alloc_on(device_index)
    stream = _raw_stream(device_index)
    prep = _prepared.get(key)
    if prep is None:
        prep = build(stream, alloc)
        if len(_prepared) >= _PREPARED_MAX:
            _prepared.clear()
        _prepared[key] = prep
    _last.prep = prep
    return prep.launch(ptrs, stream, alloc)


# ---- the eager fast path ------------------------------------------------------------------------------
# The small ops a decode step calls (quantize and dequantize per tensor, quantize per token,
# dynamic per token, the fused producers per token) keep, per geometry of their public
# arguments, the validated call the general path built for it: a repeated eager call checks
# that nothing traces it, allocates its outputs and runs the kept bq_args with its pointers in
# one foreign call (_capi.c's bq_py_run_*), with no op dispatch and no argument rebuilding.
# Only plain floats and ints and plain contiguous tensors of a geometry seen before take it;
# everything else (and the first call) goes the general way, which fills the table. The
# library still validates every run, and checks that the current context is the plan's: any
# status but 0 (a scale it refuses, another device current) sends the call down the general
# path, which switches devices or raises the library's error.
_fast = {}
_last = threading.local()  # the call _call just launched (this thread's)
_run_tensor = _lib.bq_py_run_tensor
_run_rows = _lib.bq_py_run_rows
_I32 = 1 << 31  # the per-tensor zero point's range, checked before ctypes would wrap it
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def _fast_keep(key, clear=True):
    """Keeps the call the general path just launched for key (a fast-path geometry); clear:
    forget it (an op's implementation keeps it for its caller to keep too)."""
    prep = getattr(_last, "prep", None)
    if prep is not None and not prep.workspace_bytes:
        if len(_fast) >= _PREPARED_MAX:
            _fast.clear()
        _fast[key] = prep
    if clear:
        _last.prep = None


def _eager(t, t2=None, t3=None):
    """_ops(...) is _IMPL for up to three plain tensors (the fast paths' callers checked their
    types), in fewer steps: nothing compiles, traces or transforms, no dispatch mode is on,
    and no input records a gradient."""
    return not (_is_compiling() or _modes() or _tracing() is not None or _functorch() or
                ((t.requires_grad or (t2 is not None and t2.requires_grad) or (t3 is not None and t3.requires_grad))
                 and _grad_enabled()))


def prepared_count():
    """How many validated calls are kept (for tests)."""
    return len(_prepared)


def _scales(t, ref_dtype, grouped=False):
    """Scale arrays go to the library as float32, the data's float type or UE8M0 (and per
    group int32 UE8M0X4 words); others are converted to float32. Per group and per block
    (grouped: [rows of scales, scales a row]) a row-major or (per group) MN-major layout
    is kept as it is, else made contiguous."""
    if t.dtype not in (torch.float32, ref_dtype, E8M0) and not (grouped and t.dtype == torch.int32):
        t = t.to(torch.float32)
    if grouped and t.dim() == 2 and (t.stride(1) == 1 or t.stride(0) == 1 or t.numel() <= 1):
        return t
    return t.contiguous()


def _zps(t):
    if t is None:
        return None
    if t.dtype.is_floating_point:  # PyTorch's fake quantize accepts float zero points
        t = t.round()
    return t.to(torch.int32).contiguous()


def _zps_like(t, scales):
    """Per-group and per-block zero points as int32 laid out like scales (a copy when not)."""
    if t is None:
        return None
    t = t.reshape(scales.shape)
    if t.dtype != torch.int32 or t.stride() != scales.stride():
        t = torch.empty_strided(scales.shape, scales.stride(), dtype=torch.int32, device=t.device).copy_(
            t.round() if t.dtype.is_floating_point else t)
    return t


_IMPL_FUNCS = {}
_LIB = None  # the namespace's torch.library.Library, made by the first _op that uses it


class _DefinedOp:
    """An op defined on the dispatcher with impl as its kernel for every backend
    (CompositeExplicitAutograd) and its fake kernel registered through torch.library: what
    torch.library.custom_op registers, without the Python layers that custom_op puts on
    every call (its autograd and device wrappers cost about 10 us a call). It has no
    autograd kernel, so it serves only ops whose outputs are codes, which carry no
    gradient. It answers the CustomOpDef method this module uses."""

    def __init__(self, name, impl, schema, kernel=None):
        global _LIB
        if _LIB is None:
            _LIB = torch.library.Library("baracuda_quant", "FRAGMENT")
        pt2 = getattr(torch.Tag, "pt2_compliant_tag", None)  # as custom_op tags its ops
        _LIB.define(name + schema, tags=(pt2,) if pt2 is not None else ())
        _LIB.impl(name, kernel or impl, "CompositeExplicitAutograd")
        self.qualname = "baracuda_quant::" + name
        self._overload = getattr(torch.ops.baracuda_quant, name).default

    def __call__(self, *args, **kwargs):
        return self._overload(*args, **kwargs)

    def register_fake(self, fn):
        torch.library.register_fake(self.qualname, fn, lib=_LIB)
        return fn


def _op(name, impl, mutates_args=(), codes=False, kernel=None):
    """impl registered as the op baracuda_quant::name (schema from its annotations): a
    torch.library.custom_op, or, for the quantize ops (codes: their outputs carry no
    gradient), a _DefinedOp where torch has torch.library.infer_schema, with kernel (a
    builtin that computes what impl does) as the dispatcher's kernel where given. custom_op's
    autograd kernel makes a backward through an op without a formula raise, and bumps
    the version counters of the tensors an op mutates."""
    _IMPL_FUNCS[name] = impl
    infer = getattr(torch.library, "infer_schema", None)
    if codes and not mutates_args and infer is not None:
        return _DefinedOp(name, impl, infer(impl, mutates_args=()), kernel)
    return torch.library.custom_op("baracuda_quant::" + name, mutates_args=mutates_args)(impl)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _no_state():
    return None


def _unknown_modes():
    return 1


# What _ops, _eager and _fast.c ask of torch's state, each a function on every torch: the
# dispatch modes on (a torch that cannot tell counts as one on, so nothing is taken as
# eager), the torch.jit.trace state (None when off), functorch transforms active
_modes = getattr(torch._C, "_len_torch_dispatch_stack", None) or _unknown_modes
_tracing = getattr(torch._C, "_get_tracing_state", None) or _no_state
_functorch = getattr(torch._C, "_are_functorch_transforms_active", None) or _no_state

# The per-tensor fast paths in C (_fast.c), where the package was built with it (the wheel
# of a Python without its C headers is not)
try:
    from . import _fast as _fastc
except ImportError:  # pragma: no cover
    _fastc = None


def _fastc_setup():
    """Hands _fast.c what it calls: torch's, this module's table, the library's run."""
    _fastc.setup(torch.Tensor, _fast, torch.empty_like, _raw_stream, _modes, _tracing, _functorch,
                 _grad_enabled, ctypes.cast(_lib.bq_py_run_tensor, ctypes.c_void_p).value)
    if hasattr(_fastc, "setup_public"):
        _fastc.setup_public(torch.int8)


if _fastc is not None:
    _fastc_setup()


def _ops(*tensors):
    """The ops for a call: their implementations themselves where that is safe, else torch.ops.
    Safe means eager: not traced (torch.compile, export, torch.jit.trace), no dispatch mode
    (fake tensors, proxies), no functorch transform, plain tensors, and no gradient to
    record (torch.ops then gives fake quantize its STE backward, and the other ops an
    output that refuses backward rather than one silently detached). The direct call saves
    the dispatcher's cost on every eager call; torch.ops and the fake kernels serve
    everything else."""
    # is_compiling first: torch.compile reads it as a constant and never traces the rest
    if torch.compiler.is_compiling() or _modes() or _tracing() is not None or _functorch():
        return torch.ops.baracuda_quant
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN or (grad and t.requires_grad)):
            return torch.ops.baracuda_quant
    return _IMPL


# ---- quantize ---------------------------------------------------------------------------
def _affine(op, direction, gran, fl, x, y, dy=None, dx=None, scales=None, zero_points=None, scale=None,
            zero_point=0, mask=None, sr=(0, 0, 0), **kw):
    # fl (whose dtype is the float type) is x or y itself: which one is part of the key. A
    # per-tensor scale and zero point are not: they are set at each launch (the library
    # checks the scale on every run), so a scale that changes every step (QAT) reuses the call.
    # sr: stochastic rounding's (sr, seed, offset), then optionally the fused rotation's
    # (rotation block, random signs); seed and offset are set at each launch too (a fresh seed
    # or offset every step reuses the call).
    rb, signs = sr[3:5] if len(sr) > 3 else (0, 0)
    key = ("affine", op, direction, gran, fl is x, _g(x), _g(y), _g(dy), _g(dx), _g(scales), _g(zero_points),
           _g(mask), tuple(kw.items()), sr[0], rb, signs)
    ptrs = {"x": _p(x), "y": _p(y), "dy": _p(dy), "dx": _p(dx), "scales": _p(scales),
            "zero_points": _p(zero_points), "mask": _p(mask)}
    if sr[0] or rb:
        kw = dict(kw, **_sr_kw(sr[0], sr[1], sr[2], rb, signs))
        if sr[0]:
            ptrs["seed"], ptrs["offset"] = kw["seed"], kw["offset"]
        elif signs:
            ptrs["seed"] = kw["seed"]
    if gran == Granularity.PER_TENSOR:
        scale, zero_point = float(scale), int(zero_point)
        if not -2**31 <= zero_point < 2**31:
            raise _lib.invalid("zero_point (%d) must fit int32" % zero_point)
        ptrs["scale"], ptrs["zero_point"] = scale, zero_point
    return _call(key, fl.device.index, lambda stream, alloc: _core.affine(
        op, direction, gran, fl=_view(fl), x=_view(x), y=_view(y), dy=_view(dy), dx=_view(dx),
        scales=_view(scales), zero_points=_view(zero_points), scale=scale, zero_point=zero_point,
        mask=_view(mask), stream=stream, alloc=alloc, prepare=True, **kw), ptrs)


def _qpt_key(x, dtype, quant_min, quant_max):
    """The per-tensor quantize's fast-path key (_fast.c builds the same tuple)."""
    return ("qpt", x.shape, x.stride(), x.dtype, x.get_device(), dtype, quant_min, quant_max)


def _quantize_per_tensor_impl(x: torch.Tensor, scale: float, zero_point: int, dtype: torch.dtype,
                              quant_min: int, quant_max: int, sr: int = 0, seed: int = 0,
                              offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    # through torch.ops (the dispatcher's kernel): a repeated eager-safe call takes the C
    # fast path as the public function does, its geometry kept under the op's own arguments
    # (rounding to nearest, no rotation: the fast path's kept calls are). rot, signs: the
    # fused rotation's block (0: none) and random signs (keyed by seed)
    if _fastc is not None and not sr and not rot:
        y = _fastc.quantize_per_tensor(x, scale, zero_point, dtype, quant_min, quant_max)
        if y is not None:
            return y
    return _quantize_per_tensor_general(x, scale, zero_point, dtype, quant_min, quant_max, sr, seed, offset, rot,
                                        signs)


def _quantize_per_tensor_general(x, scale, zero_point, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0,
                                 signs=0):
    """The implementation's general path: launches through _affine, then keeps the call under
    the op's own key (the public function keeps it under its own arguments too); sr, seed,
    offset: stochastic rounding's, rot, signs: the fused rotation's (neither kept: the fast
    paths round to nearest and rotate nothing)."""
    keep = type(x) is torch.Tensor and x.is_contiguous() and x.numel() and not sr and not rot
    x = x.contiguous()
    y = torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)
    _last.prep = None
    _affine(Op.QUANTIZE, Direction.FORWARD, Granularity.PER_TENSOR, x, x, y, int_type=_DT[dtype],
            qmin=quant_min, qmax=quant_max, scale=scale, zero_point=zero_point, sr=(sr, seed, offset, rot, signs))
    if keep and _fastc is not None:
        _fast_keep(_qpt_key(x, dtype, quant_min, quant_max), clear=False)
    return y


# The op's kernel: _fast.c's builtin bound to the general path (the C fast path first, as
# _quantize_per_tensor_impl, one Python frame less a call through torch.ops)
_quantize_per_tensor = _op("quantize_per_tensor", _quantize_per_tensor_impl, codes=True,
                           kernel=_fastc.public_quantize_per_tensor(_quantize_per_tensor_general)
                           if _fastc is not None and hasattr(_fastc, "public_quantize_per_tensor") else None)


# Rows shorter than this keep the per-channel kernels: the per-token ones were measured on
# rows of 4096 and give short rows a warp each
_ROUTE_MIN_COLS = 1024


def _outer_rows(x, axis, scales, zero_points):
    """(rows, cols) when the channel axis of contiguous x is its outermost non-unit axis and
    the parameters are vectors, so that per channel is per token over x.view(rows, cols)
    (one contract, docs/numerics.md); else None. The library's per-token kernels are faster
    on that layout than its per-channel ones (docs/design.md, "The Python package")."""
    rank = x.dim()
    ax = axis + rank if axis < 0 else axis
    if not 0 <= ax < rank or x.numel() == 0 or scales.dim() != 1 or \
            (zero_points is not None and zero_points.dim() != 1):
        return None
    for i in range(ax):
        if x.shape[i] != 1:
            return None
    rows = x.shape[ax]
    cols = x.numel() // rows
    return (rows, cols) if cols >= _ROUTE_MIN_COLS else None


def _per_channel(op, x, q, scales, zero_points, axis, sr=(0, 0, 0), **kw):
    """Quantize (x to q) or dequantize (q to x) per channel, x float and q integer, both
    contiguous and of one shape: as per token where _outer_rows allows (not with the fused
    rotation, whose blocks must divide the last dimension). kw: int_type, qmin, qmax; sr as
    _affine's."""
    rc = None if len(sr) > 3 and sr[3] else _outer_rows(x, axis, scales, zero_points)
    if rc is not None:
        x, q, gran = x.view(rc), q.view(rc), Granularity.PER_TOKEN
    else:
        gran, kw["axis"] = Granularity.PER_CHANNEL, axis
    src, dst = (x, q) if op == Op.QUANTIZE else (q, x)
    _affine(op, Direction.FORWARD, gran, x, src, dst, scales=scales, zero_points=zero_points, sr=sr, **kw)


def _quantize_per_channel_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor], axis: int,
                               dtype: torch.dtype, quant_min: int, quant_max: int, sr: int = 0, seed: int = 0,
                               offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)
    _per_channel(Op.QUANTIZE, x, y, _scales(scales, x.dtype), _zps(zero_points), axis,
                 int_type=_DT[dtype], qmin=quant_min, qmax=quant_max, sr=(sr, seed, offset, rot, signs))
    return y


_quantize_per_channel = _op("quantize_per_channel", _quantize_per_channel_impl, codes=True)


def _quantize_per_token_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                             dtype: torch.dtype, quant_min: int, quant_max: int, sr: int = 0, seed: int = 0,
                             offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    x2 = _rows(x, "x")
    y = torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)
    _affine(Op.QUANTIZE, Direction.FORWARD, Granularity.PER_TOKEN, x2, x2, y.view(-1, x2.shape[1]),
            int_type=_DT[dtype], qmin=quant_min, qmax=quant_max,
            scales=_scales(scales, x.dtype).reshape(-1), zero_points=_zps(zero_points).reshape(-1)
            if zero_points is not None else None, sr=(sr, seed, offset, rot, signs))
    return y


_quantize_per_token = _op("quantize_per_token", _quantize_per_token_impl, codes=True)


def _quantize_per_group_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                             group_size: int, dtype: torch.dtype, quant_min: int, quant_max: int, sr: int = 0,
                             seed: int = 0, offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    x2 = _rows(x, "x")
    y = torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)
    s2 = _scales(scales, x.dtype, True).reshape(x2.shape[0], -1)
    _affine(Op.QUANTIZE, Direction.FORWARD, Granularity.PER_GROUP, x2, x2, y.view(-1, x2.shape[1]),
            int_type=_DT[dtype], qmin=quant_min, qmax=quant_max, group_size=group_size, scales=s2,
            zero_points=_zps_like(zero_points, s2), sr=(sr, seed, offset, rot, signs))
    return y


_quantize_per_group = _op("quantize_per_group", _quantize_per_group_impl, codes=True)


@_quantize_per_tensor.register_fake
def _(x, scale, zero_point, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=dtype, device=x.device)


@_quantize_per_channel.register_fake
def _(x, scales, zero_points, axis, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=dtype, device=x.device)


@_quantize_per_token.register_fake
def _(x, scales, zero_points, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=dtype, device=x.device)


@_quantize_per_group.register_fake
def _(x, scales, zero_points, group_size, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=dtype, device=x.device)


# ---- dequantize -------------------------------------------------------------------------
# seed, rot, signs: the fused rotation's (the output rotated back: its block, 0 none, and
# random signs keyed by seed), as mx_dequant's
def _dequantize_per_tensor_impl(q: torch.Tensor, scale: float, zero_point: int, out_dtype: torch.dtype,
                                seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    q = q.contiguous()
    y = torch.empty_like(q, dtype=out_dtype, memory_format=torch.contiguous_format)
    _affine(Op.DEQUANTIZE, Direction.FORWARD, Granularity.PER_TENSOR, y, q, y, int_type=_DT[q.dtype],
            qmin=None, qmax=None, scale=scale, zero_point=zero_point, sr=(0, seed, 0, rot, signs))
    return y


_dequantize_per_tensor = _op("dequantize_per_tensor", _dequantize_per_tensor_impl)


def _dequantize_per_channel_impl(q: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor], axis: int,
                                 out_dtype: torch.dtype, seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    q = q.contiguous()
    y = torch.empty_like(q, dtype=out_dtype, memory_format=torch.contiguous_format)
    _per_channel(Op.DEQUANTIZE, y, q, _scales(scales, out_dtype), _zps(zero_points), axis, int_type=_DT[q.dtype],
                 qmin=None, qmax=None, sr=(0, seed, 0, rot, signs))
    return y


_dequantize_per_channel = _op("dequantize_per_channel", _dequantize_per_channel_impl)


def _dequantize_per_token_impl(q: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                               out_dtype: torch.dtype, seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    q2 = _rows(q, "q")
    y = torch.empty_like(q, dtype=out_dtype, memory_format=torch.contiguous_format)
    y2 = y.view(-1, q2.shape[1])
    _affine(Op.DEQUANTIZE, Direction.FORWARD, Granularity.PER_TOKEN, y2, q2, y2, int_type=_DT[q.dtype],
            qmin=None, qmax=None, scales=_scales(scales, out_dtype).reshape(-1),
            zero_points=_zps(zero_points).reshape(-1) if zero_points is not None else None,
            sr=(0, seed, 0, rot, signs))
    return y


_dequantize_per_token = _op("dequantize_per_token", _dequantize_per_token_impl)


def _dequantize_per_group_impl(q: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                               group_size: int, out_dtype: torch.dtype, seed: int = 0, rot: int = 0,
                               signs: int = 0) -> torch.Tensor:
    q2 = _rows(q, "q")
    y = torch.empty_like(q, dtype=out_dtype, memory_format=torch.contiguous_format)
    y2 = y.view(-1, q2.shape[1])
    s2 = _scales(scales, out_dtype, True).reshape(q2.shape[0], -1)
    _affine(Op.DEQUANTIZE, Direction.FORWARD, Granularity.PER_GROUP, y2, q2, y2, int_type=_DT[q.dtype],
            qmin=None, qmax=None, group_size=group_size, scales=s2, zero_points=_zps_like(zero_points, s2),
            sr=(0, seed, 0, rot, signs))
    return y


_dequantize_per_group = _op("dequantize_per_group", _dequantize_per_group_impl)


@_dequantize_per_tensor.register_fake
def _(q, scale, zero_point, out_dtype, seed=0, rot=0, signs=0):
    return torch.empty(q.shape, dtype=out_dtype, device=q.device)


@_dequantize_per_channel.register_fake
def _(q, scales, zero_points, axis, out_dtype, seed=0, rot=0, signs=0):
    return torch.empty(q.shape, dtype=out_dtype, device=q.device)


@_dequantize_per_token.register_fake
def _(q, scales, zero_points, out_dtype, seed=0, rot=0, signs=0):
    return torch.empty(q.shape, dtype=out_dtype, device=q.device)


@_dequantize_per_group.register_fake
def _(q, scales, zero_points, group_size, out_dtype, seed=0, rot=0, signs=0):
    return torch.empty(q.shape, dtype=out_dtype, device=q.device)


# ---- fake quantize (forward and the STE backward) ---------------------------------------------
# Forward: (sr, seed, offset), then the fused rotation's (rot: its block, 0 none; signs: random
# signs keyed by seed); backward: (seed, rot, signs), the forward's rotation (the rotated STE
# mask). All default to 0: calls and graphs of before keep their arguments.
def _fq_tensor_impl(x: torch.Tensor, scale: float, zero_point: int, quant_min: int, quant_max: int, sr: int = 0,
                    seed: int = 0, offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    _affine(Op.FAKE_QUANTIZE, Direction.FORWARD, Granularity.PER_TENSOR, x, x, y,
            int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max, scale=scale,
            zero_point=zero_point, sr=(sr, seed, offset, rot, signs))
    return y


_fq_tensor = _op("fake_quantize_per_tensor", _fq_tensor_impl)


def _fq_tensor_bwd_impl(dy: torch.Tensor, x: torch.Tensor, scale: float, zero_point: int, quant_min: int,
                        quant_max: int, seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    dy, x = dy.contiguous(), x.contiguous()
    dx = torch.empty_like(x)
    _affine(Op.FAKE_QUANTIZE, Direction.BACKWARD, Granularity.PER_TENSOR, x, x, None, dy=dy, dx=dx,
            int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max, scale=scale,
            zero_point=zero_point, sr=(0, seed, 0, rot, signs))
    return dx


_fq_tensor_bwd = _op("fake_quantize_per_tensor_backward", _fq_tensor_bwd_impl)


def _fq_channel_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor, axis: int, quant_min: int,
                     quant_max: int, sr: int = 0, seed: int = 0, offset: int = 0, rot: int = 0,
                     signs: int = 0) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    _affine(Op.FAKE_QUANTIZE, Direction.FORWARD, Granularity.PER_CHANNEL, x, x, y,
            int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max,
            scales=_scales(scales, x.dtype), zero_points=_zps(zero_points), axis=axis,
            sr=(sr, seed, offset, rot, signs))
    return y


_fq_channel = _op("fake_quantize_per_channel", _fq_channel_impl)


def _fq_channel_bwd_impl(dy: torch.Tensor, x: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor, axis: int,
                         quant_min: int, quant_max: int, seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    dy, x = dy.contiguous(), x.contiguous()
    dx = torch.empty_like(x)
    _affine(Op.FAKE_QUANTIZE, Direction.BACKWARD, Granularity.PER_CHANNEL, x, x, None, dy=dy, dx=dx,
            int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max,
            scales=_scales(scales, x.dtype), zero_points=_zps(zero_points), axis=axis, sr=(0, seed, 0, rot, signs))
    return dx


_fq_channel_bwd = _op("fake_quantize_per_channel_backward", _fq_channel_bwd_impl)


@_fq_tensor.register_fake
def _(x, scale, zero_point, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_fq_channel.register_fake
def _(x, scales, zero_points, axis, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_fq_tensor_bwd.register_fake
def _(dy, x, scale, zero_point, quant_min, quant_max, seed=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_fq_channel_bwd.register_fake
def _(dy, x, scales, zero_points, axis, quant_min, quant_max, seed=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _rot_tail(inputs, at):
    """The backward op's (seed, rot, signs) of a forward op's inputs, whose (sr, seed, offset,
    rot, signs) start at at: () unrotated (the backward calls of before)"""
    sr, seed, offset, rot, signs = inputs[at:at + 5]
    return (seed, rot, signs) if rot else ()


# The STE backward reads x: the mask is the in-range test on x / s, whatever the rounding,
# with the fused rotation on the rotated x (sr, seed, offset, rot and signs, the last five
# inputs, get no gradient)
def _fq_tensor_setup(ctx, inputs, output):
    x, scale, zero_point, quant_min, quant_max = inputs[:5]
    ctx.save_for_backward(x)
    ctx.params = (scale, zero_point, quant_min, quant_max) + _rot_tail(inputs, 5)


def _fq_tensor_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return (_fq_tensor_bwd(grad, x, *ctx.params),) + (None,) * 9


def _fq_channel_setup(ctx, inputs, output):
    x, scales, zero_points, axis, quant_min, quant_max = inputs[:6]
    ctx.save_for_backward(x, scales, zero_points)
    ctx.params = (axis, quant_min, quant_max) + _rot_tail(inputs, 6)


def _fq_channel_backward(ctx, grad):
    x, scales, zero_points = ctx.saved_tensors
    return (_fq_channel_bwd(grad, x, scales, zero_points, *ctx.params),) + (None,) * 10


_fq_tensor.register_autograd(_fq_tensor_backward, setup_context=_fq_tensor_setup)
_fq_channel.register_autograd(_fq_channel_backward, setup_context=_fq_channel_setup)


# ---- fake quantize that saves its mask: what the public functions run when a gradient is to
# be recorded (rounding to nearest, unrotated: the library keeps no mask otherwise). The
# forward pass also writes the STE mask, a bit an element in int32 words (bit e % 32 of word
# e // 32), and the backward pass reads it instead of x: an eighth of a byte an element
# instead of x's whole width.
def _mask_words(x):
    return torch.empty(((x.numel() + 31) // 32,), dtype=torch.int32, device=x.device)


def _fq_tensor_mask_impl(x: torch.Tensor, scale: float, zero_point: int, quant_min: int,
                         quant_max: int) -> Tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    y, mask = torch.empty_like(x), _mask_words(x)
    if x.numel():
        _affine(Op.FAKE_QUANTIZE, Direction.FORWARD, Granularity.PER_TENSOR, x, x, y, mask=mask,
                int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max, scale=scale,
                zero_point=zero_point)
    return y, mask


_fq_tensor_mask = _op("fake_quantize_per_tensor_mask", _fq_tensor_mask_impl)


def _fq_tensor_mask_bwd_impl(dy: torch.Tensor, mask: torch.Tensor, scale: float, zero_point: int, quant_min: int,
                             quant_max: int) -> torch.Tensor:
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    if dy.numel():
        _affine(Op.FAKE_QUANTIZE, Direction.BACKWARD, Granularity.PER_TENSOR, dy, None, None, dy=dy, dx=dx,
                mask=mask, int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max,
                scale=scale, zero_point=zero_point)
    return dx


_fq_tensor_mask_bwd = _op("fake_quantize_per_tensor_mask_backward", _fq_tensor_mask_bwd_impl)


def _fq_channel_mask_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor, axis: int, quant_min: int,
                          quant_max: int) -> Tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    y, mask = torch.empty_like(x), _mask_words(x)
    if x.numel():
        _affine(Op.FAKE_QUANTIZE, Direction.FORWARD, Granularity.PER_CHANNEL, x, x, y, mask=mask,
                int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max,
                scales=_scales(scales, x.dtype), zero_points=_zps(zero_points), axis=axis)
    return y, mask


_fq_channel_mask = _op("fake_quantize_per_channel_mask", _fq_channel_mask_impl)


def _fq_channel_mask_bwd_impl(dy: torch.Tensor, mask: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor,
                              axis: int, quant_min: int, quant_max: int) -> torch.Tensor:
    dy = dy.contiguous()
    dx = torch.empty_like(dy)
    if dy.numel():
        _affine(Op.FAKE_QUANTIZE, Direction.BACKWARD, Granularity.PER_CHANNEL, dy, None, None, dy=dy, dx=dx,
                mask=mask, int_type=_core.int_type_for(quant_min, quant_max), qmin=quant_min, qmax=quant_max,
                scales=_scales(scales, dy.dtype), zero_points=_zps(zero_points), axis=axis)
    return dx


_fq_channel_mask_bwd = _op("fake_quantize_per_channel_mask_backward", _fq_channel_mask_bwd_impl)


@_fq_tensor_mask.register_fake
def _(x, scale, zero_point, quant_min, quant_max):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device), _mask_words(x)


@_fq_channel_mask.register_fake
def _(x, scales, zero_points, axis, quant_min, quant_max):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device), _mask_words(x)


@_fq_tensor_mask_bwd.register_fake
def _(dy, mask, scale, zero_point, quant_min, quant_max):
    return torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)


@_fq_channel_mask_bwd.register_fake
def _(dy, mask, scales, zero_points, axis, quant_min, quant_max):
    return torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)


def _fq_tensor_mask_setup(ctx, inputs, output):
    x, scale, zero_point, quant_min, quant_max = inputs
    ctx.save_for_backward(output[1])
    ctx.params = (scale, zero_point, quant_min, quant_max)


def _fq_tensor_mask_backward(ctx, grad, _grad_mask):
    (mask,) = ctx.saved_tensors
    return _fq_tensor_mask_bwd(grad, mask, *ctx.params), None, None, None, None


def _fq_channel_mask_setup(ctx, inputs, output):
    x, scales, zero_points, axis, quant_min, quant_max = inputs
    ctx.save_for_backward(output[1], scales, zero_points)
    ctx.params = (axis, quant_min, quant_max)


def _fq_channel_mask_backward(ctx, grad, _grad_mask):
    mask, scales, zero_points = ctx.saved_tensors
    return _fq_channel_mask_bwd(grad, mask, scales, zero_points, *ctx.params), None, None, None, None, None


_fq_tensor_mask.register_autograd(_fq_tensor_mask_backward, setup_context=_fq_tensor_mask_setup)
_fq_channel_mask.register_autograd(_fq_channel_mask_backward, setup_context=_fq_channel_mask_setup)


def _records_grad(x):
    """A gradient will flow back to x through this call (eager or traced)."""
    return torch.is_grad_enabled() and x.requires_grad


# ---- dynamic quantize -------------------------------------------------------------------------
def _dynamic_per_token_impl(x: torch.Tensor, symmetric: bool, dtype: torch.dtype, quant_min: int,
                            quant_max: int, sr: int = 0, seed: int = 0, offset: int = 0, rot: int = 0,
                            signs: int = 0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # sr, seed, offset: stochastic rounding's; seed and offset are set at each launch (as
    # _affine's: a fresh seed or offset reuses the validated call); rot, signs: the fused
    # rotation's block (0: none) and random signs (keyed by seed)
    x2 = _rows(x, "x")
    rows = x2.shape[0]
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    scales = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    zps = torch.empty((rows, 1) if not symmetric else (0,), dtype=torch.int32, device=x.device)
    q2 = q.view(-1, x2.shape[1])
    zp = None if symmetric else zps
    key = ("dynamic", _g(x2), _g(q2), _g(scales), _g(zp), quant_min, quant_max, sr, rot, signs)
    ptrs = {"x": x2.data_ptr(), "y": q2.data_ptr(), "out_scales": scales.data_ptr(), "out_zero_points": _p(zp)}
    kw = _sr_kw(sr, seed, offset, rot, signs)
    if sr:
        ptrs["seed"], ptrs["offset"] = kw["seed"], kw["offset"]
    elif signs:
        ptrs["seed"] = kw["seed"]
    _call(key, x.device.index, lambda stream, alloc: _core.dynamic(
        Granularity.PER_TOKEN, x=_view(x2), y=_view(q2), out_scales=_view(scales), out_zero_points=_view(zp),
        qmin=quant_min, qmax=quant_max, stream=stream, alloc=alloc, prepare=True, **kw), ptrs)
    return q, scales, zps


_dynamic_per_token = _op("dynamic_per_token_quant", _dynamic_per_token_impl)


@_dynamic_per_token.register_fake
def _(x, symmetric, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    rows = 1
    for s in x.shape[:-1]:
        rows *= s
    return (torch.empty(x.shape, dtype=dtype, device=x.device),
            torch.empty((rows, 1), dtype=torch.float32, device=x.device),
            torch.empty((rows, 1) if not symmetric else (0,), dtype=torch.int32, device=x.device))


# ---- fused producers ---------------------------------------------------------------------------
# (residual add +) RMSNorm, or act(gate) * up, quantized in the same pass (docs/numerics.md,
# "Fused producers"). The ops return four tensors, always: q, the scales, the zero points and
# the values quantized (n or a); what a call does not produce is an empty tensor, which the
# public functions turn into None (or leave out). scale (a number) selects the static per-tensor
# quantize; group_size 0 is per token, else per group. The ops' trailing (sr, seed, offset)
# (defaults 0: the calls of before) are stochastic rounding's, seed and offset the signed
# 64-bit ints of _sr_args, then (rot, signs) the fused rotation's (its block, 0 none, and the
# random signs, keyed by seed; per tensor and per token); with either and no values requested
# the library's second pass reads a workspace of rows * D elements (the caching allocator's,
# as every workspace here).
def _fused_outputs(x, d, symmetric, group_size, scale, dtype, return_values, scale_dtype=None):
    """The output tensors of a fused call on x [..., K] with D = d output columns."""
    rows = 1
    for s in x.shape[:-1]:
        rows *= s
    shape = (*x.shape[:-1], d)
    q = torch.empty(shape, dtype=dtype, device=x.device)
    if scale is not None:
        sshape, zshape = (0,), (0,)
    else:
        sshape = (rows, d // group_size) if group_size > 0 else (rows, 1)
        zshape = (0,) if symmetric else sshape
    scales = torch.empty(sshape, dtype=scale_dtype or torch.float32, device=x.device)
    zps = torch.empty(zshape, dtype=torch.int32, device=x.device)
    vals = torch.empty(shape if return_values else (0,), dtype=x.dtype, device=x.device)
    return q, scales, zps, vals


def _sr_ptrs(sr, ptrs):
    """_core's rounding and rotation keywords of the ops' (sr, seed, offset, rot, signs) ints,
    the seed and offset also set in ptrs (each launch's: a fresh seed or offset reuses the
    validated call, as _affine's)"""
    kw = _sr_kw(*sr)
    if "seed" in kw:
        ptrs["seed"] = kw["seed"]
    if sr[0]:
        ptrs["offset"] = kw["offset"]
    return kw


def _fused(op, x2, q2, scales, zps, vals2, residual2=None, weight=None, eps=0.0, activation=0, symmetric=True,
           group_size=0, scale=None, zero_point=0, quant_min=None, quant_max=None, sr=(0, 0, 0, 0, 0)):
    # sr: stochastic rounding's (sr, seed, offset), the rotation's (rot, signs) (_sr_ptrs)
    dynamic = scale is None
    sc = scales if dynamic else None
    zp = zps if dynamic and not symmetric else None
    key = ("fused", op, _g(x2), _g(q2), _g(sc), _g(zp), _g(residual2), _g(weight), _g(vals2), float(eps),
           int(activation), int(group_size), dynamic, quant_min, quant_max, int(sr[0]), int(sr[3]), int(sr[4]))
    ptrs = {"x": x2.data_ptr(), "y": q2.data_ptr(), "out_scales": _p(sc), "out_zero_points": _p(zp),
            "residual": _p(residual2), "norm_weight": _p(weight), "out": _p(vals2)}
    kw = _sr_ptrs(sr, ptrs)
    if not dynamic:
        scale, zero_point = float(scale), int(zero_point)
        if not -2**31 <= zero_point < 2**31:
            raise _lib.invalid("zero_point (%d) must fit int32" % zero_point)
        ptrs["scale"], ptrs["zero_point"] = scale, zero_point
    _call(key, x2.device.index, lambda stream, alloc: _core.fused(
        op, x=_view(x2, "x"), y=_view(q2), out_scales=_view(sc), out_zero_points=_view(zp),
        residual=_view(residual2, "residual"), norm_weight=_view(weight, "weight"), eps=eps,
        out=_view(vals2), activation=activation, qmin=quant_min, qmax=quant_max, group_size=group_size,
        scale=scale, zero_point=zero_point, stream=stream, alloc=alloc, prepare=True, **kw), ptrs)


def _residual_rows(residual, x, k):
    """residual as [rows, K] sharing its storage (it is written in place), or an error."""
    if tuple(residual.shape) != tuple(x.shape):
        raise _lib.invalid("residual: shape %s, expected x's %s" % (tuple(residual.shape), tuple(x.shape)))
    try:
        r2 = residual.view(-1, k)
    except RuntimeError:
        r2 = None
    if r2 is None or (k > 1 and r2.stride(1) != 1) or (r2.shape[0] > 1 and r2.stride(0) < k):
        raise _lib.invalid("residual: must be viewable as [rows, %d] with a contiguous last dimension and rows "
                           "that neither overlap nor repeat (it is updated in place; a broadcast residual "
                           "cannot be)" % k)
    return r2


def _rms_norm_quant_impl(x: torch.Tensor, weight: torch.Tensor, residual: Optional[torch.Tensor], eps: float,
                         symmetric: bool, group_size: int, scale: Optional[float], zero_point: int,
                         dtype: torch.dtype, quant_min: int, quant_max: int, return_normed: bool,
                         scale_dtype: Optional[torch.dtype] = None, sr: int = 0, seed: int = 0, offset: int = 0,
                         rot: int = 0, signs: int = 0
                         ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_float("x", x)
    _check_cuda("weight", weight)
    k = x.shape[-1] if x.dim() else 0
    q, scales, zps, normed = _fused_outputs(x, k, symmetric, group_size, scale, dtype, return_normed, scale_dtype)
    if q.numel() == 0:
        return q, scales, zps, normed
    r2 = None if residual is None else _residual_rows(residual, x, k)
    x2 = _rows(x, "x")
    _fused(Op.RMSNORM_QUANTIZE, x2, q.view(-1, k), scales, zps, normed.view(-1, k) if return_normed else None,
           residual2=r2, weight=weight.contiguous(), eps=eps, symmetric=symmetric, group_size=group_size,
           scale=scale, zero_point=zero_point, quant_min=quant_min, quant_max=quant_max,
           sr=(sr, seed, offset, rot, signs))
    return q, scales, zps, normed


_rms_norm_quant = _op("rms_norm_quant", _rms_norm_quant_impl, mutates_args=("residual",))


@_rms_norm_quant.register_fake
def _(x, weight, residual, eps, symmetric, group_size, scale, zero_point, dtype, quant_min, quant_max,
      return_normed, scale_dtype=None, sr=0, seed=0, offset=0, rot=0, signs=0):
    return _fused_outputs(x, x.shape[-1], symmetric, group_size, scale, dtype, return_normed, scale_dtype)


def _gated_quant_impl(x: torch.Tensor, activation: int, symmetric: bool, group_size: int, scale: Optional[float],
                      zero_point: int, dtype: torch.dtype, quant_min: int, quant_max: int, return_act: bool,
                      scale_dtype: Optional[torch.dtype] = None, sr: int = 0, seed: int = 0, offset: int = 0,
                      rot: int = 0, signs: int = 0
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_float("x", x)
    d = x.shape[-1] // 2 if x.dim() else 0
    q, scales, zps, act = _fused_outputs(x, d, symmetric, group_size, scale, dtype, return_act, scale_dtype)
    if q.numel() == 0:
        return q, scales, zps, act
    x2 = _rows(x, "x")
    _fused(Op.GATED_QUANTIZE, x2, q.view(-1, d), scales, zps, act.view(-1, d) if return_act else None,
           activation=activation, symmetric=symmetric, group_size=group_size, scale=scale,
           zero_point=zero_point, quant_min=quant_min, quant_max=quant_max, sr=(sr, seed, offset, rot, signs))
    return q, scales, zps, act


_gated_quant = _op("gated_quant", _gated_quant_impl)


@_gated_quant.register_fake
def _(x, activation, symmetric, group_size, scale, zero_point, dtype, quant_min, quant_max, return_act,
      scale_dtype=None, sr=0, seed=0, offset=0, rot=0, signs=0):
    return _fused_outputs(x, x.shape[-1] // 2, symmetric, group_size, scale, dtype, return_act, scale_dtype)


# ---- linear layers ---------------------------------------------------------------------------
def _linear(op, x, w, w_scales, y, a_scales, bias, a_zero_points=None, w_sums=None, act_dtype=torch.int8,
            quant_min=None, quant_max=None, asymmetric=False, a_scale=None, a_zero_point=0):
    key = ("linear", op, _g(x), _g(w), _g(w_scales), _g(y), _g(a_scales), _g(bias), _g(a_zero_points), _g(w_sums),
           act_dtype, quant_min, quant_max, bool(asymmetric), a_scale is None)
    ptrs = {"x": x.data_ptr(), "y": y.data_ptr(), "w": w.data_ptr(), "w_scales": w_scales.data_ptr(),
            "bias": _p(bias), "scales": _p(a_scales), "zero_points": _p(a_zero_points), "w_sums": _p(w_sums)}
    if a_scale is not None:
        ptrs["scale"], ptrs["zero_point"] = float(a_scale), int(a_zero_point)
    return _call(key, x.device.index, lambda stream, alloc: _core.linear(
        op, x=_view(x), w=_view(w), w_scales=_view(w_scales), y=_view(y), a_scales=_view(a_scales),
        bias=_view(bias), a_zero_points=_view(a_zero_points), w_sums=_view(w_sums), act_type=_DT[act_dtype],
        qmin=quant_min, qmax=quant_max, asymmetric=asymmetric, a_scale=a_scale, a_zero_point=a_zero_point,
        stream=stream, alloc=alloc, prepare=True), ptrs)


def _c(t):
    return None if t is None else t.contiguous()


def _int8_linear_impl(a: torch.Tensor, w: torch.Tensor, a_scales: torch.Tensor, w_scales: torch.Tensor,
                      bias: Optional[torch.Tensor], out_dtype: torch.dtype,
                      a_zero_points: Optional[torch.Tensor] = None, w_sums: Optional[torch.Tensor] = None,
                      quant_min: Optional[int] = None, quant_max: Optional[int] = None) -> torch.Tensor:
    a2 = _rows(a, "a")
    m, n = a2.shape[0], w.shape[0]
    sa = a_scales.reshape(-1)
    if sa.numel() == 1 and m != 1:  # per tensor: the one scale for every row (no host read)
        sa = sa.expand(m)
    sa = sa.contiguous()
    za = None
    if a_zero_points is not None:
        za = a_zero_points.reshape(-1).to(torch.int32)
        za = (za.expand(m) if za.numel() == 1 and m != 1 else za).contiguous()
    y = torch.empty((*a.shape[:-1], n), dtype=out_dtype, device=a.device)
    if y.numel():
        _linear(Op.SMOOTHQUANT_LINEAR, a2, w.contiguous(), w_scales.contiguous(), y.view(m, n), sa, _c(bias),
                a_zero_points=za, w_sums=_c(w_sums), act_dtype=a.dtype, quant_min=quant_min, quant_max=quant_max,
                asymmetric=za is not None)
    return y


_int8_linear = _op("int8_linear", _int8_linear_impl)


@_int8_linear.register_fake
def _(a, w, a_scales, w_scales, bias, out_dtype, a_zero_points=None, w_sums=None, quant_min=None, quant_max=None):
    return torch.empty((*a.shape[:-1], w.shape[0]), dtype=out_dtype, device=a.device)


def _int8_linear_per_tensor_impl(a: torch.Tensor, w: torch.Tensor, a_scale: float, a_zero_point: int,
                                 w_scales: torch.Tensor, bias: Optional[torch.Tensor], out_dtype: torch.dtype,
                                 asymmetric: bool, w_sums: Optional[torch.Tensor], quant_min: int,
                                 quant_max: int) -> torch.Tensor:
    a2 = _rows(a, "a")
    m, n = a2.shape[0], w.shape[0]
    y = torch.empty((*a.shape[:-1], n), dtype=out_dtype, device=a.device)
    if y.numel():
        _linear(Op.SMOOTHQUANT_LINEAR, a2, w.contiguous(), w_scales.contiguous(), y.view(m, n), None, _c(bias),
                w_sums=_c(w_sums), act_dtype=a.dtype, quant_min=quant_min, quant_max=quant_max,
                asymmetric=asymmetric, a_scale=a_scale, a_zero_point=a_zero_point)
    return y


_int8_linear_per_tensor = _op("int8_linear_per_tensor", _int8_linear_per_tensor_impl)


@_int8_linear_per_tensor.register_fake
def _(a, w, a_scale, a_zero_point, w_scales, bias, out_dtype, asymmetric, w_sums, quant_min, quant_max):
    return torch.empty((*a.shape[:-1], w.shape[0]), dtype=out_dtype, device=a.device)


def _quantized_linear_impl(x: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor, bias: Optional[torch.Tensor],
                           act_dtype: Optional[torch.dtype] = None, symmetric: bool = True,
                           quant_min: Optional[int] = None, quant_max: Optional[int] = None,
                           w_sums: Optional[torch.Tensor] = None) -> torch.Tensor:
    x2 = _rows(x, "x")
    m, n = x2.shape[0], w.shape[0]
    y = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
    if y.numel():
        _linear(Op.QUANTIZED_LINEAR, x2, w.contiguous(), w_scales.contiguous(), y.view(m, n), None, _c(bias),
                w_sums=_c(w_sums), act_dtype=act_dtype or torch.int8, quant_min=quant_min, quant_max=quant_max,
                asymmetric=not symmetric)
    return y


_quantized_linear = _op("quantized_linear", _quantized_linear_impl)


@_quantized_linear.register_fake
def _(x, w, w_scales, bias, act_dtype=None, symmetric=True, quant_min=None, quant_max=None, w_sums=None):
    return torch.empty((*x.shape[:-1], w.shape[0]), dtype=x.dtype, device=x.device)


# FP8 activations and an E4M3 weight on FP8 tensor cores (sm_89 and later); mode: 0
# tensorwise (a scale each), 1 rowwise (per row of x and per output channel), 2 blockwise
# (per 1 x 128 group of x and 128 x 128 block of w)
_FP8_MODES = {"tensorwise": 0, "rowwise": 1, "blockwise": 2}


def _fp8_linear_impl(x: torch.Tensor, w: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                     bias: Optional[torch.Tensor], out_dtype: torch.dtype, mode: int) -> torch.Tensor:
    x2 = _rows(x, "x")
    m, n = x2.shape[0], w.shape[0]
    y = torch.empty((*x.shape[:-1], n), dtype=out_dtype, device=x.device)
    if y.numel():
        if mode == 2:  # the block scales in place (row-major or MN-major: the library reads either)
            sa, sb = scale_a, scale_b
        else:  # the scales as vectors ([M, 1] and [1, N] are [M] and [N]; a 0-d scale one element)
            sa, sb = scale_a.reshape(-1).contiguous(), scale_b.reshape(-1).contiguous()
        b, y2 = _c(bias), y.view(m, n)
        key = ("fp8_linear", _g(x2), _g(w), _g(sa), _g(sb), _g(y2), _g(b), int(mode))
        ptrs = {"x": x2.data_ptr(), "y": y2.data_ptr(), "w": w.data_ptr(), "scales": sa.data_ptr(),
                "w_scales": sb.data_ptr(), "bias": _p(b)}
        _call(key, x.device.index, lambda stream, alloc: _core.fp8_linear(
            x=_view(x2), w=_view(w), scale_a=_view(sa), scale_b=_view(sb), y=_view(y2), bias=_view(b),
            rowwise=mode == 1, blockwise=mode == 2, stream=stream, alloc=alloc, prepare=True), ptrs)
    return y


_fp8_linear = _op("fp8_linear", _fp8_linear_impl)


@_fp8_linear.register_fake
def _(x, w, scale_a, scale_b, bias, out_dtype, mode):
    return torch.empty((*x.shape[:-1], w.shape[0]), dtype=out_dtype, device=x.device)


# FP8 QuantizedLinear: float activations quantized to FP8 on the GPU (per token, or blockwise
# per 1 x 128 group), then the FP8 GEMM, in one library call
def _fp8_quantized_linear_impl(x: torch.Tensor, w: torch.Tensor, scale_b: torch.Tensor, bias: Optional[torch.Tensor],
                               act_dtype: torch.dtype, blockwise: bool) -> torch.Tensor:
    x2 = _rows(x, "x")
    m, n = x2.shape[0], w.shape[0]
    y = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
    if y.numel():
        b, y2 = _c(bias), y.view(m, n)
        key = ("fp8_quantized_linear", _g(x2), _g(w), _g(scale_b), _g(y2), _g(b), str(act_dtype), bool(blockwise))
        ptrs = {"x": x2.data_ptr(), "y": y2.data_ptr(), "w": w.data_ptr(), "w_scales": scale_b.data_ptr(),
                "bias": _p(b)}
        adt = DType.E5M2 if act_dtype == torch.float8_e5m2 else DType.E4M3
        _call(key, x.device.index, lambda stream, alloc: _core.fp8_quantized_linear(
            x=_view(x2), w=_view(w), scale_b=_view(scale_b), y=_view(y2), bias=_view(b), act_dtype=adt,
            blockwise=bool(blockwise), stream=stream, alloc=alloc, prepare=True), ptrs)
    return y


_fp8_quantized_linear = _op("fp8_quantized_linear", _fp8_quantized_linear_impl)


@_fp8_quantized_linear.register_fake
def _(x, w, scale_b, bias, act_dtype, blockwise):
    return torch.empty((*x.shape[:-1], w.shape[0]), dtype=x.dtype, device=x.device)


# ---- per block, every granularity of fake quantize, and the backward passes ------------------
# gran is a Granularity value and param its number: the axis per channel, G per group, B per
# block (0 otherwise). Per tensor takes scale and zero_point (numbers), the others scales and
# zero_points (tensors).
_ROW_GRANS = (int(Granularity.PER_TOKEN), int(Granularity.PER_GROUP), int(Granularity.PER_BLOCK))


def _affine_params(gran, param, scales, zero_points, ref_dtype, rows):
    """kw for _affine: the scale arrays in the layout the granularity reads."""
    if gran == Granularity.PER_TENSOR:
        return {}
    if gran in (Granularity.PER_GROUP, Granularity.PER_BLOCK):
        if scales.dim() != 2:
            lead = rows if gran == Granularity.PER_GROUP else -(-rows // max(param, 1))
            scales = scales.reshape(lead, -1)
        s2 = _scales(scales, ref_dtype, True)
        return {"scales": s2, "zero_points": _zps_like(zero_points, s2), "group_size": param}
    s1 = _scales(scales, ref_dtype).reshape(-1)
    z1 = _zps(zero_points).reshape(-1) if zero_points is not None else None
    kw = {"scales": s1, "zero_points": z1}
    if gran == Granularity.PER_CHANNEL:
        kw["axis"] = param
    return kw


def _shaped(gran, t, name):
    """t as the granularity reads it: [rows, cols] rows, else dense."""
    return _rows(t, name) if int(gran) in _ROW_GRANS else t.contiguous()


def _affine_fwd(op, x, scale, scales, zero_point, zero_points, gran, param, out_dtype, int_dtype, qmin, qmax,
                sr=(0, 0, 0)):
    """Quantize (x float to int_dtype), dequantize (x stored to out_dtype) or fake quantize;
    sr: stochastic rounding's (sr, seed, offset), then quantize's and dequantize's fused
    rotation's (block, signs) where given."""
    gran = Granularity(gran)
    xk = _shaped(gran, x, "x")
    y = torch.empty_like(x, dtype=out_dtype, memory_format=torch.contiguous_format)
    yk = y.view(xk.shape) if int(gran) in _ROW_GRANS else y
    fl = yk if op == Op.DEQUANTIZE else xk
    rows = xk.shape[0] if xk.dim() == 2 else 1
    if x.numel():
        _affine(op, Direction.FORWARD, gran, fl, xk, yk, int_type=_DT[int_dtype], qmin=qmin, qmax=qmax,
                scale=scale, zero_point=zero_point, sr=sr,
                **_affine_params(gran, param, scales, zero_points, fl.dtype, rows))
    return y


def _quantize_per_block_impl(x: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                             block_size: int, dtype: torch.dtype, quant_min: int, quant_max: int, sr: int = 0,
                             seed: int = 0, offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    return _affine_fwd(Op.QUANTIZE, x, 0.0, scales, 0, zero_points, Granularity.PER_BLOCK, block_size, dtype, dtype,
                       quant_min, quant_max, (sr, seed, offset, rot, signs))


_quantize_per_block = _op("quantize_per_block", _quantize_per_block_impl, codes=True)


def _dequantize_per_block_impl(q: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor],
                               block_size: int, out_dtype: torch.dtype, seed: int = 0, rot: int = 0,
                               signs: int = 0) -> torch.Tensor:
    return _affine_fwd(Op.DEQUANTIZE, q, 0.0, scales, 0, zero_points, Granularity.PER_BLOCK, block_size, out_dtype,
                       q.dtype, None, None, (0, seed, 0, rot, signs))


_dequantize_per_block = _op("dequantize_per_block", _dequantize_per_block_impl)


@_quantize_per_block.register_fake
def _(x, scales, zero_points, block_size, dtype, quant_min, quant_max, sr=0, seed=0, offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=dtype, device=x.device)


@_dequantize_per_block.register_fake
def _(q, scales, zero_points, block_size, out_dtype, seed=0, rot=0, signs=0):
    return torch.empty(q.shape, dtype=out_dtype, device=q.device)


def _fake_quantize_affine_impl(x: torch.Tensor, scale: float, scales: Optional[torch.Tensor], zero_point: int,
                               zero_points: Optional[torch.Tensor], granularity: int, param: int,
                               int_dtype: torch.dtype, quant_min: int, quant_max: int, sr: int = 0, seed: int = 0,
                               offset: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    return _affine_fwd(Op.FAKE_QUANTIZE, x, scale, scales, zero_point, zero_points, granularity, param, x.dtype,
                       int_dtype, quant_min, quant_max, (sr, seed, offset, rot, signs))


_fake_quantize_affine = _op("fake_quantize_affine", _fake_quantize_affine_impl)


def _affine_backward_impl(op: int, dy: torch.Tensor, x: Optional[torch.Tensor], scale: float,
                          scales: Optional[torch.Tensor], zero_point: int, zero_points: Optional[torch.Tensor],
                          granularity: int, param: int, int_dtype: torch.dtype, quant_min: int,
                          quant_max: int, seed: int = 0, rot: int = 0, signs: int = 0) -> torch.Tensor:
    """dx of quantize (dy / s where in range), dequantize (dy * s) or fake quantize (dy where
    in range); x (the forward input) for quantize and fake quantize. seed, rot, signs: fake
    quantize's fused rotation (dy masked by the rotated x in the rotated domain; _core
    refuses it on the others)."""
    gran = Granularity(granularity)
    dyk = _shaped(gran, dy, "dy")
    xk = None if x is None else _shaped(gran, x, "x")
    if xk is not None and int(gran) in _ROW_GRANS and xk.shape[0] > 1 and xk.stride(0) != xk.shape[1]:
        xk = xk.contiguous()  # x and dx share a row stride, and dx is dense
    dx = torch.empty_like(dy, memory_format=torch.contiguous_format)
    dxk = dx.view(dyk.shape) if int(gran) in _ROW_GRANS else dx
    rows = dyk.shape[0] if dyk.dim() == 2 else 1
    if dy.numel():
        _affine(Op(op), Direction.BACKWARD, gran, dxk, xk, None, dy=dyk, dx=dxk, int_type=_DT[int_dtype],
                qmin=quant_min, qmax=quant_max, scale=scale, zero_point=zero_point, sr=(0, seed, 0, rot, signs),
                **_affine_params(gran, param, scales, zero_points, dy.dtype, rows))
    return dx


_affine_backward = _op("affine_backward", _affine_backward_impl)


@_fake_quantize_affine.register_fake
def _(x, scale, scales, zero_point, zero_points, granularity, param, int_dtype, quant_min, quant_max, sr=0, seed=0,
      offset=0, rot=0, signs=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_affine_backward.register_fake
def _(op, dy, x, scale, scales, zero_point, zero_points, granularity, param, int_dtype, quant_min, quant_max, seed=0,
      rot=0, signs=0):
    return torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)


def _fqa_setup(ctx, inputs, output):
    x, scale, scales, zero_point, zero_points, granularity, param, int_dtype, quant_min, quant_max = inputs[:10]
    ctx.save_for_backward(x, scales, zero_points)
    ctx.params = (scale, zero_point, granularity, param, int_dtype, quant_min, quant_max)
    ctx.rot = _rot_tail(inputs, 10)


def _fqa_backward(ctx, grad):
    x, scales, zero_points = ctx.saved_tensors
    scale, zero_point, granularity, param, int_dtype, qmin, qmax = ctx.params
    # (the STE mask from x, whatever the rounding; from the rotated x with the rotation)
    dx = _affine_backward(int(Op.FAKE_QUANTIZE), grad, x, scale, scales, zero_point, zero_points, granularity, param,
                          int_dtype, qmin, qmax, *ctx.rot)
    return (dx,) + (None,) * 14


_fake_quantize_affine.register_autograd(_fqa_backward, setup_context=_fqa_setup)


# ---- dynamic quantize at every granularity, with the scale formats -----------------------------
def _dyn_buffers(x, gran, size, dtype, symmetric, scale_dtype, mn_major):
    """q, and the scales and zero points (an empty int32 tensor when symmetric) as
    dlpack.dynamic_shapes lays them out."""
    from .dlpack import dynamic_shapes
    k = x.shape[-1] if x.dim() else 1
    if gran == Granularity.PER_TENSOR:
        rows, cols = 1, x.numel()
    else:
        rows = x.numel() // k if k else 0
        cols = k
    sdt = DType.S32 if scale_dtype == torch.int32 else None
    shape, strides, buf = dynamic_shapes(gran, rows, cols, max(size, 1), sdt, mn_major)
    q = torch.empty_like(x, dtype=dtype, memory_format=torch.contiguous_format)
    scales = torch.empty_strided(shape, strides, dtype=scale_dtype, device=x.device)
    zps = torch.empty_strided(shape, strides, dtype=torch.int32, device=x.device) if not symmetric else \
        torch.empty((0,), dtype=torch.int32, device=x.device)
    return q, scales, zps


def _dynamic_quant_impl(x: torch.Tensor, granularity: int, size: int, dtype: torch.dtype, symmetric: bool,
                        quant_min: int, quant_max: int, scale_dtype: torch.dtype, mn_major: bool, pow2_scales: bool,
                        amax_bound: float, sr: int = 0, seed: int = 0, offset: int = 0, rot: int = 0,
                        signs: int = 0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gran = Granularity(granularity)
    q, scales, zps = _dyn_buffers(x, gran, size, dtype, symmetric, scale_dtype, mn_major)
    if x.numel() == 0:
        return q, scales, zps
    if gran == Granularity.PER_TENSOR:
        xk, qk = x.contiguous(), q
    else:
        xk = _rows(x, "x")
        qk = q.view(xk.shape)
    zp = None if symmetric else zps
    key = ("dynamic2", int(gran), size, _g(xk), _g(qk), _g(scales), _g(zp), quant_min, quant_max, bool(pow2_scales),
           float(amax_bound), sr, rot, signs)
    ptrs = {"x": xk.data_ptr(), "y": qk.data_ptr(), "out_scales": scales.data_ptr(), "out_zero_points": _p(zp)}
    kw = _sr_kw(sr, seed, offset, rot, signs)  # (seed and offset set at each launch, as _affine's)
    if sr:
        ptrs["seed"], ptrs["offset"] = kw["seed"], kw["offset"]
    elif signs:
        ptrs["seed"] = kw["seed"]
    _call(key, x.device.index, lambda stream, alloc: _core.dynamic(
        gran, x=_view(xk), y=_view(qk), out_scales=_view(scales), out_zero_points=_view(zp), qmin=quant_min,
        qmax=quant_max, group_size=size, pow2_scales=pow2_scales, amax_bound=amax_bound, stream=stream, alloc=alloc,
        prepare=True, **kw), ptrs)
    return q, scales, zps


_dynamic_quant = _op("dynamic_quant", _dynamic_quant_impl)


@_dynamic_quant.register_fake
def _(x, granularity, size, dtype, symmetric, quant_min, quant_max, scale_dtype, mn_major, pow2_scales, amax_bound,
      sr=0, seed=0, offset=0, rot=0, signs=0):
    return _dyn_buffers(x, Granularity(granularity), size, dtype, symmetric, scale_dtype, mn_major)


# ---- the weight sums of asymmetric linear layers ---------------------------------------------
def _linear_weight_sums_impl(w: torch.Tensor) -> torch.Tensor:
    w = w.contiguous()
    y = torch.empty((w.shape[0],), dtype=torch.int32, device=w.device)
    if y.numel():
        _call(("wsums", _g(w)), w.device.index, lambda stream, alloc: _core.weight_sums(
            w=_view(w), y=_view(y), stream=stream, alloc=alloc, prepare=True), {"w": w.data_ptr(),
                                                                                 "y": y.data_ptr()})
    return y


_linear_weight_sums = _op("linear_weight_sums", _linear_weight_sums_impl)


@_linear_weight_sums.register_fake
def _(w):
    return torch.empty((w.shape[0],), dtype=torch.int32, device=w.device)


# ---- microscaling: MXFP8, MXFP4, NVFP4 ---------------------------------------------------------
# Codes: E2M1 two a byte as torch.float4_e2m1fn_x2 (uint8 on a torch without it), FP8 as
# torch's float8 types; scales one byte each, torch.float8_e8m0fnu (UE8M0; uint8 on a torch
# without it) or torch.float8_e4m3fn (NVFP4), in the layout _core.mx_scales_shape gives;
# NVFP4's tensor scale one float32. Ops take the element type as its DType value.
FP4 = getattr(torch, "float4_e2m1fn_x2", None)
if FP4 is not None:
    _DT[FP4] = DType.U8  # (the library reads E2M1 codes as bytes)
_E4M3 = getattr(torch, "float8_e4m3fn", None)
_MX_CODE_DTYPE = {int(DType.E2M1): FP4 if FP4 is not None else torch.uint8, int(DType.E4M3): _E4M3,
                  int(DType.E5M2): getattr(torch, "float8_e5m2", None)}


def _mx_codes_empty(shape, k, elem, device):
    """The codes of x [..., K]: [..., K / 2] for E2M1 (two a byte), else [..., K]."""
    return torch.empty((*shape[:-1], k // 2 if elem == int(DType.E2M1) else k), dtype=_MX_CODE_DTYPE[elem],
                       device=device)


def _mx_scales_empty(layout, rows, ngroups, nv, device):
    shape, strides, _ = _core.mx_scales_shape(layout, rows, ngroups)
    return torch.empty_strided(shape, strides, dtype=_E4M3 if nv else (E8M0 if E8M0 is not None else torch.uint8),
                               device=device)


def _sr_args(rounding, seed, offset, rotation_block=None, random_signs=False):
    """The ops' (sr, seed, offset, rotation block, signs) ints of a public call's rounding and
    rotation options: seed and offset as signed 64-bit values (torch's int), the bits the
    library takes as uint64"""
    rot, rb, signs = _core.rot_fields(rotation_block, random_signs)
    sr, s, o = _core.sr_fields(rounding, seed, offset, signs)
    signed = lambda v: v - (1 << 64) if v >= 1 << 63 else v
    return sr, signed(s), signed(o), rb, signs


def _sr_kw(sr, seed, offset, rb=0, signs=0):
    """_core's rounding and rotation keywords of the ops' ints"""
    kw = {}
    if sr:
        kw.update(rounding="stochastic", offset=offset % (1 << 64))
    if sr or signs:
        kw["seed"] = seed % (1 << 64)
    if rb:
        kw.update(rotation_block=rb, random_signs=bool(signs))
    return kw


def _mx_run(op, fl, codes, scales, elem, group_size, layout, rule=0, tensor_scale=None, out_tensor_scale=None,
            amax_bound=0.0, sr=(0, 0, 0, 0, 0)):
    """A microscaling call of the library on [rows, K] views: fl the floats, codes [rows, K or
    K / 2] (x and y by the op's direction); sr: stochastic rounding's (sr, seed, offset)."""
    key = ("mx", op, _g(fl), _g(codes), _g(scales), _g(tensor_scale), _g(out_tensor_scale), elem, group_size, layout,
           rule, float(amax_bound), sr)
    deq = op == Op.DEQUANTIZE
    ptrs = {"x": _p(codes) if deq else _p(fl), "y": _p(fl) if deq else _p(codes),
            "out_scales" if op == Op.DYNAMIC_QUANTIZE else "scales": _p(scales), "tensor_scale": _p(tensor_scale),
            "out_tensor_scale": _p(out_tensor_scale)}
    return _call(key, fl.device.index, lambda stream, alloc: _core.mx(
        op, fl=_view(fl, "x"), codes=_view(codes, "q"), scales=_view(scales, "scales"), elem=elem,
        group_size=group_size, layout=layout, rule=rule, tensor_scale=_view(tensor_scale, "tensor_scale"),
        out_tensor_scale=_view(out_tensor_scale, "out_tensor_scale"), amax_bound=amax_bound, stream=stream,
        alloc=alloc, prepare=True, **_sr_kw(*sr)), ptrs)


def _mx_quant_impl(x: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor], group_size: int,
                   elem: int, layout: int, sr: int = 0, seed: int = 0, offset: int = 0, rot: int = 0,
                   signs: int = 0) -> torch.Tensor:
    x2 = _rows(x, "x")
    q = _mx_codes_empty(x.shape, x2.shape[1], elem, x.device)
    if q.numel():
        _mx_run(Op.QUANTIZE, x2, q.view(x2.shape[0], -1), scales, elem, group_size, layout, tensor_scale=tensor_scale,
                sr=(sr, seed, offset, rot, signs))
    return q


_mx_quant = _op("mx_quant", _mx_quant_impl, codes=True)


@_mx_quant.register_fake
def _(x, scales, tensor_scale, group_size, elem, layout, sr=0, seed=0, offset=0, rot=0, signs=0):
    return _mx_codes_empty(x.shape, x.shape[-1], elem, x.device)


def _mx_dynamic_impl(x: torch.Tensor, tensor_scale: Optional[torch.Tensor], group_size: int, elem: int, nv: bool,
                     layout: int, rule: int, amax_bound: float, sr: int = 0, seed: int = 0, offset: int = 0,
                     rot: int = 0, signs: int = 0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x2 = _rows(x, "x")
    rows, k = x2.shape
    q, s, g = _mx_dynamic_outputs(x, rows, k, tensor_scale, group_size, elem, nv, layout)
    if q.numel():
        _mx_run(Op.DYNAMIC_QUANTIZE, x2, q.view(rows, -1), s, elem, group_size, layout, rule,
                tensor_scale=tensor_scale, out_tensor_scale=g if g.numel() else None, amax_bound=amax_bound,
                sr=(sr, seed, offset, rot, signs))
    return q, s, g


def _mx_dynamic_outputs(x, rows, k, tensor_scale, group_size, elem, nv, layout):
    """codes, scales in the layout and (NVFP4 computing it) the tensor scale, else (0,)"""
    return (_mx_codes_empty(x.shape, k, elem, x.device), _mx_scales_empty(layout, rows, k // group_size, nv, x.device),
            torch.empty((1,) if nv and tensor_scale is None else (0,), dtype=torch.float32, device=x.device))


_mx_dynamic = _op("mx_dynamic_quant", _mx_dynamic_impl, codes=True)


@_mx_dynamic.register_fake
def _(x, tensor_scale, group_size, elem, nv, layout, rule, amax_bound, sr=0, seed=0, offset=0, rot=0, signs=0):
    k = x.shape[-1] if x.dim() else 1
    return _mx_dynamic_outputs(x, x.numel() // k if k else 0, k, tensor_scale, group_size, elem, nv, layout)


def _mx_dequant_impl(q: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor], group_size: int,
                     elem: int, layout: int, out_dtype: torch.dtype, seed: int = 0, rot: int = 0,
                     signs: int = 0) -> torch.Tensor:
    q2 = _rows(q, "q")
    k = q2.shape[1] * (2 if elem == int(DType.E2M1) else 1)
    y = torch.empty((*q.shape[:-1], k), dtype=out_dtype, device=q.device)
    if y.numel():
        _mx_run(Op.DEQUANTIZE, y.view(q2.shape[0], k), q2, scales, elem, group_size, layout, tensor_scale=tensor_scale,
                sr=(0, seed, 0, rot, signs))
    return y


_mx_dequant = _op("mx_dequant", _mx_dequant_impl)


@_mx_dequant.register_fake
def _(q, scales, tensor_scale, group_size, elem, layout, out_dtype, seed=0, rot=0, signs=0):
    k = q.shape[-1] * (2 if elem == int(DType.E2M1) else 1)
    return torch.empty((*q.shape[:-1], k), dtype=out_dtype, device=q.device)


def _mx_floats_run(op, direction, x, dy, scales, tensor_scale, group_size, elem, layout, sr=(0, 0, 0)):
    """fake quantize forward (x -> out) and the backward passes (dy [and x] -> out), floats in
    and out, [rows, K] views; sr: fake quantize forward's stochastic rounding (sr, seed, offset)"""
    base = x if x is not None else dy
    out = torch.empty(base.shape, dtype=base.dtype, device=base.device)
    if not out.numel():
        return out
    x2 = None if x is None else _rows(x, "x")
    d2 = None if dy is None else _rows(dy, "dy")
    o2 = out.view(-1, base.shape[-1])
    fwd = direction == Direction.FORWARD
    key = ("mxf", op, direction, _g(x2), _g(d2), _g(o2), _g(scales), _g(tensor_scale), elem, group_size, layout, sr)
    ptrs = {"x": _p(x2), "y": _p(o2) if fwd else None, "dy": _p(d2), "dx": None if fwd else _p(o2),
            "scales": _p(scales), "tensor_scale": _p(tensor_scale)}
    _call(key, base.device.index, lambda stream, alloc: _core.mx_floats(
        op, direction, x=_view(x2, "x"), y=_view(o2) if fwd else None, dy=_view(d2, "dy"),
        dx=None if fwd else _view(o2), scales=_view(scales, "scales"), elem=elem, group_size=group_size,
        layout=layout, tensor_scale=_view(tensor_scale, "tensor_scale"), stream=stream, alloc=alloc, prepare=True,
        **_sr_kw(*sr)), ptrs)
    return out


def _mx_fq_impl(x: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor], group_size: int,
                elem: int, layout: int, sr: int = 0, seed: int = 0, offset: int = 0) -> torch.Tensor:
    return _mx_floats_run(Op.FAKE_QUANTIZE, Direction.FORWARD, x, None, scales, tensor_scale, group_size, elem, layout,
                          (sr, seed, offset))


def _mx_fq_bwd_impl(dy: torch.Tensor, x: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor],
                    group_size: int, elem: int, layout: int) -> torch.Tensor:
    return _mx_floats_run(Op.FAKE_QUANTIZE, Direction.BACKWARD, x, dy, scales, tensor_scale, group_size, elem, layout)


def _mx_q_bwd_impl(dy: torch.Tensor, x: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor],
                   group_size: int, elem: int, layout: int) -> torch.Tensor:
    return _mx_floats_run(Op.QUANTIZE, Direction.BACKWARD, x, dy, scales, tensor_scale, group_size, elem, layout)


def _mx_dq_bwd_impl(dy: torch.Tensor, scales: torch.Tensor, tensor_scale: Optional[torch.Tensor], group_size: int,
                    elem: int, layout: int) -> torch.Tensor:
    return _mx_floats_run(Op.DEQUANTIZE, Direction.BACKWARD, None, dy, scales, tensor_scale, group_size, elem, layout)


_mx_fq = _op("mx_fake_quant", _mx_fq_impl)
_mx_fq_bwd = _op("mx_fake_quant_backward", _mx_fq_bwd_impl)
_mx_q_bwd = _op("mx_quant_backward", _mx_q_bwd_impl)
_mx_dq_bwd = _op("mx_dequant_backward", _mx_dq_bwd_impl)


@_mx_fq.register_fake
def _(x, scales, tensor_scale, group_size, elem, layout, sr=0, seed=0, offset=0):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_mx_fq_bwd.register_fake
def _(dy, x, scales, tensor_scale, group_size, elem, layout):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_mx_q_bwd.register_fake
def _(dy, x, scales, tensor_scale, group_size, elem, layout):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@_mx_dq_bwd.register_fake
def _(dy, scales, tensor_scale, group_size, elem, layout):
    return torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)


def _mx_fq_setup(ctx, inputs, output):
    x, scales, tensor_scale, group_size, elem, layout = inputs[:6]
    ctx.save_for_backward(x, scales, tensor_scale)
    ctx.params = (group_size, elem, layout)


def _mx_fq_backward(ctx, grad):
    x, scales, tensor_scale = ctx.saved_tensors
    return (_mx_fq_bwd(grad, x, scales, tensor_scale, *ctx.params),) + (None,) * 8  # (x's; none for the rest)


_mx_fq.register_autograd(_mx_fq_backward, setup_context=_mx_fq_setup)


# The fused producers emitting a format: (q, scales, tensor scale or (0,), values or (0,))
def _fused_mx_outputs(x, d, group_size, elem, nv, tensor_scale, layout, return_values):
    rows = x.numel() // x.shape[-1] if x.dim() and x.shape[-1] else 0
    q, s, g = _mx_dynamic_outputs(x, rows, d, tensor_scale, group_size, elem, nv, layout)
    vals = torch.empty((*x.shape[:-1], d) if return_values else (0,), dtype=x.dtype, device=x.device)
    return q, s, g, vals


def _fused_mx_run(op, x2, q, s, g, vals, d, tensor_scale, group_size, elem, layout, rule, residual2=None,
                  weight=None, eps=0.0, activation=0, sr=(0, 0, 0, 0, 0)):
    # sr: stochastic rounding's (sr, seed, offset), the rotation's (rot, signs) (_sr_ptrs)
    rows = x2.shape[0]
    q2, v2 = q.view(rows, -1), (vals.view(rows, d) if vals.numel() else None)
    gout = g if g.numel() else None
    key = ("fmx", op, _g(x2), _g(q2), _g(s), _g(gout), _g(tensor_scale), _g(residual2), _g(weight), _g(v2),
           float(eps), int(activation), group_size, elem, layout, rule, int(sr[0]), int(sr[3]), int(sr[4]))
    ptrs = {"x": x2.data_ptr(), "y": q2.data_ptr(), "out_scales": s.data_ptr(), "tensor_scale": _p(tensor_scale),
            "out_tensor_scale": _p(gout), "residual": _p(residual2), "norm_weight": _p(weight), "out": _p(v2)}
    kw = _sr_ptrs(sr, ptrs)
    _call(key, x2.device.index, lambda stream, alloc: _core.fused_mx(
        op, x=_view(x2, "x"), codes=_view(q2, "q"), scales=_view(s, "scales"), elem=elem, group_size=group_size,
        layout=layout, rule=rule, tensor_scale=_view(tensor_scale, "tensor_scale"),
        out_tensor_scale=_view(gout, "out_tensor_scale"), residual=_view(residual2, "residual"),
        norm_weight=_view(weight, "weight"), eps=eps, out=_view(v2), activation=activation, stream=stream,
        alloc=alloc, prepare=True, **kw), ptrs)


def _rms_norm_mx_impl(x: torch.Tensor, weight: torch.Tensor, residual: Optional[torch.Tensor], eps: float,
                      group_size: int, elem: int, nv: bool, tensor_scale: Optional[torch.Tensor], layout: int,
                      rule: int, return_normed: bool, sr: int = 0, seed: int = 0, offset: int = 0, rot: int = 0,
                      signs: int = 0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_float("x", x)
    _check_cuda("weight", weight)
    k = x.shape[-1] if x.dim() else 0
    q, s, g, normed = _fused_mx_outputs(x, k, group_size, elem, nv, tensor_scale, layout, return_normed)
    if q.numel():
        r2 = None if residual is None else _residual_rows(residual, x, k)
        _fused_mx_run(Op.RMSNORM_QUANTIZE, _rows(x, "x"), q, s, g, normed, k, tensor_scale, group_size, elem, layout,
                      rule, residual2=r2, weight=weight.contiguous(), eps=eps, sr=(sr, seed, offset, rot, signs))
    return q, s, g, normed


_rms_norm_mx = _op("rms_norm_mx_quant", _rms_norm_mx_impl, mutates_args=("residual",))


@_rms_norm_mx.register_fake
def _(x, weight, residual, eps, group_size, elem, nv, tensor_scale, layout, rule, return_normed, sr=0, seed=0,
      offset=0, rot=0, signs=0):
    return _fused_mx_outputs(x, x.shape[-1], group_size, elem, nv, tensor_scale, layout, return_normed)


def _gated_mx_impl(x: torch.Tensor, activation: int, group_size: int, elem: int, nv: bool,
                   tensor_scale: Optional[torch.Tensor], layout: int, rule: int, return_act: bool, sr: int = 0,
                   seed: int = 0, offset: int = 0, rot: int = 0, signs: int = 0
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_float("x", x)
    d = x.shape[-1] // 2 if x.dim() else 0
    q, s, g, act = _fused_mx_outputs(x, d, group_size, elem, nv, tensor_scale, layout, return_act)
    if q.numel():
        _fused_mx_run(Op.GATED_QUANTIZE, _rows(x, "x"), q, s, g, act, d, tensor_scale, group_size, elem, layout, rule,
                      activation=activation, sr=(sr, seed, offset, rot, signs))
    return q, s, g, act


_gated_mx = _op("gated_mx_quant", _gated_mx_impl)


@_gated_mx.register_fake
def _(x, activation, group_size, elem, nv, tensor_scale, layout, rule, return_act, sr=0, seed=0, offset=0, rot=0,
      signs=0):
    return _fused_mx_outputs(x, x.shape[-1] // 2, group_size, elem, nv, tensor_scale, layout, return_act)


# ---- the Hadamard rotation: its gradient is its inverse (an orthonormal transform) -------------------
def _hadamard_impl(x: torch.Tensor, block_size: int, inverse: bool, signs: bool, seed: int) -> torch.Tensor:
    _check_float("x", x)
    x2 = _rows(x, "x")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        y2 = y.view(-1, x.shape[-1])
        useed = seed % 2**64  # (the schema's int is signed: the same 64 bits)
        key = ("hadamard", _g(x2), _g(y2), block_size, bool(inverse), bool(signs))
        _call(key, x.device.index, lambda stream, alloc: _core.hadamard(
            x=_view(x2, "x"), y=_view(y2), block_size=block_size, inverse=inverse, seed=useed if signs else None,
            stream=stream, alloc=alloc, prepare=True), {"x": x2.data_ptr(), "y": y2.data_ptr(),
                                                        "seed": useed if signs else 0})
    return y


_hadamard = _op("hadamard", _hadamard_impl)


@_hadamard.register_fake
def _(x, block_size, inverse, signs, seed):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _hadamard_setup(ctx, inputs, output):
    ctx.params = inputs[1:]


def _hadamard_backward(ctx, grad):
    block_size, inverse, signs, seed = ctx.params
    return _hadamard(grad, block_size, not inverse, signs, seed), None, None, None, None


_hadamard.register_autograd(_hadamard_backward, setup_context=_hadamard_setup)


# The implementations under the ops' names, for _ops' direct calls.
_IMPL = types.SimpleNamespace(**_IMPL_FUNCS)


# ---- the public functions: argument checks in Python, then the ops --------------------------------
def _qargs(dtype, quant_min, quant_max):
    """The explicit q-range (plain Python on torch dtypes, so torch.compile traces it)."""
    _check_int("dtype", dtype)
    if dtype in FP8_DTYPES:  # no q-range: (0, 0) to the library
        return _core.qrange(_DT[dtype], quant_min, quant_max)
    lo, hi = _QRANGE[dtype]
    qmin = lo if quant_min is None else int(quant_min)
    qmax = hi if quant_max is None else int(quant_max)
    if not (lo <= qmin <= qmax <= hi) or (qmin == 0 and qmax == 0):
        _core.qrange(_DT[dtype], qmin, qmax)  # raises with the message
    return qmin, qmax


def quantize_per_tensor(x, scale, zero_point=0, dtype=torch.int8, quant_min=None, quant_max=None, *,
                        rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """q = sat(rne(x / scale) + zero_point, quant_min, quant_max), int8 or uint8; FP8 (float8_e4m3fn,
    float8_e5m2): q = fp8(x / scale), zero_point 0 and no q-range (docs/numerics.md).
    rounding="stochastic" with an int seed rounds x / scale up or down by a draw at the
    element's row-major index plus offset (docs/numerics.md, "Stochastic rounding").
    rotation_block: x rotated first, as hadamard(x, rotation_block) would (a power of two from
    2 to 256 dividing the last dimension), random_signs keyed by seed (docs/numerics.md,
    "Rotation"): the codes of the rotated values, in one pass."""
    if _fastc is not None and not _is_compiling() and rounding == "nearest" and seed is None and offset == 0 and \
            rotation_block is None and not random_signs:
        y = _fastc.quantize_per_tensor(x, scale, zero_point, dtype, quant_min, quant_max)
        if y is not None:
            return y
    return _quantize_per_tensor_py(x, scale, zero_point, dtype, quant_min, quant_max, rounding=rounding, seed=seed,
                                   offset=offset, rotation_block=rotation_block, random_signs=random_signs)


def _plain(rounding, seed, offset, rotation_block=None, random_signs=False):
    """rounding to nearest with no seed, offset or rotation: the fast paths' calls"""
    return rounding == "nearest" and seed is None and offset == 0 and rotation_block is None and not random_signs


def _tail(sr):
    """The ops' trailing arguments of _sr_args' ints: (sr, seed, offset), and (rot, signs)
    only with the fused rotation (the calls of before record the tail they did)"""
    return sr if sr[3] or sr[4] else sr[:3]


def _quantize_per_tensor_py(x, scale, zero_point=0, dtype=torch.int8, quant_min=None, quant_max=None, *,
                            rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """quantize_per_tensor less the C fast path: the Python fast path, else the checks and the
    general path (what the builtin quantize_per_tensor calls where C does not serve a call,
    and what torch.compile traces in its place). Stochastic rounding and the fused rotation
    take the general path alone (the fast paths' kept calls round to nearest, unrotated)."""
    if not _plain(rounding, seed, offset, rotation_block, random_signs):
        return _quantize_per_tensor_sr(x, scale, zero_point, dtype, quant_min, quant_max, rounding, seed, offset,
                                       rotation_block, random_signs)
    key = None
    if type(x) is torch.Tensor and type(scale) is float and type(zero_point) is int:
        key = _qpt_key(x, dtype, quant_min, quant_max)
        prep = _fast.get(key)
        if prep is not None and -_I32 <= zero_point < _I32 and _eager(x):
            y = torch.empty_like(x, dtype=dtype)
            if not _run_tensor(prep.plan, prep.args_address, x.data_ptr(), y.data_ptr(), scale, zero_point,
                               _raw_stream(key[4])):
                return y
    _check_float("x", x)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    scale, zero_point = _core.number("scale", scale), _core.integer("zero_point", zero_point)
    d = _ops(x)
    _last.prep = None
    if d is not _IMPL:
        return d.quantize_per_tensor(x, scale, zero_point, dtype, qmin, qmax)
    # the general path itself: the implementation's C fast path would find the op's key
    # (resolved q-range) and launch without leaving the call for this key
    y = _quantize_per_tensor_general(x, scale, zero_point, dtype, qmin, qmax)
    if key is not None and x.is_contiguous() and x.numel():
        _fast_keep(key)
    return y


def _quantize_per_tensor_sr(x, scale, zero_point, dtype, quant_min, quant_max, rounding, seed, offset,
                            rotation_block=None, random_signs=False):
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("x", x)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    scale, zero_point = _core.number("scale", scale), _core.integer("zero_point", zero_point)
    d = _ops(x)
    if d is not _IMPL:
        return d.quantize_per_tensor(x, scale, zero_point, dtype, qmin, qmax, *sr)
    return _quantize_per_tensor_general(x, scale, zero_point, dtype, qmin, qmax, *sr)


def _builtin(fallback):
    """quantize_per_tensor as _fast.c's builtin bound to fallback (the Python function it
    stands in for), one Python frame less a call, where torch.compile can trace fallback in
    its place (torch.compiler.substitute_in_graph); else None, and the Python function stays."""
    sub = getattr(torch.compiler, "substitute_in_graph", None)
    if _fastc is None or sub is None or not hasattr(_fastc, "public_quantize_per_tensor"):
        return None
    fn = _fastc.public_quantize_per_tensor(fallback)
    try:
        sub(fn, skip_signature_check=True)(fallback)
    except Exception:  # pragma: no cover (a torch whose dynamo refuses the builtin)
        return None
    fallback.quantize_per_tensor = fn  # pickle names a builtin bound to fallback so
    return fn


_quantize_per_tensor_c = _builtin(_quantize_per_tensor_py)
if _quantize_per_tensor_c is not None:
    quantize_per_tensor = _quantize_per_tensor_c


def quantize_per_channel(x, scales, zero_points, axis, dtype=torch.int8, quant_min=None, quant_max=None, *,
                         rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """Per-channel quantize along axis: scales and zero_points (or None) of shape [x.shape[axis]].
    rounding, seed, offset: as quantize_per_tensor's (the element's flat row-major index).
    rotation_block, random_signs: as quantize_per_tensor's (the blocks along the last
    dimension, whatever the axis)."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("x", x)
    _check_cuda("scales", scales)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    return _ops(x, scales, zero_points).quantize_per_channel(x, scales, zero_points, int(axis), dtype, qmin, qmax,
                                                             *sr)


def quantize_per_token(x, scales, zero_points=None, dtype=torch.int8, quant_min=None, quant_max=None, *,
                       rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """Per-row quantize of x [..., K]: one scale (and zero point) per row of x.view(-1, K).
    rounding, seed, offset: as quantize_per_tensor's (element (r, c) of x.view(-1, K) at
    index r * K + c). rotation_block, random_signs: each row rotated first, as
    quantize_per_tensor's."""
    if not _plain(rounding, seed, offset, rotation_block, random_signs):  # (the fast path: nearest, unrotated)
        sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
        _check_float("x", x)
        _check_cuda("scales", scales)
        qmin, qmax = _qargs(dtype, quant_min, quant_max)
        return _ops(x, scales, zero_points).quantize_per_token(x, scales, zero_points, dtype, qmin, qmax, *sr)
    key = None
    if type(x) is torch.Tensor and type(scales) is torch.Tensor and zero_points is None:
        key = ("qtok", x.shape, x.stride(), x.dtype, x.get_device(), scales.shape, scales.stride(), scales.dtype,
               scales.get_device(), dtype, quant_min, quant_max)
        prep = _fast.get(key)
        if prep is not None and _eager(x, scales):
            y = torch.empty_like(x, dtype=dtype)
            if not _run_rows(prep.plan, prep.args_address, x.data_ptr(), y.data_ptr(), scales.data_ptr(), None, None,
                             None, _raw_stream(key[4])):
                return y
    _check_float("x", x)
    _check_cuda("scales", scales)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    d = _ops(x, scales, zero_points)
    _last.prep = None
    y = d.quantize_per_token(x, scales, zero_points, dtype, qmin, qmax)
    if key is not None and d is _IMPL and x.is_contiguous() and scales.is_contiguous() and \
            scales.dtype in (torch.float32, x.dtype) and x.numel():
        _fast_keep(key)
    return y


def quantize_per_group(x, scales, zero_points, group_size, dtype=torch.int8, quant_min=None, quant_max=None, *,
                       rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """Per-group quantize of x [..., K]: scales [rows, K / group_size]. rounding, seed,
    offset, rotation_block, random_signs: as quantize_per_token's (the rotation's blocks
    independent of the groups)."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("x", x)
    _check_cuda("scales", scales)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    g = _core.integer("group_size", group_size)
    return _ops(x, scales, zero_points).quantize_per_group(x, scales, zero_points, g, dtype, qmin, qmax, *sr)


def _granularity(scale, axis, group_size, block_size):
    return _core.granularity(not isinstance(scale, torch.Tensor), axis, group_size, block_size)


def _affine_scalars(gran, scale, zero_point):
    """(scale, scales, zero_point, zero_points) of the generic ops, checked."""
    if gran == Granularity.PER_TENSOR:
        return _core.number("scale", scale), None, _core.integer("zero_point", 0 if zero_point is None else
                                                                 zero_point), None
    zps = zero_point if isinstance(zero_point, torch.Tensor) else None
    if zps is None and zero_point not in (0, None):
        raise _lib.invalid("zero_point: a tensor is needed with a scale tensor")
    _check_cuda("scale", scale)
    return 0.0, scale, 0, zps


def _storage_dtype(dtype, quant_min, quant_max):
    """The storage type of fake quantize and the backward passes, with its q-range: dtype
    when given (FP8 needs it), else the integer type [quant_min, quant_max] fits."""
    if dtype is None:
        if quant_min is None or quant_max is None:
            raise _lib.invalid("quant_min and quant_max are required without dtype")
        it = _core.int_type_for(_core.integer("quant_min", quant_min), _core.integer("quant_max", quant_max))
        dtype = torch.int8 if it == DType.S8 else torch.uint8
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    return dtype, qmin, qmax


def quantize_per_block(x, scales, zero_points, block_size, dtype=torch.int8, quant_min=None, quant_max=None, *,
                       rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """Per-block quantize of x [..., K] viewed as [rows, K]: B x B tiles (B = block_size; edge
    tiles partial), scales [ceil(rows / B), ceil(K / B)] (float32, x's type or
    float8_e8m0fnu), zero points (int32, like scales) or None. rounding, seed, offset,
    rotation_block, random_signs: as quantize_per_token's."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("x", x)
    _check_cuda("scales", scales)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    b = _core.integer("block_size", block_size)
    return _ops(x, scales, zero_points).quantize_per_block(x, scales, zero_points, b, dtype, qmin, qmax, *sr)


def _nearest_only(op, direction, rounding):
    """Dequantize and the backward passes take rounding "nearest" alone (the error names it)."""
    if rounding != "nearest":
        _core.affine_sr(op, direction, rounding, None, 0)


def dequantize(q, scale, zero_point=0, *, axis=None, group_size=None, block_size=None, out_dtype=torch.float32,
               rounding="nearest", rotation_block=None, random_signs=False, seed=None):
    """y = (q - zero_point) * scale. scale a float: per tensor; a tensor: per channel along axis
    when axis is given, per group when group_size is given, per block when block_size is
    given, else per token (one per row). rounding: "nearest" only (dequantize rounds nothing
    into a storage type). rotation_block: y rotated back, as hadamard(y, rotation_block,
    inverse=True) would (the inverse of the quantize ops' rotation; blocks along the last
    dimension), random_signs keyed by seed (docs/numerics.md, "Rotation")."""
    _nearest_only(Op.DEQUANTIZE, Direction.FORWARD, rounding)
    if rotation_block is not None or random_signs or seed is not None:
        _, s, _, rb, signs = _sr_args("nearest", seed, 0, rotation_block, random_signs)
        return _dequantize(q, scale, zero_point, axis, group_size, block_size, out_dtype, (s, rb, signs))
    if _fastc is not None and not _is_compiling() and axis is None and group_size is None and block_size is None:
        y = _fastc.dequantize_per_tensor(q, scale, zero_point, out_dtype)
        if y is not None:
            return y
    key = None
    if type(q) is torch.Tensor and type(scale) is float and type(zero_point) is int and axis is None and \
            group_size is None and block_size is None:
        key = ("dqpt", q.shape, q.stride(), q.dtype, q.get_device(), out_dtype)
        prep = _fast.get(key)
        if prep is not None and -_I32 <= zero_point < _I32 and _eager(q):
            y = torch.empty_like(q, dtype=out_dtype)
            if not _run_tensor(prep.plan, prep.args_address, q.data_ptr(), y.data_ptr(), scale, zero_point,
                               _raw_stream(key[4])):
                return y
    _last.prep = None
    y = _dequantize(q, scale, zero_point, axis, group_size, block_size, out_dtype)
    if key is not None and q.is_contiguous() and q.numel() and _ops(q) is _IMPL:
        _fast_keep(key)
    return y


def _dequantize(q, scale, zero_point, axis, group_size, block_size, out_dtype, rot=()):
    # rot: the ops' (seed, rot, signs) with the fused rotation, else () (the calls of before)
    _check_cuda("q", q)
    _check_int("q", q.dtype)
    if out_dtype not in FLOAT_DTYPES:
        raise _lib.invalid("out_dtype %s is not a float type" % out_dtype)
    if block_size is not None:
        gran, b = _granularity(scale, axis, group_size, block_size)
        _, s, _, z = _affine_scalars(gran, scale, zero_point)
        return _ops(q, s, z).dequantize_per_block(q, s, z, b, out_dtype, *rot)
    d = _ops(q, scale if isinstance(scale, torch.Tensor) else None,
             zero_point if isinstance(zero_point, torch.Tensor) else None)
    if not isinstance(scale, torch.Tensor):
        scale, zero_point = _core.number("scale", scale), _core.integer("zero_point", zero_point)
        return d.dequantize_per_tensor(q, scale, zero_point, out_dtype, *rot)
    zps = zero_point if isinstance(zero_point, torch.Tensor) else None
    if zps is None and zero_point not in (0, None):
        raise _lib.invalid("zero_point: a tensor is needed with a scale tensor")
    if axis is not None:
        return d.dequantize_per_channel(q, scale, zps, int(axis), out_dtype, *rot)
    if group_size is not None:
        return d.dequantize_per_group(q, scale, zps, _core.integer("group_size", group_size), out_dtype, *rot)
    return d.dequantize_per_token(q, scale, zps, out_dtype, *rot)


def _rotation_of(input, sr):
    """The fused rotation's block checked against input's last dimension (per tensor and per
    channel the library's blocks run along the flat array, which a view as [1, numel] keeps)"""
    if len(sr) > 3 and isinstance(input, torch.Tensor):
        _core.rotation_block_check(sr[3], input.shape[-1] if input.dim() else 1)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max, *, rounding="nearest", seed=None,
                                    offset=0, rotation_block=None, random_signs=False):
    """torch.fake_quantize_per_tensor_affine, drop-in (scale and zero_point as numbers or
    one-element tensors); backward: the straight-through estimator. rounding="stochastic"
    with an int seed: quantize_per_tensor's stochastic rounding (the gradient is the same
    straight-through estimator, its mask computed from input in the backward pass).
    rotation_block, random_signs (keyed by seed): as fake_quantize's."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    one = isinstance(scale, torch.Tensor) or isinstance(zero_point, torch.Tensor)
    if one:
        _rotation_of(input, sr)
    _check_float("input", input)
    if one:
        # one-element tensors stay on the device: a per-channel op over [1, numel]
        s = torch.as_tensor(scale, device=input.device).reshape(1)
        z = torch.as_tensor(zero_point, device=input.device).reshape(1)
        return fake_quantize_per_channel_affine(input.reshape(1, -1), s, z, 0, quant_min, quant_max,
                                                rounding=rounding, seed=seed, offset=offset,
                                                rotation_block=rotation_block,
                                                random_signs=random_signs).view(input.shape)
    scale, zero_point = _core.number("scale", scale), _core.integer("zero_point", zero_point)
    if sr[0] or len(sr) > 3:  # (no saved mask with stochastic rounding or the rotation: the backward reads input)
        d = torch.ops.baracuda_quant if _records_grad(input) else _ops(input)
        return d.fake_quantize_per_tensor(input, scale, zero_point, int(quant_min), int(quant_max), *sr)
    if _records_grad(input):
        return torch.ops.baracuda_quant.fake_quantize_per_tensor_mask(input, scale, zero_point, int(quant_min),
                                                                      int(quant_max))[0]
    return _ops(input).fake_quantize_per_tensor(input, scale, zero_point, int(quant_min), int(quant_max))


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max, *, rounding="nearest",
                                     seed=None, offset=0, rotation_block=None, random_signs=False):
    """torch.fake_quantize_per_channel_affine, drop-in; backward: the straight-through estimator.
    rounding, seed, offset, rotation_block, random_signs: as fake_quantize_per_tensor_affine's."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("input", input)
    _check_cuda("scale", scale)
    _check_cuda("zero_point", zero_point)
    if sr[0] or len(sr) > 3:  # (no saved mask with stochastic rounding or the rotation: the backward reads input)
        d = torch.ops.baracuda_quant if _records_grad(input) else _ops(input, scale, zero_point)
        return d.fake_quantize_per_channel(input, scale, zero_point, int(axis), int(quant_min), int(quant_max), *sr)
    if _records_grad(input):
        return torch.ops.baracuda_quant.fake_quantize_per_channel_mask(
            input, scale, zero_point, int(axis), int(quant_min), int(quant_max))[0]
    return _ops(input, scale, zero_point).fake_quantize_per_channel(
        input, scale, zero_point, int(axis), int(quant_min), int(quant_max))


def fake_quantize(input, scale, zero_point=0, quant_min=None, quant_max=None, *, dtype=None, axis=None,
                  group_size=None, block_size=None, rounding="nearest", seed=None, offset=0, rotation_block=None,
                  random_signs=False):
    """dequantize(quantize(input)) at any granularity (chosen as dequantize chooses it), into
    [quant_min, quant_max] of int8/uint8 or, with dtype float8_e4m3fn/float8_e5m2, FP8;
    differentiable (the straight-through estimator). rounding="stochastic" with an int seed
    rounds as the quantize ops do (docs/numerics.md, "Stochastic rounding"); the gradient
    is the same straight-through estimator. rotation_block (a power of two from 2 to 256
    dividing the last dimension), random_signs keyed by seed (one seed keys the signs and
    the draws): bit for bit hadamard(input, rotation_block, seed=...), this call, then
    hadamard(..., inverse=True) in one pass (docs/numerics.md, "Rotation"); its gradient
    hadamard(mask * hadamard(dy), inverse=True), the mask that of the rotated input, which
    the backward pass recomputes from input."""
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    _check_float("input", input)
    gran, param = _granularity(scale, axis, group_size, block_size)
    s, ss, z, zs = _affine_scalars(gran, scale, zero_point)
    dt, qmin, qmax = _storage_dtype(dtype, quant_min, quant_max)
    d = torch.ops.baracuda_quant if _records_grad(input) else _ops(input, ss, zs)
    return d.fake_quantize_affine(input, s, ss, z, zs, int(gran), param, dt, qmin, qmax, *sr)


def _backward(op, dy, x, scale, zero_point, dtype, quant_min, quant_max, axis, group_size, block_size,
              rounding="nearest", seed=None, rotation_block=None, random_signs=False):
    _nearest_only(op, Direction.BACKWARD, rounding)
    rot = ()
    if rotation_block is not None or random_signs or seed is not None:  # (fake quantize's alone: _core.affine_rot)
        _core.affine_rot(op, Direction.BACKWARD, rotation_block, random_signs)
        _, s, _, rb, signs = _sr_args("nearest", seed, 0, rotation_block, random_signs)
        rot = (s, rb, signs)
    _check_float("dy", dy)
    if x is not None:
        _check_float("input", x)
        if x.dtype != dy.dtype or tuple(x.shape) != tuple(dy.shape):
            raise _lib.invalid("input: shape %s dtype %s, expected dy's %s %s" % (tuple(x.shape), x.dtype,
                                                                                 tuple(dy.shape), dy.dtype))
    gran, param = _granularity(scale, axis, group_size, block_size)
    s, ss, z, zs = _affine_scalars(gran, scale, zero_point)
    dt, qmin, qmax = _storage_dtype(dtype, quant_min, quant_max)
    return _ops(dy, x, ss, zs).affine_backward(int(op), dy, x, s, ss, z, zs, int(gran), param, dt, qmin, qmax, *rot)


def fake_quantize_backward(dy, input, scale, zero_point=0, quant_min=None, quant_max=None, *, dtype=None, axis=None,
                           group_size=None, block_size=None, rounding="nearest", seed=None, rotation_block=None,
                           random_signs=False):
    """fake_quantize's gradient (the straight-through estimator): dy where quantize(input) is
    inside the range, else 0 (the same for either rounding of the forward pass; rounding:
    "nearest" only, as the backward passes round nothing). rotation_block, random_signs and
    seed (the signs' key) as the forward pass took them: hadamard(mask * hadamard(dy),
    inverse=True), the mask that of hadamard(input)."""
    return _backward(Op.FAKE_QUANTIZE, dy, input, scale, zero_point, dtype, quant_min, quant_max, axis, group_size,
                     block_size, rounding, seed, rotation_block, random_signs)


def quantize_backward(dy, input, scale, zero_point=0, *, dtype=torch.int8, quant_min=None, quant_max=None,
                      axis=None, group_size=None, block_size=None, rounding="nearest"):
    """Quantize's gradient with respect to input: dy / scale where quantize(input) is inside
    the range, else 0 (dy: the gradient of the quantized values, in input's type;
    rounding: "nearest" only)."""
    return _backward(Op.QUANTIZE, dy, input, scale, zero_point, dtype, quant_min, quant_max, axis, group_size,
                     block_size, rounding)


def dequantize_backward(dy, scale, zero_point=0, *, dtype=torch.int8, axis=None, group_size=None, block_size=None,
                        rounding="nearest"):
    """Dequantize's gradient with respect to its codes: dy * scale (dtype: the storage type;
    rounding: "nearest" only)."""
    return _backward(Op.DEQUANTIZE, dy, None, scale, zero_point, dtype, None, None, axis, group_size, block_size,
                     rounding)


def dynamic_quant(x, granularity="token", *, group_size=None, block_size=None, dtype=torch.int8, symmetric=True,
                  quant_min=None, quant_max=None, scale_dtype=torch.float32, scale_layout="row", pow2_scales=False,
                  amax_bound=None, rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """Dynamic quantize of x [..., K] (rows: x.view(-1, K)) with the scales it computes, per
    "tensor" (scales (1,)), "token" ([rows, 1]), "group" (group_size G: [rows, K / G]) or
    "block" (block_size B: [ceil(rows / B), ceil(K / B)]). dtype: int8, uint8 (any q-range),
    float8_e4m3fn or float8_e5m2 (symmetric). scale_dtype: float32, x's type,
    float8_e8m0fnu (UE8M0: powers of two) or, per group, int32 (UE8M0X4: four UE8M0 scales a
    word along the row, [rows, ceil(K / G / 4)]). scale_layout "mn" (per group): the scales
    come as the transposed view of a [K / G, rows rounded up to 4] buffer, the layout FP8
    GEMMs read. pow2_scales rounds each scale up to a power of two; amax_bound (symmetric)
    caps each segment's max |x| (docs/numerics.md). rounding="stochastic" with an int seed:
    the scales as rounding to nearest computes them, then x quantized with them, each
    element rounded up or down by a draw at its row-major index of x.view(-1, K) plus offset
    (docs/numerics.md, "Stochastic rounding"). rotation_block (per token): each row
    rotated first in blocks of that many elements (a power of two from 2 to 256),
    random_signs keyed by seed (docs/numerics.md, "Rotation"): the scales and codes of the
    rotated rows (rounding to nearest, in the same pass). Returns (q, scales, zero points (int32, like
    scales) or None)."""
    sr = _sr_args(rounding, seed, offset, rotation_block, random_signs)
    _check_float("x", x)
    _check_int("dtype", dtype)
    gran, size, mn = _core.dynamic_granularity(granularity, group_size, block_size, scale_layout,
                                               dtype in FP8_DTYPES, symmetric)
    k = x.shape[-1] if x.dim() else 1
    if gran == Granularity.PER_GROUP and (size < 1 or k % size):
        raise _lib.invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (size, k))
    if scale_dtype not in (torch.float32, x.dtype, E8M0, torch.int32) or (
            scale_dtype == torch.int32 and gran != Granularity.PER_GROUP):
        raise _lib.invalid("scale_dtype %s: float32, x's %s, float8_e8m0fnu or, per group, int32 (UE8M0X4)"
                           % (scale_dtype, x.dtype))
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    bound = 0.0 if amax_bound is None else _core.number("amax_bound", amax_bound)
    q, s, z = _ops(x).dynamic_quant(x, int(gran), size, dtype, bool(symmetric), qmin, qmax, scale_dtype, mn,
                                    bool(pow2_scales), bound, *sr)
    return q, s, (None if symmetric else z)


def linear_weight_sums(w):
    """int32 [N]: the exact sums of the int8 weight w [N, K]'s rows (what asymmetric
    activations need)."""
    _check_cuda("w", w)
    if w.dtype != torch.int8 or w.dim() != 2:
        raise _lib.invalid("w: shape %s dtype %s, expected an int8 (N, K) weight" % (tuple(w.shape), w.dtype))
    return _ops(w).linear_weight_sums(w)


def dynamic_per_token_quant(x, symmetric=True, scale=None, azp=None, dtype=torch.int8, *, rounding="nearest",
                            seed=None, offset=0, rotation_block=None, random_signs=False):
    """vLLM's scaled_int8_quant (and, with an FP8 dtype, scaled_fp8_quant per token): returns (q,
    scales [rows, 1] f32, zero points [rows, 1] int32
    or None). With a static scale (a one-element tensor) x is quantized per tensor with it
    (and azp) and (q, scale, azp) is returned. rounding="stochastic" with an int seed rounds
    each element of x.view(-1, K) up or down by a draw at its row-major index plus offset
    (docs/numerics.md, "Stochastic rounding"), the dynamic scales computed as rounding to
    nearest computes them; with a static scale, as quantize_per_token's stochastic rounding
    with that scale (the same indices). rotation_block (computed scales): each row rotated
    first in blocks of that many elements, random_signs keyed by seed
    (docs/numerics.md, "Rotation")."""
    sr = ()  # (rounding to nearest: the ops' defaults, and the fast path)
    if rounding != "nearest" or seed is not None or offset != 0 or rotation_block is not None or random_signs:
        sr = _sr_args(rounding, seed, offset, rotation_block, random_signs)
        if scale is not None and rotation_block is not None:
            raise _lib.invalid("rotation_block: the fused rotation is dynamic quantize's (scale is None)")
    key = None
    if not sr and type(x) is torch.Tensor and scale is None and symmetric is True and x.dim() >= 1:
        key = ("dtok", x.shape, x.stride(), x.dtype, x.get_device(), dtype)
        prep = _fast.get(key)
        if prep is not None and _eager(x):
            q = torch.empty_like(x, dtype=dtype)
            s = x.new_empty((x.numel() // x.shape[-1], 1), dtype=torch.float32)
            if not _run_rows(prep.plan, prep.args_address, x.data_ptr(), q.data_ptr(), None, s.data_ptr(), None, None,
                             _raw_stream(key[4])):
                return q, s, None
    _check_float("x", x)
    _check_int("dtype", dtype)
    if dtype in FP8_DTYPES and not symmetric:
        raise _lib.invalid("symmetric: FP8 (%s) is symmetric only" % dtype)
    qmin, qmax = _QRANGE.get(dtype, (0, 0))
    if scale is not None:
        _check_cuda("scale", scale)
        if scale.numel() != 1:
            raise _lib.invalid("scale: a static scale has one element, got shape %s" % (tuple(scale.shape),))
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        s = scale.reshape(1).to(torch.float32).expand(rows).contiguous()
        z = None if azp is None else azp.reshape(1).to(torch.int32).expand(rows).contiguous()
        q = _ops(x, s, z).quantize_per_token(x, s, z, dtype, qmin, qmax, *sr[:3])
        return q, scale, azp
    d = _ops(x)
    _last.prep = None
    q, s, z = d.dynamic_per_token_quant(x, bool(symmetric), dtype, qmin, qmax, *sr)
    if key is not None and d is _IMPL and x.is_contiguous() and x.numel():
        _fast_keep(key)
    return q, s, (None if symmetric else z)


def _fused_args(symmetric, group_size, scale, zero_point, out_dtype, quant_min, quant_max):
    """The fused producers' quantization arguments, checked: (group_size as int, 0 per token;
    scale as a float or None; zero_point; qmin; qmax)."""
    qmin, qmax = _qargs(out_dtype, quant_min, quant_max)
    if out_dtype in FP8_DTYPES:
        if not symmetric:
            raise _lib.invalid("symmetric: FP8 (%s) is symmetric only" % out_dtype)
        if zero_point not in (0, None):
            raise _lib.invalid("zero_point: FP8 (%s) has no zero point" % out_dtype)
    if scale is not None:
        if group_size is not None:
            raise _lib.invalid("group_size: a static scale is per tensor")
        if isinstance(scale, torch.Tensor):
            raise _lib.invalid("scale: a static scale is a number (the library takes it on the host)")
        scale = _core.number("scale", scale)
        if not (scale > 0 and scale != float("inf")):
            raise _lib.invalid("scale (%r) must be finite and > 0" % scale)
        return 0, scale, _core.integer("zero_point", zero_point), qmin, qmax
    if zero_point not in (0, None):
        raise _lib.invalid("zero_point: only with a static scale (dynamic zero points come from symmetric=False)")
    g = 0 if group_size is None else _core.integer("group_size", group_size)
    if group_size is not None and g < 1:
        raise _lib.invalid("group_size (%d) must be >= 1" % g)
    if symmetric and qmax <= 0 and out_dtype not in FP8_DTYPES:
        raise _lib.invalid("quant_max (%d) must be > 0 for symmetric dynamic quantization" % qmax)
    if not symmetric and qmax <= qmin:
        raise _lib.invalid("quant_max (%d) must be > quant_min (%d) for asymmetric quantization" % (qmax, qmin))
    return g, None, 0, qmin, qmax


def _fused_result(q, scales, zps, vals, symmetric, scale, zero_point, return_values):
    if scale is not None:
        out = (q, scale, zero_point)
    else:
        out = (q, scales, None if symmetric else zps)
    return out + (vals,) if return_values else out


def _scale_dtype(scale_dtype, x):
    sd = torch.float32 if scale_dtype is None else scale_dtype
    if sd not in (torch.float32, x.dtype):
        raise _lib.invalid("scale_dtype %s: the fused producers write float32 or x's %s scales" % (sd, x.dtype))
    return sd


def _fused_sr(rounding, seed, offset, rotation_block=None, random_signs=False, x=None, half=False, group_size=None,
              mx=False):
    """The fused ops' trailing (sr, seed, offset[, rot, signs]) of a public call's rounding and
    rotation options, checked; () rounding to nearest, unrotated (the ops' defaults: the calls,
    recorded graphs and fast paths of before). The rotation's block is checked against the
    output's last dimension where x (a tensor) tells it (half: the gated ops' [..., 2 D]), and
    refused per group (group_size given; integer and FP8 storage: not mx) by name."""
    if _plain(rounding, seed, offset, rotation_block, random_signs):
        return ()
    sr = _tail(_sr_args(rounding, seed, offset, rotation_block, random_signs))
    if len(sr) > 3:
        k = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() else None
        d = (k // 2 if half else k) if k is not None and not (half and k % 2) else sr[3]
        _core.fused_rotation(sr[3], Granularity.PER_GROUP if group_size is not None and not mx else None, d)
    return sr


def rms_norm_quant(x, weight, eps, residual=None, symmetric=True, group_size=None, out_dtype=torch.int8,
                   return_normed=False, scale=None, zero_point=0, quant_min=None, quant_max=None, scale_dtype=None, *,
                   rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """(residual add +) RMSNorm of x [..., D] with weight [D] (x's dtype), quantized in the same
    pass (docs/numerics.md, "Fused producers"): h = x + residual (written back to residual, in
    place) or x; n = (h * rstd) * weight, rstd = 1 / sqrt(mean(h^2) + eps), rounded to x's type;
    then n quantized exactly as dynamic_per_token_quant (group_size None) or per group of
    group_size would, symmetric or not. Returns (q, scales [rows, 1] or [rows, D / group_size]
    f32, zero points (int32, like scales) or None), and n as a fourth element with
    return_normed. With scale (a number), n is quantized per tensor with scale and zero_point
    instead, and (q, scale, zero_point[, n]) is returned. rounding="stochastic" with an int
    seed (keyword-only; int8, uint8 or FP8): n quantized as the stochastic quantize does,
    bit for bit quantize_per_token / quantize_per_group (with the scales returned, which are
    those rounding to nearest computes) or quantize_per_tensor (the static scale) of n with
    rounding="stochastic", the same seed and offset: element (r, c) of n.view(-1, D) draws at
    index offset + r * D + c (docs/numerics.md, "Stochastic rounding"). rotation_block
    (keyword-only; per token or per tensor, not per group), random_signs keyed by seed: n
    rotated first, bit for bit hadamard(n, rotation_block, seed=...) then the same call
    (dynamic_quant per token: the scales of the rotated rows; quantize_per_tensor with the
    static scale), either rounding; n as returned is not rotated. Without return_normed the
    library keeps n in a workspace of rows * D elements for that second pass."""
    sr = _fused_sr(rounding, seed, offset, rotation_block, random_signs, x, group_size=group_size)
    key = None
    if not sr and type(x) is torch.Tensor and type(weight) is torch.Tensor and type(eps) is float and \
            symmetric is True and group_size is None and scale is None and type(zero_point) is int and \
            zero_point == 0 and quant_min is None and quant_max is None and not return_normed and (residual is None or type(residual) is torch.Tensor) and x.dim():
        key = ("rms", x.shape, x.stride(), x.dtype, x.get_device(), weight.shape, weight.stride(), weight.dtype,
               weight.get_device(), None if residual is None else (residual.shape, residual.stride(),
                                                                    residual.get_device()), eps, out_dtype,
               scale_dtype)
        prep = _fast.get(key)
        if prep is not None and _eager(x, weight, residual):
            q = torch.empty_like(x, dtype=out_dtype)
            s = x.new_empty((x.numel() // x.shape[-1], 1), dtype=scale_dtype or torch.float32)
            if not _run_rows(prep.plan, prep.args_address, x.data_ptr(), q.data_ptr(), None, s.data_ptr(),
                             weight.data_ptr(), None if residual is None else residual.data_ptr(),
                             _raw_stream(key[4])):
                return q, s, None
    _last.prep = None
    out = _rms_norm_quant(x, weight, eps, residual, symmetric, group_size, out_dtype, return_normed, scale,
                          zero_point, quant_min, quant_max, scale_dtype, sr)
    if key is not None and x.is_contiguous() and weight.is_contiguous() and x.numel() and \
            (residual is None or residual.is_contiguous()) and _ops(x, weight, residual) is _IMPL:
        _fast_keep(key)
    return out


def _rms_norm_quant(x, weight, eps, residual, symmetric, group_size, out_dtype, return_normed, scale, zero_point,
                    quant_min, quant_max, scale_dtype, sr=()):
    # sr: _fused_sr's ints, the op's trailing arguments (none: rounding to nearest)
    _check_float("x", x)
    _check_cuda("weight", weight)
    if weight.dtype != x.dtype or weight.dim() != 1 or weight.shape[0] != (x.shape[-1] if x.dim() else -1):
        raise _lib.invalid("weight: shape %s dtype %s, expected (%d,) of x's %s"
                           % (tuple(weight.shape), weight.dtype, x.shape[-1] if x.dim() else 0, x.dtype))
    if residual is not None:
        _check_cuda("residual", residual)
        if residual.dtype != x.dtype or tuple(residual.shape) != tuple(x.shape):
            raise _lib.invalid("residual: shape %s dtype %s, expected x's %s %s"
                               % (tuple(residual.shape), residual.dtype, tuple(x.shape), x.dtype))
    eps = _core.number("eps", eps)
    if not (eps >= 0 and eps != float("inf")):
        raise _lib.invalid("eps (%r) must be finite and >= 0" % eps)
    g, scale, zero_point, qmin, qmax = _fused_args(symmetric, group_size, scale, zero_point, out_dtype, quant_min,
                                                   quant_max)
    if g and x.dim() and x.shape[-1] % g:
        raise _lib.invalid("group_size (%d) must divide the last dimension (%d)" % (g, x.shape[-1]))
    q, s, z, n = _ops(x, weight, residual).rms_norm_quant(x, weight, residual, eps, bool(symmetric), g, scale,
                                                          zero_point, out_dtype, qmin, qmax, bool(return_normed),
                                                          _scale_dtype(scale_dtype, x), *sr)
    return _fused_result(q, s, z, n, symmetric, scale, zero_point, return_normed)


def _gated(activation, x, symmetric, group_size, out_dtype, return_act, scale, zero_point, quant_min, quant_max,
           scale_dtype=None, rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    # (stochastic rounding and the rotation never take the fast path)
    sr = _fused_sr(rounding, seed, offset, rotation_block, random_signs, x, True, group_size)
    key = None
    if not sr and type(x) is torch.Tensor and symmetric is True and group_size is None and scale is None and \
            type(zero_point) is int and zero_point == 0 and quant_min is None and quant_max is None and not return_act and x.dim():
        key = ("gated", int(activation), x.shape, x.stride(), x.dtype, x.get_device(), out_dtype, scale_dtype)
        prep = _fast.get(key)
        if prep is not None and _eager(x):
            shape = x.shape[:-1] + (x.shape[-1] // 2,)
            q = x.new_empty(shape, dtype=out_dtype)
            s = x.new_empty((x.numel() // x.shape[-1], 1), dtype=scale_dtype or torch.float32)
            if not _run_rows(prep.plan, prep.args_address, x.data_ptr(), q.data_ptr(), None, s.data_ptr(), None, None,
                             _raw_stream(key[5])):
                return q, s, None
    _last.prep = None
    out = _gated_general(activation, x, symmetric, group_size, out_dtype, return_act, scale, zero_point, quant_min,
                         quant_max, scale_dtype, sr)
    if key is not None and x.is_contiguous() and x.numel() and _ops(x) is _IMPL:
        _fast_keep(key)
    return out


def _gated_general(activation, x, symmetric, group_size, out_dtype, return_act, scale, zero_point, quant_min,
                   quant_max, scale_dtype, sr=()):
    _check_float("x", x)
    if x.dim() == 0 or x.shape[-1] % 2:
        raise _lib.invalid("x: shape %s, expected [..., 2 D] (gate, then up)" % (tuple(x.shape),))
    g, scale, zero_point, qmin, qmax = _fused_args(symmetric, group_size, scale, zero_point, out_dtype, quant_min,
                                                   quant_max)
    d = x.shape[-1] // 2
    if g and d % g:
        raise _lib.invalid("group_size (%d) must divide D (%d)" % (g, d))
    q, s, z, a = _ops(x).gated_quant(x, int(activation), bool(symmetric), g, scale, zero_point, out_dtype, qmin,
                                     qmax, bool(return_act), _scale_dtype(scale_dtype, x), *sr)
    return _fused_result(q, s, z, a, symmetric, scale, zero_point, return_act)


def silu_and_mul_quant(x, symmetric=True, group_size=None, out_dtype=torch.int8, return_act=False, scale=None,
                       zero_point=0, quant_min=None, quant_max=None, scale_dtype=None, *, rounding="nearest",
                       seed=None, offset=0, rotation_block=None, random_signs=False):
    """a = silu(gate) * up of x [..., 2 D] (gate = x[..., :D], up = x[..., D:]), rounded to x's
    type, quantized in the same pass as rms_norm_quant quantizes n. Returns (q [..., D], scales,
    zero points or None[, a]); with a static scale, (q, scale, zero_point[, a]).
    rounding="stochastic", seed, offset, rotation_block, random_signs (keyword-only): as
    rms_norm_quant's, a in n's place (element (r, c) of a.view(-1, D) at index
    offset + r * D + c)."""
    return _gated(Activation.SILU, x, symmetric, group_size, out_dtype, return_act, scale, zero_point, quant_min,
                  quant_max, scale_dtype, rounding, seed, offset, rotation_block, random_signs)


def gelu_tanh_and_mul_quant(x, symmetric=True, group_size=None, out_dtype=torch.int8, return_act=False, scale=None,
                            zero_point=0, quant_min=None, quant_max=None, scale_dtype=None, *, rounding="nearest",
                            seed=None, offset=0, rotation_block=None, random_signs=False):
    """silu_and_mul_quant with GELU in its tanh form: a = gelu(gate, approximate="tanh") * up
    (the contract's own exp and tanh, docs/numerics.md); rounding, seed, offset,
    rotation_block, random_signs as silu_and_mul_quant's."""
    return _gated(Activation.GELU_TANH, x, symmetric, group_size, out_dtype, return_act, scale, zero_point,
                  quant_min, quant_max, scale_dtype, rounding, seed, offset, rotation_block, random_signs)


def _w_sums(w, w_sums, asymmetric):
    if not asymmetric:
        return None
    if w_sums is None:
        return linear_weight_sums(w)
    _check_cuda("w_sums", w_sums)
    return w_sums


def int8_linear(a, w, a_scales, w_scales, bias=None, out_dtype=torch.float16, *, a_zero_points=None, w_sums=None,
                quant_min=None, quant_max=None):
    """SmoothQuantLinear: y = (a W^T) * a_scales[m] * w_scales[n] (+ bias), a int8 or uint8
    [..., K] (its values in [quant_min, quant_max], the dtype's range by default), w int8
    [N, K], w_scales [N]; a_scales [M] per token or one element per tensor (read on the GPU),
    or a number (per tensor, the library's host scale). a_zero_points (int32 [M], or a
    number with a number a_scales) makes the activations asymmetric: acc - azp[m] * wsum[n],
    with w_sums (int32 [N], linear_weight_sums(w)) computed when not given."""
    _check_cuda("a", a)
    _check_cuda("w", w)
    _check_cuda("w_scales", w_scales)
    if a.dtype not in (torch.int8, torch.uint8) or w.dtype != torch.int8:
        raise _lib.invalid("a must be int8 or uint8 and w int8 (got %s, %s)" % (a.dtype, w.dtype))
    if out_dtype not in FLOAT_DTYPES:
        raise _lib.invalid("out_dtype %s is not a float type" % out_dtype)
    qmin, qmax = _qargs(a.dtype, quant_min, quant_max)
    if not isinstance(a_scales, torch.Tensor):
        a_scale = _core.number("a_scales", a_scales)
        if isinstance(a_zero_points, torch.Tensor):
            raise _lib.invalid("a_zero_points: a number with a number a_scales (per tensor)")
        asym = a_zero_points is not None
        zp = _core.integer("a_zero_points", a_zero_points) if asym else 0
        ws = _w_sums(w, w_sums, asym)
        return _ops(a, w, w_scales, bias, ws).int8_linear_per_tensor(a, w, a_scale, zp, w_scales, bias, out_dtype,
                                                                     asym, ws, qmin, qmax)
    _check_cuda("a_scales", a_scales)
    if a_scales.dtype != w_scales.dtype:
        raise _lib.invalid("a_scales (%s) and w_scales (%s) must have one dtype" % (a_scales.dtype, w_scales.dtype))
    m = a.numel() // a.shape[-1] if a.shape[-1] else 0
    if a_scales.numel() not in (1, m):
        raise _lib.invalid("a_scales: %d elements, expected %d (per token) or 1 (per tensor)" % (a_scales.numel(), m))
    if a_zero_points is not None:
        _check_cuda("a_zero_points", a_zero_points)
        if a_zero_points.numel() != a_scales.numel():
            raise _lib.invalid("a_zero_points: %d elements, expected a_scales' %d" % (a_zero_points.numel(),
                                                                                     a_scales.numel()))
    ws = _w_sums(w, w_sums, a_zero_points is not None)
    return _ops(a, w, a_scales, w_scales, bias, a_zero_points, ws).int8_linear(
        a, w, a_scales, w_scales, bias, out_dtype, a_zero_points, ws, qmin, qmax)


def quantized_linear(x, w, w_scales, bias=None, *, symmetric=True, dtype=torch.int8, quant_min=None,
                     quant_max=None, w_sums=None):
    """QuantizedLinear: x float [..., K] quantized per token on the GPU (into dtype's
    [quant_min, quant_max]; symmetric=False: asymmetric, with w_sums computed when not given),
    then the int8 GEMM with w int8 [N, K] and w_scales [N]; the output has x's dtype."""
    _check_float("x", x)
    _check_cuda("w", w)
    _check_cuda("w_scales", w_scales)
    if w.dtype != torch.int8:
        raise _lib.invalid("w must be int8 (got %s)" % w.dtype)
    if dtype not in (torch.int8, torch.uint8):
        raise _lib.invalid("dtype %s: the activations are int8 or uint8" % dtype)
    qmin, qmax = _qargs(dtype, quant_min, quant_max)
    ws = _w_sums(w, w_sums, not symmetric)
    return _ops(x, w, w_scales, bias, ws).quantized_linear(x, w, w_scales, bias, dtype, bool(symmetric), qmin, qmax,
                                                           ws)


_FP8_OUT = (torch.float32, torch.float16, torch.bfloat16)


def fp8_linear(x, w, scale_a, scale_b, bias=None, out_dtype=torch.bfloat16):
    """FP8Linear on FP8 tensor cores (sm_89 and later): y = (x W^T) * scale_a * scale_b (+ bias),
    what torch._scaled_mm(x, w.t(), scale_a, scale_b, bias, out_dtype) computes, with w in
    nn.Linear's layout. x float8_e4m3fn or float8_e5m2 [..., K] (rows x.reshape(-1, K), read
    in place where they are evenly strided), w float8_e4m3fn [N, K], contiguous (refused, not
    copied, otherwise: a weight is read every call). float32 scales, tensorwise one element
    each (0-d or one-element tensors), rowwise scale_a [M] or [M, 1] (a row of x each) and
    scale_b [N] or [1, N] (an output channel each), or blockwise (DeepSeek-V3's recipe)
    scale_a [M, ceil(K / 128)] (a row's 1 x 128 groups; row-major or MN-major, torch's
    layout, read in place) and scale_b [ceil(N / 128), ceil(K / 128)] (w's 128 x 128 blocks,
    contiguous) or its transpose view (torch._scaled_mm's scale_b); bias [N] of out_dtype
    (float32, float16 or bfloat16). y = out_dtype((acc * scale_a) * scale_b + bias), each step
    rounded in f32, acc the tensor cores' sums (not IEEE f32 sums; within 2^-9 sum_k |x_k w_k|
    of the exact one); blockwise, each 128-element K block's sum joins acc by an fma with
    f32(scale_a * scale_b) and y = out_dtype(acc + bias). Returns [..., N] of out_dtype."""
    _check_cuda("x", x)
    _check_cuda("w", w)
    _check_cuda("scale_a", scale_a)
    _check_cuda("scale_b", scale_b)
    if x.dtype not in FP8_DTYPES:
        raise _lib.invalid("x: dtype %s, expected torch.float8_e4m3fn or torch.float8_e5m2" % x.dtype)
    if _E4M3 is None or w.dtype != _E4M3:
        raise _lib.invalid("w: dtype %s, expected torch.float8_e4m3fn (the weights are E4M3)" % w.dtype)
    if out_dtype not in _FP8_OUT:
        raise _lib.invalid("out_dtype %s: float32, float16 or bfloat16" % out_dtype)
    if x.dim() == 0:
        raise _lib.invalid("x: expected at least 1 dimension [..., K]")
    k = x.shape[-1]
    if w.dim() != 2 or w.shape[1] != k:
        raise _lib.invalid("w: shape %s, expected (N, %d): [N, K] with K x's last dimension (nn.Linear's weight; "
                           "torch._scaled_mm's second operand is its transpose)" % (tuple(w.shape), k))
    if not w.is_contiguous():
        raise _lib.invalid("w: strides %s: expected a contiguous [N, K] weight (K contiguous, rows K apart)"
                           % (tuple(w.stride()),))
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise _lib.invalid("%s: dtype %s, expected torch.float32" % (name, s.dtype))
    n = w.shape[0]
    m = x.shape[:-1].numel()
    mode = _core.fp8_scales_mode(m, n, k, scale_a.shape, scale_b.shape)
    if bias is not None:
        _check_cuda("bias", bias)
        if bias.dtype != out_dtype or tuple(bias.shape) != (n,):
            raise _lib.invalid("bias: shape %s dtype %s, expected (%d,) of out_dtype %s" % (tuple(bias.shape),
                                                                                          bias.dtype, n, out_dtype))
    for name, t in (("w", w), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise _lib.invalid("%s is on %s, expected %s like x" % (name, t.device, x.device))
    return _ops(x, w, scale_a, scale_b, bias).fp8_linear(x, w, scale_a, scale_b, bias, out_dtype, _FP8_MODES[mode])


def fp8_quantized_linear(x, w, scale_b, bias=None, act_dtype=None):
    """FP8 QuantizedLinear in one call (sm_89 and later): x float32, float16 or bfloat16
    [..., K] quantized on the GPU to act_dtype (torch.float8_e4m3fn, the default, or
    torch.float8_e5m2), then multiplied by the float8_e4m3fn weight w [N, K] (contiguous).
    scale_b float32: [N] (or [1, N]) per output channel, with x quantized per token; or the
    weight's 128 x 128 block scales [ceil(N / 128), K / 128] (K a multiple of 128), with x
    quantized per 1 x 128 group (blockwise). The same bits as dynamic quantize then
    fp8_linear; bias [N] of x's type; returns [..., N] of x's type."""
    _check_cuda("x", x)
    _check_cuda("w", w)
    _check_cuda("scale_b", scale_b)
    _check_float("x", x)
    act_dtype = act_dtype or _E4M3
    if act_dtype not in FP8_DTYPES:
        raise _lib.invalid("act_dtype %s: torch.float8_e4m3fn or torch.float8_e5m2" % act_dtype)
    if _E4M3 is None or w.dtype != _E4M3 or w.dim() != 2 or not w.is_contiguous():
        raise _lib.invalid("w: dtype %s shape %s, expected a contiguous torch.float8_e4m3fn [N, K] weight"
                           % (w.dtype, tuple(w.shape)))
    n, k = w.shape
    if x.dim() == 0 or x.shape[-1] != k:
        raise _lib.invalid("x: shape %s, expected [..., %d]" % (tuple(x.shape), k))
    blockwise = tuple(scale_b.shape) not in ((n,), (1, n))
    if blockwise and tuple(scale_b.shape) != ((n + 127) // 128, k // 128):
        raise _lib.invalid("scale_b: shape %s, expected [%d] (per channel) or [%d, %d] (128 x 128 blocks)"
                           % (tuple(scale_b.shape), n, (n + 127) // 128, k // 128))
    for name, t in (("w", w), ("scale_b", scale_b), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise _lib.invalid("%s is on %s, expected %s like x" % (name, t.device, x.device))
    sb = scale_b if blockwise else scale_b.reshape(-1)
    return _ops(x, w, sb, bias).fp8_quantized_linear(x, w, sb, bias, act_dtype, blockwise)


class QuantizedLinear(torch.nn.Module):
    """nn.Linear with an int8 weight (per output channel, f32 scales) and activations
    quantized per token on the fly (W8A8)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=torch.float16):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight", torch.zeros((out_features, in_features), dtype=torch.int8, device=device))
        self.register_buffer("w_scales", torch.ones(out_features, dtype=torch.float32, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    @classmethod
    def from_float(cls, linear):
        w = linear.weight.detach()
        _check_float("linear.weight", w)
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, w.device, w.dtype)
        q, s, _ = dynamic_per_token_quant(w, symmetric=True)
        m.weight.copy_(q)
        m.w_scales.copy_(s.reshape(-1))
        if linear.bias is not None:
            m.bias.copy_(linear.bias.detach())
        return m

    def forward(self, x):
        bias = self.bias
        if bias is not None and bias.dtype != x.dtype:
            bias = bias.to(x.dtype)
        return quantized_linear(x, self.weight, self.w_scales, bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)


class FP8QuantizedLinear(torch.nn.Module):
    """nn.Linear with an E4M3 weight and activations quantized to E4M3 on the fly, in one
    library call (the library's FP8 QuantizedLinear; sm_89 and later). Rowwise (the default):
    the weight per output channel and the activations per token, both as
    dynamic_per_token_quant does (s = amax / 448 a row, 1 for an all-zero row, q = e4m3(x / s)
    rounded to nearest even). Blockwise (DeepSeek-V3's recipe; in_features a multiple of 128):
    the weight per 128 x 128 block (w_scales [ceil(out / 128), in / 128]) and the activations
    per 1 x 128 group, each block's sum scaled as it is promoted."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=torch.bfloat16, blockwise=False):
        super().__init__()
        if _E4M3 is None:
            raise _lib.NotSupportedError("FP8QuantizedLinear: this torch has no torch.float8_e4m3fn", 2)
        if blockwise and in_features % 128:
            raise _lib.invalid("in_features (%d): blockwise needs a multiple of 128" % in_features)
        self.in_features, self.out_features, self.blockwise = in_features, out_features, bool(blockwise)
        ws = ((out_features + 127) // 128, in_features // 128) if blockwise else (out_features,)
        self.register_buffer("weight", torch.zeros((out_features, in_features), dtype=_E4M3, device=device))
        self.register_buffer("w_scales", torch.ones(ws, dtype=torch.float32, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    @classmethod
    def from_float(cls, linear, blockwise=False):
        w = linear.weight.detach()
        _check_float("linear.weight", w)
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, w.device, w.dtype, blockwise)
        if blockwise:
            q, s, _ = dynamic_quant(w, "block", block_size=128, dtype=_E4M3)
        else:
            q, s, _ = dynamic_per_token_quant(w, symmetric=True, dtype=_E4M3)
        m.weight.copy_(q)
        m.w_scales.copy_(s.reshape(m.w_scales.shape))
        if linear.bias is not None:
            m.bias.copy_(linear.bias.detach())
        return m

    def forward(self, x):
        _check_float("x", x)
        if x.dtype not in _FP8_OUT:
            raise _lib.invalid("x: dtype %s, expected float32, float16 or bfloat16 (the output's type)" % x.dtype)
        if x.shape[-1] != self.in_features:
            raise _lib.invalid("x: shape %s, expected [..., %d]" % (tuple(x.shape), self.in_features))
        bias = self.bias
        if bias is not None and bias.dtype != x.dtype:
            bias = bias.to(x.dtype)
        return _ops(x, self.weight, self.w_scales, bias).fp8_quantized_linear(x, self.weight, self.w_scales, bias,
                                                                               _E4M3, self.blockwise)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s%s" % (self.in_features, self.out_features,
                                                               self.bias is not None,
                                                               ", blockwise" if self.blockwise else "")


# ---- microscaling: the public functions (the DLPack front end's, on torch tensors) ------------------
def _mx_elem(dtype):
    """The element type's DType value: "e2m1" or torch.float4_e2m1fn_x2, torch.float8_e4m3fn,
    torch.float8_e5m2 (or their names)"""
    name = str(getattr(dtype, "name", dtype)).split(".")[-1].lower()
    table = {"e2m1": DType.E2M1, "float4_e2m1fn_x2": DType.E2M1, "float8_e4m3fn": DType.E4M3, "e4m3": DType.E4M3,
             "float8_e5m2": DType.E5M2, "e5m2": DType.E5M2}
    if name not in table:
        raise _lib.invalid("dtype %r: the microscaling elements are e2m1 (torch.float4_e2m1fn_x2), "
                           "torch.float8_e4m3fn and torch.float8_e5m2" % (dtype,))
    return int(table[name])


def _mx_nv(scale_dtype):
    """NVFP4's E4M3 scales (True) or UE8M0 (False, the default)"""
    name = str(getattr(scale_dtype, "name", scale_dtype)).split(".")[-1].lower()
    if scale_dtype is None or name in ("float8_e8m0fnu", "ue8m0"):
        return False
    if name in ("float8_e4m3fn", "e4m3"):
        return True
    raise _lib.invalid("scale_dtype %r: float8_e8m0fnu (UE8M0) or float8_e4m3fn (NVFP4)" % (scale_dtype,))


def _mx_choice(name, value, table):
    if value not in table:
        raise _lib.invalid("%s (%r) must be one of %s" % (name, value, ", ".join(sorted(table))))
    return table[value]


def _mx_group(group_size, k, elem):
    g = _core.integer("group_size", group_size)
    if g < 1 or k % g:
        raise _lib.invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (g, k))
    if elem == int(DType.E2M1) and g % 2:
        raise _lib.invalid("group_size (%d) is odd: E2M1 packs two elements a byte" % g)
    return g


def mx_quant(x, *, group_size=32, dtype="e2m1", scales=None, tensor_scale=None, scale_dtype=None, scale_layout="row",
             scale_rule="default", amax_bound=None, rounding="nearest", seed=None, offset=0, rotation_block=None,
             random_signs=False):
    """Microscaling quantize of x [..., K] in groups of group_size along the row
    (docs/numerics.md, "Microscaling"), as baracuda_quant.dlpack.mx_quant on torch tensors:
    codes are torch.float4_e2m1fn_x2 [..., K / 2] for "e2m1" (uint8 on a torch without the
    type), else the float8 type [..., K]. With scales (float8_e8m0fnu, or float8_e4m3fn with
    tensor_scale for NVFP4) returns q; without, dynamic quantize returns (q, scales, tensor
    scale or None). rounding="stochastic" with an int seed rounds each element up or down
    by a draw at its row-major index plus offset (docs/numerics.md, "Stochastic rounding"):
    the same seed and offset give the same bits on every GPU and batch split. rotation_block:
    x rotated first, in blocks of that many elements along the row (hadamard's forward pass,
    random_signs keyed by seed), in the same pass."""
    _check_float("x", x)
    sr = _sr_args(rounding, seed, offset, rotation_block, random_signs)
    elem = _mx_elem(dtype)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    k = x.shape[-1] if x.dim() else 1
    g = _mx_group(group_size, k, elem)
    if scales is not None:
        if scale_rule != "default" or amax_bound is not None:
            raise _lib.invalid("scale_rule and amax_bound: dynamic quantize's (scales were given)")
        return _ops(x).mx_quant(x, scales, tensor_scale, g, elem, layout, *sr)
    rule = _mx_choice("scale_rule", scale_rule, _core.MX_RULES)
    nv = _mx_nv(scale_dtype)
    bound = 0.0 if amax_bound is None else _core.number("amax_bound", amax_bound)
    q, s, t = _ops(x).mx_dynamic_quant(x, tensor_scale, g, elem, nv, layout, rule, bound, *sr)
    return q, s, (t if nv and tensor_scale is None else None)


def mx_dequant(q, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
               out_dtype=torch.float32, rotation_block=None, random_signs=False, seed=None):
    """Microscaling dequantize of codes q (mx_quant's) with their scales: out_dtype [..., K];
    with rotation_block, rotated back after (the inverse of mx_quant's rotation)."""
    _, s, _, rb, signs = _sr_args("nearest", seed, 0, rotation_block, random_signs)
    _check_cuda("q", q)
    elem = _mx_elem(dtype)
    if out_dtype not in FLOAT_DTYPES:
        raise _lib.invalid("out_dtype %s is not a float type" % out_dtype)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    k = (q.shape[-1] if q.dim() else 1) * (2 if elem == int(DType.E2M1) else 1)
    return _ops(q).mx_dequant(q, scales, tensor_scale, _mx_group(group_size, k, elem), elem, layout, out_dtype, s, rb,
                              signs)


def _mx_floats(name, x, scales, group_size, dtype, tensor_scale, scale_layout):
    _check_float(name, x)
    elem = _mx_elem(dtype)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    return elem, layout, _mx_group(group_size, x.shape[-1] if x.dim() else 1, elem)


def mx_fake_quant(x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
                  rounding="nearest", seed=None, offset=0):
    """Microscaling fake quantize: mx_dequant(mx_quant(x, scales)) bit for bit (with the same
    rounding options), in x's type; its gradient is the straight-through estimator
    (mx_fake_quant_backward)."""
    sr = _sr_args(rounding, seed, offset)[:3]
    elem, layout, g = _mx_floats("x", x, scales, group_size, dtype, tensor_scale, scale_layout)
    return _ops(x, scales).mx_fake_quant(x, scales, tensor_scale, g, elem, layout, *sr)


def mx_fake_quant_backward(dy, x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row"):
    """dx = dy where |x / scale| <= the element's max, else 0."""
    elem, layout, g = _mx_floats("x", x, scales, group_size, dtype, tensor_scale, scale_layout)
    return _ops(dy, x).mx_fake_quant_backward(dy, x, scales, tensor_scale, g, elem, layout)


def mx_quant_backward(dy, x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row"):
    """dx = dy / scale where |x / scale| <= the element's max, else 0."""
    elem, layout, g = _mx_floats("x", x, scales, group_size, dtype, tensor_scale, scale_layout)
    return _ops(dy, x).mx_quant_backward(dy, x, scales, tensor_scale, g, elem, layout)


def mx_dequant_backward(dy, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row"):
    """dx = dy * scale (dy shaped like the dequantized output)."""
    elem, layout, g = _mx_floats("dy", dy, scales, group_size, dtype, tensor_scale, scale_layout)
    return _ops(dy).mx_dequant_backward(dy, scales, tensor_scale, g, elem, layout)


def _fused_mx_args(d, group_size, dtype, scale_dtype, scale_layout, scale_rule):
    elem = _mx_elem(dtype)
    return (_mx_group(group_size, d, elem), elem, _mx_nv(scale_dtype),
            _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS), _mx_choice("scale_rule", scale_rule, _core.MX_RULES))


def _fused_mx_result(out, nv, tensor_scale, return_values):
    q, s, g, v = out
    res = (q, s, g if nv and tensor_scale is None else None)
    return res + (v,) if return_values else res


def rms_norm_mx_quant(x, weight, eps, residual=None, *, group_size=32, dtype="e2m1", scale_dtype=None,
                      tensor_scale=None, scale_layout="row", scale_rule="default", return_normed=False,
                      rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """(residual add +) RMSNorm emitting MXFP8, MXFP4 or NVFP4 in one pass (the DLPack front
    end's rms_norm_mx_quant on torch tensors): (q, scales, tensor scale or None[, n]); the
    residual (when given) receives h = x + residual in place. rounding="stochastic" (seed,
    offset), rotation_block and random_signs: as mx_quant takes them, bit for bit mx_quant of
    n (unrotated, as returned) with the same options (the scales and tensor scale too)."""
    sr = _fused_sr(rounding, seed, offset, rotation_block, random_signs, x, mx=True)
    _check_float("x", x)
    g, elem, nv, layout, rule = _fused_mx_args(x.shape[-1] if x.dim() else 1, group_size, dtype, scale_dtype,
                                               scale_layout, scale_rule)
    out = _ops(x, weight, residual).rms_norm_mx_quant(x, weight, residual, float(eps), g, elem, nv, tensor_scale,
                                                      layout, rule, bool(return_normed), *sr)
    return _fused_mx_result(out, nv, tensor_scale, return_normed)


def _gated_mx(x, activation, group_size, dtype, scale_dtype, tensor_scale, scale_layout, scale_rule, return_act,
              rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    sr = _fused_sr(rounding, seed, offset, rotation_block, random_signs, x, True, mx=True)
    _check_float("x", x)
    if not x.dim() or x.shape[-1] % 2:
        raise _lib.invalid("x shape %s: the gated op's last dimension holds the gate, then up: it must be even"
                           % (tuple(x.shape),))
    g, elem, nv, layout, rule = _fused_mx_args(x.shape[-1] // 2, group_size, dtype, scale_dtype, scale_layout,
                                               scale_rule)
    out = _ops(x).gated_mx_quant(x, int(activation), g, elem, nv, tensor_scale, layout, rule, bool(return_act), *sr)
    return _fused_mx_result(out, nv, tensor_scale, return_act)


def silu_and_mul_mx_quant(x, *, group_size=32, dtype="e2m1", scale_dtype=None, tensor_scale=None, scale_layout="row",
                          scale_rule="default", return_act=False, rounding="nearest", seed=None, offset=0,
                          rotation_block=None, random_signs=False):
    """SiLU(gate) * up of x [..., 2 D] emitting a microscaling format (rms_norm_mx_quant's
    options, rounding and rotation included, and return)."""
    return _gated_mx(x, Activation.SILU, group_size, dtype, scale_dtype, tensor_scale, scale_layout, scale_rule,
                     return_act, rounding, seed, offset, rotation_block, random_signs)


def gelu_tanh_and_mul_mx_quant(x, *, group_size=32, dtype="e2m1", scale_dtype=None, tensor_scale=None,
                               scale_layout="row", scale_rule="default", return_act=False, rounding="nearest",
                               seed=None, offset=0, rotation_block=None, random_signs=False):
    """GELU-tanh(gate) * up of x [..., 2 D] emitting a microscaling format (rms_norm_mx_quant's
    options, rounding and rotation included, and return)."""
    return _gated_mx(x, Activation.GELU_TANH, group_size, dtype, scale_dtype, tensor_scale, scale_layout, scale_rule,
                     return_act, rounding, seed, offset, rotation_block, random_signs)


def hadamard(x, block_size, *, inverse=False, seed=None):
    """The block-diagonal Walsh-Hadamard rotation of x [..., K] in blocks of block_size (a
    power of two, 2 to 256, dividing K), orthonormal; seed: times the random sign vector
    Philox4x32-10 draws from it first; inverse: the inverse transform. Differentiable (the
    gradient is the inverse's). docs/numerics.md, "Rotation"."""
    _check_float("x", x)
    n = _core.integer("block_size", block_size)
    k = x.shape[-1] if x.dim() else 1
    if n < 2 or n > 256 or n & (n - 1) or k % n:
        raise _lib.invalid("block_size (%d) must be a power of two from 2 to 256 dividing the last dimension (%d)"
                           % (n, k))
    s = 0 if seed is None else _core.integer("seed", seed)
    if not 0 <= s < 2**64:
        raise _lib.invalid("seed (%d) must fit 64 bits, unsigned" % s)
    if s >= 2**63:  # (the op's schema carries a signed 64-bit int; the library reads the same bits)
        s -= 2**64
    return _ops(x).hadamard(x, n, bool(inverse), seed is not None, s)


def _bind_package():
    """The package's top-level functions send a plain torch.Tensor here directly from now on."""
    import baracuda_quant as pkg
    pkg._torch_fns.update({name: globals()[name] for name in pkg._OPS})
    pkg._tensor_type = torch.Tensor
    if isinstance(pkg.quantize_per_tensor, types.FunctionType):  # its C stand-in, as for this module's
        fn = _builtin(pkg.quantize_per_tensor)
        if fn is not None:
            pkg.quantize_per_tensor = fn


_bind_package()
