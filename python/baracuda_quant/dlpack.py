"""The operations on any CUDA array that implements __dlpack__ / __dlpack_device__ (CuPy,
JAX, ...), without importing torch. Inputs are read through their DLPack capsules (ctypes);
outputs are allocated with bq_malloc and returned as DeviceArray, itself a DLPack producer
(e.g. cupy.from_dlpack(out), jax.dlpack.from_dlpack(out)); its memory is freed with bq_free
when the last consumer lets it go.

Streams: each function takes stream= (a CUstream handle as an int; None is the legacy
default stream), hands it to the producers' __dlpack__ and launches on it."""
import ctypes
import threading

from . import _core, _lib
from ._enums import Activation, DType, Direction, Granularity, Op
from ._lib import invalid

# ---- DLPack structs (dlpack.h, the unversioned DLManagedTensor)
kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4
kDLFloat8_e4m3fn, kDLFloat8_e5m2, kDLFloat8_e8m0fnu = 10, 12, 14  # DLPack 1.1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

_DL_TO_BQ = {(kDLFloat, 32): DType.F32, (kDLFloat, 64): DType.F64, (kDLFloat, 16): DType.F16,
             (kDLBfloat, 16): DType.BF16, (kDLInt, 8): DType.S8, (kDLUInt, 8): DType.U8, (kDLInt, 32): DType.S32,
             (kDLFloat8_e4m3fn, 8): DType.E4M3, (kDLFloat8_e5m2, 8): DType.E5M2, (kDLFloat8_e8m0fnu, 8): DType.UE8M0}
_BQ_TO_DL = {v: k for k, v in _DL_TO_BQ.items()}

# Capsule names: module constants, since a capsule keeps the pointer to its name.
_DLTENSOR = b"dltensor"
_USED = b"used_dltensor"
_api = ctypes.pythonapi
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
# the destructor sees a capsule being destroyed: raw pointers there, no references taken
_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor)(
    ("PyCapsule_New", _api))


def _call_deleter(managed_ptr):
    m = ctypes.cast(managed_ptr, ctypes.POINTER(DLManagedTensor)).contents
    if m.deleter:
        m.deleter(ctypes.cast(managed_ptr, ctypes.POINTER(DLManagedTensor)))


@_CapsuleDestructor
def _capsule_destructor(cap):
    # an unconsumed capsule (still "dltensor") owns its tensor: release it
    if _IsValidRaw(cap, _DLTENSOR):
        _call_deleter(_GetPointerRaw(cap, _DLTENSOR))


# ---- import -----------------------------------------------------------------------------
class _Imported:
    """A consumed capsule: the view, and the producer's deleter to call when done."""

    def __init__(self, view, managed_ptr):
        self.view, self._managed = view, managed_ptr

    def release(self):
        if self._managed:
            p, self._managed = self._managed, None
            _call_deleter(p)


def _consumer_stream(stream):
    return 1 if not stream else int(stream)  # DLPack: 1 is CUDA's legacy default stream


def view_of_capsule(cap, name="array"):
    """Consume a "dltensor" capsule: a _Imported whose .view describes the CUDA array."""
    if not _IsValid(cap, _DLTENSOR):
        raise invalid("%s: not an unconsumed DLPack capsule" % name)
    ptr = _GetPointer(cap, _DLTENSOR)
    if _SetName(cap, _USED):  # the capsule's destructor now leaves the tensor to us
        raise invalid("%s: could not take the DLPack capsule" % name)
    imp = _Imported(None, ptr)
    try:
        t = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor)).contents.dl_tensor
        if t.device.device_type not in (kDLCUDA, kDLCUDAManaged):
            raise invalid("%s: must be on a CUDA device (DLPack device type %d)" % (name, t.device.device_type))
        dt = _DL_TO_BQ.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
        if dt is None:
            raise invalid("%s: DLPack dtype (code %d, %d bits, %d lanes) is not supported"
                          % (name, t.dtype.code, t.dtype.bits, t.dtype.lanes))
        if not 0 <= t.ndim <= 64 or (t.ndim and not t.shape):
            raise invalid("%s: DLPack ndim %d is not a number of dimensions (0 to 64, with a shape)"
                          % (name, t.ndim))
        shape = tuple(t.shape[i] for i in range(t.ndim))
        if t.strides:
            strides = tuple(t.strides[i] for i in range(t.ndim))
        else:
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        imp.view = _core.View((t.data or 0) + t.byte_offset, shape, strides, dt, t.device.device_id)
    except BaseException:
        imp.release()
        raise
    return imp


def import_array(obj, name="array", stream=None):
    """obj's DLPack view (checks the device first, before asking for a capsule)."""
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise invalid("%s: expected a torch.Tensor or an object with __dlpack__ and __dlpack_device__, got %s"
                      % (name, type(obj).__name__))
    dev_type, _ = obj.__dlpack_device__()
    if int(dev_type) not in (kDLCUDA, kDLCUDAManaged):
        raise invalid("%s: must be on a CUDA device (DLPack device type %d)" % (name, int(dev_type)))
    try:
        cap = obj.__dlpack__(stream=_consumer_stream(stream))
    except TypeError:
        cap = obj.__dlpack__()
    return view_of_capsule(cap, name)


# ---- export -----------------------------------------------------------------------------
class DeviceBuffer:
    """Device memory from bq_malloc, freed with bq_free when the last reference goes."""

    def __init__(self, nbytes):
        p = ctypes.c_void_p()
        _lib.check(_lib.bq_malloc(ctypes.byref(p), max(int(nbytes), 1)))
        self.ptr, self.nbytes = p.value, nbytes

    def __del__(self):
        if getattr(self, "ptr", None):
            _lib.bq_free(self.ptr)
            self.ptr = None


_exports = {}
_exports_lock = threading.Lock()
_next_export = [1]


@_Deleter
def _export_deleter(managed):
    key = managed.contents.manager_ctx
    with _exports_lock:
        _exports.pop(key, None)


class DeviceArray:
    """A device array owned by this package: __dlpack__ / __dlpack_device__, and .ptr, .shape,
    .strides (elements), .dtype (a DType), .device (the CUDA ordinal; -1 exports host memory)."""

    def __init__(self, ptr, shape, dtype, device, owner=None, strides=None, stream=None, keep=()):
        self.ptr, self.shape, self.dtype, self.device = ptr, tuple(shape), DType(dtype), device
        if strides is None:
            strides, acc = [], 1
            for s in reversed(self.shape):
                strides.insert(0, acc)
                acc *= s
        self.strides = tuple(strides)
        self._owner, self._stream, self._keep = owner, stream, tuple(keep)

    @classmethod
    def empty(cls, shape, dtype, device, stream=None):
        n = 1
        for s in shape:
            n *= s
        buf = DeviceBuffer(n * _core.ITEMSIZE[DType(dtype)])
        return cls(buf.ptr, shape, dtype, device, owner=buf, stream=stream)

    def view(self):
        return _core.View(self.ptr, self.shape, self.strides, self.dtype, self.device)

    def __dlpack_device__(self):
        return (kDLCUDA if self.device >= 0 else kDLCPU, max(self.device, 0))

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("DeviceArray.__dlpack__: copy=True is not offered")
        if dl_device is not None and tuple(int(v) for v in dl_device) != self.__dlpack_device__():
            raise BufferError("DeviceArray.__dlpack__: the array is on %s, not %s" % (self.__dlpack_device__(),
                                                                                      tuple(dl_device)))
        if self.device >= 0 and stream is not None and stream != -1:
            consumer = 0 if stream in (1, 2) else int(stream)
            if consumer != (self._stream or 0):
                _lib.check(_lib.bq_synchronize(self._stream))  # the data is ready before the consumer's stream reads it
        m = DLManagedTensor()
        nd = len(self.shape)
        shape = (ctypes.c_int64 * max(nd, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(nd, 1))(*self.strides)
        code, bits = _BQ_TO_DL[self.dtype]
        m.dl_tensor.data = self.ptr
        m.dl_tensor.device = DLDevice(*self.__dlpack_device__())
        m.dl_tensor.ndim = nd
        m.dl_tensor.dtype = DLDataType(code, bits, 1)
        m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        m.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        m.dl_tensor.byte_offset = 0
        with _exports_lock:
            key = _next_export[0]
            _next_export[0] += 1
            _exports[key] = (m, shape, strides, self)  # alive until the consumer's deleter runs
        m.manager_ctx = key
        m.deleter = _export_deleter
        return _New(ctypes.addressof(m), _DLTENSOR, _capsule_destructor)

    def __repr__(self):
        return "DeviceArray(shape=%s, dtype=%s, device=cuda:%d)" % (self.shape, self.dtype.name, self.device)


def live_exports():
    """How many exported capsules have not been released (for tests)."""
    return len(_exports)


# ---- the operations ---------------------------------------------------------------------
def _dtype(d, default):
    if d is None:
        return DType(default)
    if isinstance(d, DType):
        return d
    name = str(getattr(d, "name", d)).split(".")[-1].lower()
    table = {"int8": DType.S8, "uint8": DType.U8, "float32": DType.F32, "float64": DType.F64,
             "float16": DType.F16, "bfloat16": DType.BF16, "int32": DType.S32, "float8_e4m3fn": DType.E4M3,
             "e4m3": DType.E4M3, "float8_e5m2": DType.E5M2, "e5m2": DType.E5M2, "float8_e8m0fnu": DType.UE8M0,
             "ue8m0": DType.UE8M0, "ue8m0x4": DType.S32, "e2m1": DType.E2M1, "float4_e2m1fn_x2": DType.E2M1}
    if name not in table:
        raise invalid("dtype %r is not supported" % (d,))
    return table[name]


def _set_device(index):
    f = getattr(_lib.lib, "bq_set_device", None)
    if f is not None:
        f.restype, f.argtypes = ctypes.c_int, [ctypes.c_int]
        _lib.check(f(index))
    elif index != 0:
        raise _lib.NotSupportedError("this library (%s) has no bq_set_device: DLPack arrays on cuda:%d need "
                                     "0.2.0 or later" % (_lib.VERSION, index), 2)


class _Inputs:
    """Imported arrays, released (their producers' deleters called) on exit."""

    def __init__(self, stream):
        self.stream, self.items = stream, []

    def get(self, obj, name):
        if obj is None:
            return None
        if isinstance(obj, DeviceArray):
            return obj.view()
        imp = import_array(obj, name, self.stream)
        self.items.append(imp)
        return imp.view

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for imp in self.items:
            imp.release()


def _run(device, stream, fn):
    keep = []

    def alloc(n):
        buf = DeviceBuffer(n)
        keep.append(buf)
        return buf, buf.ptr
    fn(stream, alloc)
    return keep


def _rows_view(v, name):
    if len(v.shape) == 0:
        raise invalid("%s: expected at least 1 dimension" % name)
    k = v.shape[-1]
    if len(v.shape) == 2:
        return v
    # rows of a dense leading block: one stride between rows
    lead = v.shape[:-1]
    rows = 1
    for s in lead:
        rows *= s
    expect = v.strides[-2] if len(v.shape) >= 2 else k
    acc = expect
    for s, st in zip(reversed(lead), reversed(v.strides[:-1])):
        if s != 1 and st != acc:
            raise invalid("%s: its rows must be evenly strided (shape %s, strides %s)" % (name, v.shape, v.strides))
        acc *= s
    return _core.View(v.ptr, (rows, k), (expect if len(v.shape) >= 2 else k, v.strides[-1]), v.dtype, v.device)


def _new_like(v, dtype, stream, shape=None):
    return DeviceArray.empty(v.shape if shape is None else shape, dtype, v.device, stream)


_ROWS = (Granularity.PER_TOKEN, Granularity.PER_GROUP, Granularity.PER_BLOCK)


def _affine_out(op, gran, x, out_dtype, stream, scale_arrays=(), direction=Direction.FORWARD, dy=None, **kw):
    """One quantize, dequantize or fake quantize call: forward, x to a new output of
    out_dtype; backward, dy (and x, but for dequantize) to a new dx of dy's type; kw's
    rounding, seed and offset (stochastic rounding's) and rotation_block and random_signs
    (the fused rotation's) checked before any allocation."""
    signs = _core.affine_rot(op, direction, kw.get("rotation_block"), kw.get("random_signs", False))[2]
    _core.affine_sr(op, direction, kw.get("rounding", "nearest"), kw.get("seed"), kw.get("offset", 0), signs)
    if "group_size" in kw:
        kw["group_size"] = _core.integer("group_size", kw["group_size"])
    bwd = direction == Direction.BACKWARD
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        dyv = inp.get(dy, "dy")
        arrays = {k: inp.get(a, k) for k, a in scale_arrays}
        lead = dyv if bwd else xv
        _set_device(lead.device)  # outputs, plans and launches on the input's device
        out = _new_like(lead, lead.dtype if bwd or out_dtype is None else out_dtype, stream)
        ov = out.view()
        if gran in _ROWS:
            xv = None if xv is None else _rows_view(xv, "x")
            dyv = None if dyv is None else _rows_view(dyv, "dy")
            ov = _rows_view(ov, "out")
        if gran in (Granularity.PER_TOKEN, Granularity.PER_CHANNEL):  # [rows, 1] and the like: a vector
            for k in ("scales", "zero_points"):
                a = arrays.get(k)
                if a is not None and len(a.shape) != 1 and a.is_contiguous():
                    arrays[k] = _core.View(a.ptr, (a.numel,), (1,), a.dtype, a.device)
        if bwd:
            if xv is not None and gran in _ROWS and xv.shape[0] > 1 and xv.strides[0] != xv.shape[1]:
                raise invalid("input: rows %d elements apart: the backward pass reads input and writes dx "
                              "with one row stride, and dx is dense" % xv.strides[0])
            io = dict(fl=ov, x=xv, y=None, dy=dyv, dx=ov)
        else:
            io = dict(fl=ov if op == Op.DEQUANTIZE else xv, x=xv, y=ov)
        if op == Op.DEQUANTIZE and not bwd:
            int_type = xv.dtype
        elif op == Op.QUANTIZE and not bwd:
            int_type = out_dtype
        else:
            int_type = kw.pop("int_type")
        out._keep = tuple(_run(lead.device, stream, lambda s, alloc: _core.affine(
            op, direction, gran, int_type=int_type, stream=s, alloc=alloc, **io, **arrays, **kw)))
        return out


def _granularity(scale, axis, group_size, block_size):
    """_core.granularity of the arguments, with its number as _affine_out's keyword."""
    gran, n = _core.granularity(isinstance(scale, (int, float)), axis, group_size, block_size)
    key = "axis" if gran == Granularity.PER_CHANNEL else "group_size"
    return gran, ({key: n} if gran in (Granularity.PER_CHANNEL, Granularity.PER_GROUP, Granularity.PER_BLOCK)
                  else {})


def _params(scale, zero_point, gran):
    if gran == Granularity.PER_TENSOR:
        return (), {"scale": scale, "zero_point": 0 if zero_point is None else zero_point}
    zps = None if isinstance(zero_point, (int, float)) or zero_point is None else zero_point
    if zps is None and zero_point not in (0, None):
        raise invalid("zero_point: an array is needed with a scale array")
    return (("scales", scale), ("zero_points", zps)), {}


def quantize_per_tensor(x, scale, zero_point=0, dtype="int8", quant_min=None, quant_max=None, stream=None, *,
                        rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """q = sat(rne(x / scale) + zero_point), or FP8; rounding="stochastic" (an int seed
    required) rounds x / scale up or down by a draw at the element's row-major index plus
    offset (docs/numerics.md, "Stochastic rounding"), as every quantize and fake quantize
    here takes it. rotation_block: x rotated first, as hadamard(x, rotation_block) would (a
    power of two from 2 to 256 dividing the last dimension), random_signs keyed by seed
    (docs/numerics.md, "Rotation"), as every quantize here takes it."""
    return _affine_out(Op.QUANTIZE, Granularity.PER_TENSOR, x, _dtype(dtype, DType.S8), stream,
                       scale=scale, zero_point=zero_point, qmin=quant_min, qmax=quant_max, rounding=rounding,
                       seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)


def quantize_per_channel(x, scales, zero_points, axis, dtype="int8", quant_min=None, quant_max=None, stream=None, *,
                         rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    return _affine_out(Op.QUANTIZE, Granularity.PER_CHANNEL, x, _dtype(dtype, DType.S8), stream,
                       (("scales", scales), ("zero_points", zero_points)), axis=int(axis), qmin=quant_min,
                       qmax=quant_max, rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                       random_signs=random_signs)


def quantize_per_token(x, scales, zero_points=None, dtype="int8", quant_min=None, quant_max=None, stream=None, *,
                       rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    return _affine_out(Op.QUANTIZE, Granularity.PER_TOKEN, x, _dtype(dtype, DType.S8), stream,
                       (("scales", scales), ("zero_points", zero_points)), qmin=quant_min, qmax=quant_max,
                       rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                       random_signs=random_signs)


def quantize_per_group(x, scales, zero_points, group_size, dtype="int8", quant_min=None, quant_max=None,
                       stream=None, *, rounding="nearest", seed=None, offset=0, rotation_block=None,
                       random_signs=False):
    return _affine_out(Op.QUANTIZE, Granularity.PER_GROUP, x, _dtype(dtype, DType.S8), stream,
                       (("scales", scales), ("zero_points", zero_points)), group_size=group_size,
                       qmin=quant_min, qmax=quant_max, rounding=rounding, seed=seed, offset=offset,
                       rotation_block=rotation_block, random_signs=random_signs)


def quantize_per_block(x, scales, zero_points, block_size, dtype="int8", quant_min=None, quant_max=None,
                       stream=None, *, rounding="nearest", seed=None, offset=0, rotation_block=None,
                       random_signs=False):
    """Per block of x [..., K] viewed as [rows, K]: B x B tiles (B = block_size, edge tiles
    partial), scales [ceil(rows / B), ceil(K / B)] row-major."""
    return _affine_out(Op.QUANTIZE, Granularity.PER_BLOCK, x, _dtype(dtype, DType.S8), stream,
                       (("scales", scales), ("zero_points", zero_points)), group_size=block_size,
                       qmin=quant_min, qmax=quant_max, rounding=rounding, seed=seed, offset=offset,
                       rotation_block=rotation_block, random_signs=random_signs)


def dequantize(q, scale, zero_point=0, *, axis=None, group_size=None, block_size=None, out_dtype="float32",
               stream=None, rounding="nearest", rotation_block=None, random_signs=False, seed=None):
    """y = (q - zero_point) * scale; the granularity as _granularity reads the arguments
    (rounding: "nearest" only). rotation_block: y rotated back, as hadamard(y,
    rotation_block, inverse=True) would (the inverse of the quantize ops' rotation),
    random_signs keyed by seed (docs/numerics.md, "Rotation")."""
    od = _dtype(out_dtype, DType.F32)
    gran, kw = _granularity(scale, axis, group_size, block_size)
    arrays, scalars = _params(scale, zero_point, gran)
    return _affine_out(Op.DEQUANTIZE, gran, q, od, stream, arrays, qmin=None, qmax=None, rounding=rounding,
                       rotation_block=rotation_block, random_signs=random_signs, seed=seed, **kw, **scalars)


def _storage(dtype, quant_min, quant_max):
    """The storage type of a fake quantize or a backward pass: dtype when given (FP8 needs
    it), else the integer type the q-range fits."""
    if dtype is not None:
        return _dtype(dtype, DType.S8)
    if quant_min is None or quant_max is None:
        raise invalid("quant_min and quant_max are required without dtype")
    return _core.int_type_for(_core.integer("quant_min", quant_min), _core.integer("quant_max", quant_max))


def fake_quantize(input, scale, zero_point=0, quant_min=None, quant_max=None, *, dtype=None, axis=None,
                  group_size=None, block_size=None, stream=None, rounding="nearest", seed=None, offset=0,
                  rotation_block=None, random_signs=False):
    """dequantize(quantize(input)) at any granularity (as dequantize reads the arguments),
    into int8/uint8 ranges or, with dtype, FP8 (forward only outside PyTorch); rounding,
    seed, offset: as quantize_per_tensor's. rotation_block, random_signs (keyed by seed):
    input rotated first and the result rotated back, as hadamard(input, rotation_block),
    this call, then hadamard(..., inverse=True) would (docs/numerics.md, "Rotation")."""
    gran, kw = _granularity(scale, axis, group_size, block_size)
    arrays, scalars = _params(scale, zero_point, gran)
    it = _storage(dtype, quant_min, quant_max)
    return _affine_out(Op.FAKE_QUANTIZE, gran, input, None, stream, arrays, qmin=quant_min, qmax=quant_max,
                       int_type=it, rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                       random_signs=random_signs, **kw, **scalars)


def fake_quantize_backward(dy, input, scale, zero_point=0, quant_min=None, quant_max=None, *, dtype=None,
                           axis=None, group_size=None, block_size=None, stream=None, rounding="nearest", seed=None,
                           rotation_block=None, random_signs=False):
    """The straight-through estimator: dx = dy where quantize(input) is in range, else 0
    (either rounding's; rounding: "nearest" only). With the forward's rotation_block,
    random_signs and seed (the signs' key): dx = hadamard(mask * hadamard(dy), inverse=True),
    the mask that of the rotated input."""
    gran, kw = _granularity(scale, axis, group_size, block_size)
    arrays, scalars = _params(scale, zero_point, gran)
    return _affine_out(Op.FAKE_QUANTIZE, gran, input, None, stream, arrays, Direction.BACKWARD, dy,
                       qmin=quant_min, qmax=quant_max, int_type=_storage(dtype, quant_min, quant_max),
                       rounding=rounding, seed=seed, rotation_block=rotation_block, random_signs=random_signs,
                       **kw, **scalars)


def quantize_backward(dy, input, scale, zero_point=0, *, dtype="int8", quant_min=None, quant_max=None, axis=None,
                      group_size=None, block_size=None, stream=None, rounding="nearest"):
    """Quantize's gradient: dx = dy / scale where quantize(input) is in range, else 0
    (rounding: "nearest" only)."""
    gran, kw = _granularity(scale, axis, group_size, block_size)
    arrays, scalars = _params(scale, zero_point, gran)
    return _affine_out(Op.QUANTIZE, gran, input, None, stream, arrays, Direction.BACKWARD, dy, qmin=quant_min,
                       qmax=quant_max, int_type=_dtype(dtype, DType.S8), rounding=rounding, **kw, **scalars)


def dequantize_backward(dy, scale, zero_point=0, *, dtype="int8", axis=None, group_size=None, block_size=None,
                        stream=None, rounding="nearest"):
    """Dequantize's gradient: dx = dy * scale (dtype: the quantized storage type; rounding:
    "nearest" only)."""
    gran, kw = _granularity(scale, axis, group_size, block_size)
    arrays, scalars = _params(scale, zero_point, gran)
    return _affine_out(Op.DEQUANTIZE, gran, None, None, stream, arrays, Direction.BACKWARD, dy, qmin=None,
                       qmax=None, int_type=_dtype(dtype, DType.S8), rounding=rounding, **kw, **scalars)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max, stream=None, *,
                                    rounding="nearest", seed=None, offset=0, rotation_block=None,
                                    random_signs=False):
    """Forward only (no autograd outside PyTorch); rounding, seed, offset, rotation_block,
    random_signs: as fake_quantize's."""
    # (checked before the input is imported)
    _core.sr_fields(rounding, seed, offset, _core.rot_fields(rotation_block, random_signs)[2])
    with _Inputs(stream) as inp:
        xv = inp.get(input, "input")
        return _affine_out(Op.FAKE_QUANTIZE, Granularity.PER_TENSOR, DeviceArray(xv.ptr, xv.shape, xv.dtype,
                           xv.device, strides=xv.strides), xv.dtype, stream, scale=scale, zero_point=zero_point,
                           qmin=quant_min, qmax=quant_max, int_type=_core.int_type_for(quant_min, quant_max),
                           rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                           random_signs=random_signs)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max, stream=None, *,
                                     rounding="nearest", seed=None, offset=0, rotation_block=None,
                                     random_signs=False):
    """Forward only (no autograd outside PyTorch); rounding, seed, offset, rotation_block,
    random_signs: as fake_quantize's."""
    # (checked before the input is imported)
    _core.sr_fields(rounding, seed, offset, _core.rot_fields(rotation_block, random_signs)[2])
    with _Inputs(stream) as inp:
        xv = inp.get(input, "input")
        return _affine_out(Op.FAKE_QUANTIZE, Granularity.PER_CHANNEL, DeviceArray(xv.ptr, xv.shape, xv.dtype,
                           xv.device, strides=xv.strides), xv.dtype, stream,
                           (("scales", scale), ("zero_points", zero_point)), axis=int(axis), qmin=quant_min,
                           qmax=quant_max, int_type=_core.int_type_for(quant_min, quant_max), rounding=rounding,
                           seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)


def dynamic_per_token_quant(x, symmetric=True, scale=None, azp=None, dtype="int8", stream=None, *,
                            rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """(q, scales [rows, 1] f32, zero points [rows, 1] int32 or None); with a static scale
    (a one-element array, read once to the host) x is quantized per tensor with it.
    rounding="stochastic" (an int seed required) rounds each element of x (viewed as [rows,
    K]) up or down by a draw at its row-major index plus offset (docs/numerics.md,
    "Stochastic rounding"), with the scales rounding to nearest computes; with a static
    scale, as quantize_per_tensor's stochastic rounding (the same indices). rotation_block
    (computed scales): each row rotated first in blocks of that many
    elements, random_signs keyed by seed (docs/numerics.md, "Rotation")."""
    dt = _dtype(dtype, DType.S8)
    _core.sr_fields(rounding, seed, offset, _core.rot_fields(rotation_block, random_signs)[2])  # (before any import)
    sr = dict(rounding=rounding, seed=seed, offset=offset)
    rot = dict(rotation_block=rotation_block, random_signs=random_signs)
    if scale is not None and rotation_block is not None:
        raise invalid("rotation_block: the fused rotation is dynamic quantize's (scale is None)")
    if scale is not None:
        with _Inputs(stream) as inp:
            sv = inp.get(scale, "scale")
            if sv.numel != 1 or sv.dtype != DType.F32:
                raise invalid("scale: a static scale is one float32 element")
            _set_device(sv.device)
            host = ctypes.c_float()
            _lib.check(_lib.bq_synchronize(stream))
            _lib.check(_lib.bq_memcpy_to_host(ctypes.byref(host), sv.ptr, 4))
            zp = 0
            if azp is not None:
                zv = inp.get(azp, "azp")
                hz = ctypes.c_int32()
                _lib.check(_lib.bq_memcpy_to_host(ctypes.byref(hz), zv.ptr, 4))
                zp = hz.value
        return quantize_per_tensor(x, host.value, zp, dt, stream=stream, **sr), scale, azp
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        x2 = _rows_view(xv, "x")
        _set_device(xv.device)
        q = _new_like(xv, dt, stream)
        s = DeviceArray.empty((x2.shape[0], 1), DType.F32, xv.device, stream)
        z = None if symmetric else DeviceArray.empty((x2.shape[0], 1), DType.S32, xv.device, stream)
        q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.dynamic(
            Granularity.PER_TOKEN, x=x2, y=_rows_view(q.view(), "q"), out_scales=s.view(),
            out_zero_points=None if z is None else z.view(), stream=st, alloc=alloc, **sr, **rot)))
        return q, s, z


def dynamic_shapes(gran, rows, cols, size, scale_dtype, mn_major):
    """The scales' shape and the strides of their view for a dynamic quantize of [rows, cols]
    (per tensor: (1,)), and the buffer to allocate: (view shape, view strides, buffer
    shape). MN-major (per group) is a transposed view of a [scales a row, rows rounded up to
    4] buffer."""
    if gran == Granularity.PER_TENSOR:
        return (1,), (1,), (1,)
    if gran == Granularity.PER_TOKEN:
        return (rows, 1), (1, 1), (rows, 1)
    if gran == Granularity.PER_BLOCK:
        shape = (-(-rows // size), -(-cols // size))
        return shape, (shape[1], 1), shape
    ng = cols // size
    if scale_dtype == DType.S32:  # UE8M0X4 words
        ng = -(-ng // 4)
    if mn_major:
        ld = -(-rows // 4) * 4
        return (rows, ng), (1, ld), (ng, ld)
    return (rows, ng), (ng, 1), (rows, ng)


def dynamic_quant(x, granularity="token", *, group_size=None, block_size=None, dtype="int8", symmetric=True,
                  quant_min=None, quant_max=None, scale_dtype=None, scale_layout="row", pow2_scales=False,
                  amax_bound=None, stream=None, rounding="nearest", seed=None, offset=0, rotation_block=None,
                  random_signs=False):
    """Dynamic quantize of x [..., K] (viewed as [rows, K]) with scales it computes:
    granularity "tensor", "token" (scales [rows, 1]), "group" (group_size; [rows, K / G]) or
    "block" (block_size B; [ceil(rows / B), ceil(K / B)]). dtype: int8, uint8, float8_e4m3fn
    or float8_e5m2 (symmetric only). scale_dtype: float32 (default), x's type, float8_e8m0fnu
    (UE8M0, power-of-two scales) or, per group, "ue8m0x4" (int32 words of four UE8M0
    scales). scale_layout "mn" (per group) returns the scales as a transposed view of a
    [K / G, rows rounded up to 4] buffer (what FP8 GEMMs read). pow2_scales rounds each scale
    up to a power of two; amax_bound (symmetric) caps each segment's max |x|.
    rounding="stochastic" (an int seed required): the scales as rounding to nearest computes
    them, then x quantized with them, each element rounded up or down by a draw at its
    row-major index (of [rows, K]; per tensor the flat one) plus offset (docs/numerics.md,
    "Stochastic rounding"). rotation_block (per token): each row rotated
    first in blocks of that many elements, random_signs keyed by seed (docs/numerics.md,
    "Rotation"). Returns (q, scales, zero points like scales (int32) or None)."""
    dt = _dtype(dtype, DType.S8)
    _core.sr_fields(rounding, seed, offset, _core.rot_fields(rotation_block, random_signs)[2])  # (before the import)
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        gran, size, mn = _core.dynamic_granularity(granularity, group_size, block_size, scale_layout,
                                                   dt in _core.FP8_TYPES, symmetric)
        sdt = _dtype(scale_dtype, DType.F32)
        _set_device(xv.device)
        q = _new_like(xv, dt, stream)
        if gran == Granularity.PER_TENSOR:
            xk, qk, rows, cols = xv, q.view(), 1, xv.numel
        else:
            xk, qk = _rows_view(xv, "x"), _rows_view(q.view(), "q")
            rows, cols = xk.shape
        if gran == Granularity.PER_GROUP and (size < 1 or cols % size):
            raise invalid("group_size (%d) must be >= 1 and divide the last dimension (%d)" % (size, cols))
        shape, strides, buf = dynamic_shapes(gran, rows, cols, size, sdt, mn)
        sb = DeviceArray.empty(buf, sdt, xv.device, stream)
        s = DeviceArray(sb.ptr, shape, sdt, xv.device, owner=sb, strides=strides, stream=stream)
        z = None
        if not symmetric:
            zb = DeviceArray.empty(buf, DType.S32, xv.device, stream)
            z = DeviceArray(zb.ptr, shape, DType.S32, xv.device, owner=zb, strides=strides, stream=stream)
        q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.dynamic(
            gran, x=xk, y=qk, out_scales=s.view(), out_zero_points=None if z is None else z.view(),
            qmin=quant_min, qmax=quant_max, group_size=size, pow2_scales=pow2_scales, amax_bound=amax_bound,
            rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs,
            stream=st, alloc=alloc)))
        return q, s, z


def _mx_choice(name, value, table):
    if value not in table:
        raise invalid("%s (%r) must be one of %s" % (name, value, ", ".join(sorted(table))))
    return table[value]


def mx_quant(x, *, group_size=32, dtype="e2m1", scales=None, tensor_scale=None, scale_dtype=None, scale_layout="row",
             scale_rule="default", amax_bound=None, rounding="nearest", seed=None, offset=0, rotation_block=None,
             random_signs=False, stream=None):
    """Microscaling quantize of x [..., K] (viewed as [rows, K]) in groups of group_size along
    the row (docs/numerics.md, "Microscaling"). dtype: "e2m1" (FP4, two codes a byte: q is
    uint8 [rows, K / 2], the lower index in the low nibble), "float8_e4m3fn" or
    "float8_e5m2". With scales given (UE8M0 float8_e8m0fnu bytes, or float8_e4m3fn for NVFP4
    with tensor_scale, one float32), quantize with them and return q. Without, dynamic
    quantize: scale_dtype "float8_e8m0fnu" (MXFP8, MXFP4: the default) or "float8_e4m3fn"
    (NVFP4: the tensor scale computed unless tensor_scale is given), scale_rule "default",
    "floor", "ceil", "even", "rceil" or "rceil_sat" (UE8M0), "torchao" or "te" (NVFP4: each
    peer's steps), amax_bound (UE8M0) capping each
    group's max |x|; returns (q, scales, tensor scale or None). scale_layout "row" ([rows,
    K / G]), "mn" (a transposed view of [K / G, rows rounded up to 4]) or "blocked" (the
    128 x 4 tiles of block-scaled GEMMs, flat: ceil(rows / 128) 128 ceil(K / G / 4) 4 bytes).
    rounding "stochastic" (an int seed required) rounds each element up or down by a draw at
    its row-major index plus offset (docs/numerics.md, "Stochastic rounding"). rotation_block:
    x rotated first (hadamard's forward pass in blocks of that many elements, random_signs
    keyed by seed), in the same pass."""
    dt = _dtype(dtype, DType.E2M1)
    sr = dict(rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)
    _core.sr_fields(rounding, seed, offset, _core.rot_fields(rotation_block, random_signs)[2])  # (before allocating)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    rule = _mx_choice("scale_rule", scale_rule, _core.MX_RULES)
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        xk = _rows_view(xv, "x")
        rows, cols = xk.shape
        _set_device(xv.device)
        e2 = dt == DType.E2M1
        if e2 and cols % 2:
            raise invalid("x: E2M1 packs two codes a byte: the last dimension (%d) must be even" % cols)
        qshape = tuple(xv.shape[:-1]) + ((cols // 2,) if e2 else (cols,))
        q = DeviceArray.empty(qshape, DType.U8 if e2 else dt, xv.device, stream)
        qk = _rows_view(q.view(), "q")
        ts = inp.get(tensor_scale, "tensor_scale") if tensor_scale is not None else None
        if scales is not None:
            sv = inp.get(scales, "scales")
            q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.mx(
                Op.QUANTIZE, fl=xk, codes=qk, scales=sv, elem=dt, group_size=group_size, layout=layout,
                tensor_scale=ts, stream=st, alloc=alloc, **sr)))
            return q
        if cols % max(int(group_size), 1):
            raise invalid("group_size (%d) must divide the last dimension (%d)" % (group_size, cols))
        sdt = _dtype(scale_dtype, DType.UE8M0)
        shape, strides, buf = _core.mx_scales_shape(layout, rows, cols // int(group_size))
        sb = DeviceArray.empty(buf, sdt, xv.device, stream)
        s = DeviceArray(sb.ptr, shape, sdt, xv.device, owner=sb, strides=strides, stream=stream)
        g = DeviceArray.empty((1,), DType.F32, xv.device, stream) if sdt == DType.E4M3 and ts is None else None
        q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.mx(
            Op.DYNAMIC_QUANTIZE, fl=xk, codes=qk, scales=s.view(), elem=dt, group_size=group_size, layout=layout,
            rule=rule, tensor_scale=ts, out_tensor_scale=None if g is None else g.view(), amax_bound=amax_bound,
            stream=st, alloc=alloc, **sr)))
        return q, s, g


def mx_dequant(q, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
               out_dtype="float32", rotation_block=None, random_signs=False, seed=None, stream=None):
    """Microscaling dequantize (the inverse of mx_quant's layout): q [..., K] codes, or for
    dtype "e2m1" uint8 [..., K / 2] two codes a byte; scales and tensor_scale as mx_quant
    takes them. Returns out_dtype [..., K], rotated back with rotation_block (the inverse of
    mx_quant's rotation)."""
    dt = _dtype(dtype, DType.E2M1)
    ot = _dtype(out_dtype, DType.F32)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    with _Inputs(stream) as inp:
        qv = inp.get(q, "q")
        qk = _rows_view(qv, "q")
        sv = inp.get(scales, "scales")
        ts = inp.get(tensor_scale, "tensor_scale") if tensor_scale is not None else None
        _set_device(qv.device)
        cols = qk.shape[1] * (2 if dt == DType.E2M1 else 1)
        y = DeviceArray.empty(tuple(qv.shape[:-1]) + (cols,), ot, qv.device, stream)
        yk = _rows_view(y.view(), "y")
        y._keep = tuple(_run(qv.device, stream, lambda st, alloc: _core.mx(
            Op.DEQUANTIZE, fl=yk, codes=qk, scales=sv, elem=dt, group_size=group_size, layout=layout,
            tensor_scale=ts, rotation_block=rotation_block, random_signs=random_signs, seed=seed, stream=st,
            alloc=alloc)))
        return y


def _mx_float_call(op, direction, x, dy, scales, group_size, dtype, tensor_scale, scale_layout, stream, **sr):
    dt = _dtype(dtype, DType.E2M1)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x") if x is not None else None
        dv = inp.get(dy, "dy") if dy is not None else None
        sv = inp.get(scales, "scales")
        ts = inp.get(tensor_scale, "tensor_scale") if tensor_scale is not None else None
        base = xv if xv is not None else dv
        _set_device(base.device)
        out = _new_like(base, base.dtype, stream)
        xk = _rows_view(xv, "x") if xv is not None else None
        dk = _rows_view(dv, "dy") if dv is not None else None
        ok = _rows_view(out.view(), "out")
        fwd = direction == Direction.FORWARD
        out._keep = tuple(_run(base.device, stream, lambda st, alloc: _core.mx_floats(
            op, direction, x=xk, y=ok if fwd else None, dy=dk, dx=None if fwd else ok, scales=sv, elem=dt,
            group_size=group_size, layout=layout, tensor_scale=ts, stream=st, alloc=alloc, **sr)))
        return out


def mx_fake_quant(x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
                  rounding="nearest", seed=None, offset=0, stream=None):
    """Microscaling fake quantize: mx_dequant(mx_quant(x, scales)) bit for bit (with the same
    rounding options), in x's type."""
    return _mx_float_call(Op.FAKE_QUANTIZE, Direction.FORWARD, x, None, scales, group_size, dtype, tensor_scale,
                          scale_layout, stream, rounding=rounding, seed=seed, offset=offset)


def mx_fake_quant_backward(dy, x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
                           stream=None):
    """dx = dy where |x / scale| <= the element's max, else 0 (the straight-through estimator)."""
    return _mx_float_call(Op.FAKE_QUANTIZE, Direction.BACKWARD, x, dy, scales, group_size, dtype, tensor_scale,
                          scale_layout, stream)


def mx_quant_backward(dy, x, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
                      stream=None):
    """dx = dy / scale where |x / scale| <= the element's max, else 0."""
    return _mx_float_call(Op.QUANTIZE, Direction.BACKWARD, x, dy, scales, group_size, dtype, tensor_scale,
                          scale_layout, stream)


def mx_dequant_backward(dy, scales, *, group_size=32, dtype="e2m1", tensor_scale=None, scale_layout="row",
                        stream=None):
    """dx = dy * scale (dy shaped like the dequantized output)."""
    return _mx_float_call(Op.DEQUANTIZE, Direction.BACKWARD, None, dy, scales, group_size, dtype, tensor_scale,
                          scale_layout, stream)


def _fused_inputs(inp, op, x, residual, weight):
    """A fused call's inputs as views (x and the residual as rows, the weight flat), with the
    output's rows and columns; the device made current."""
    xv = inp.get(x, "x")
    x2 = _rows_view(xv, "x")
    rv = inp.get(residual, "residual")
    wv = inp.get(weight, "weight")
    if rv is not None:
        if rv.shape != xv.shape:
            raise invalid("residual: shape %s, expected x's %s" % (rv.shape, xv.shape))
        rv = _rows_view(rv, "residual")
    if wv is not None and len(wv.shape) != 1 and wv.is_contiguous():
        wv = _core.View(wv.ptr, (wv.numel,), (1,), wv.dtype, wv.device)
    d = x2.shape[1] // 2 if op == Op.GATED_QUANTIZE else x2.shape[1]
    _set_device(xv.device)
    return xv, x2, rv, wv, x2.shape[0], d


def _fused_out(op, x, out_dtype, symmetric, group_size, return_values, scale, zero_point, quant_min, quant_max,
               stream, residual=None, weight=None, eps=0.0, activation=0, scale_dtype=None, rounding="nearest",
               seed=None, offset=0, rotation_block=None, random_signs=False):
    # (stochastic rounding's and the rotation's options, before any import)
    rot, rb, signs = _core.rot_fields(rotation_block, random_signs)
    _core.sr_fields(rounding, seed, offset, signs)
    if rot:
        _core.fused_rotation(rb, Granularity.PER_GROUP if group_size is not None else None, rb)
    sr = dict(rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)
    dt = _dtype(out_dtype, DType.S8)
    if not symmetric and dt in _core.FP8_TYPES:
        raise invalid("symmetric: FP8 (%s) is symmetric only" % dt.name)
    if scale is not None and group_size is not None:
        raise invalid("group_size: a static scale is per tensor")
    if scale is None and zero_point not in (0, None):
        raise invalid("zero_point: only with a static scale (dynamic zero points come from symmetric=False)")
    g = 0 if group_size is None else _core.integer("group_size", group_size)
    if group_size is not None and g < 1:
        raise invalid("group_size (%d) must be >= 1" % g)
    with _Inputs(stream) as inp:
        xv, x2, rv, wv, rows, d = _fused_inputs(inp, op, x, residual, weight)
        shape = tuple(xv.shape[:-1]) + (d,)
        q = DeviceArray.empty(shape, dt, xv.device, stream)
        s = z = None
        if scale is None:
            sshape = (rows, d // g) if g else (rows, 1)
            s = DeviceArray.empty(sshape, _dtype(scale_dtype, DType.F32), xv.device, stream)
            z = None if symmetric else DeviceArray.empty(sshape, DType.S32, xv.device, stream)
        vals = DeviceArray.empty(shape, xv.dtype, xv.device, stream) if return_values else None
        q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.fused(
            op, x=x2, y=_rows_view(q.view(), "q"), out_scales=None if s is None else s.view(),
            out_zero_points=None if z is None else z.view(), residual=rv, norm_weight=wv, eps=eps,
            out=None if vals is None else _rows_view(vals.view(), "out"), activation=activation, qmin=quant_min,
            qmax=quant_max, group_size=g, scale=scale, zero_point=zero_point, stream=st, alloc=alloc, **sr)))
        out = (q, scale, zero_point) if scale is not None else (q, s, z)
        return out + (vals,) if return_values else out


def rms_norm_quant(x, weight, eps, residual=None, symmetric=True, group_size=None, out_dtype="int8",
                   return_normed=False, scale=None, zero_point=0, quant_min=None, quant_max=None, scale_dtype=None,
                   stream=None, *, rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """baracuda_quant.ops.rms_norm_quant on __dlpack__ arrays: (q, scales, zero points or
    None[, n]); the residual (when given) is updated in place. rounding="stochastic" with an
    int seed (keyword-only; int8, uint8 or FP8): n quantized as quantize_per_token /
    quantize_per_group (the scales returned, those rounding to nearest computes) or
    quantize_per_tensor (the static scale) with rounding="stochastic", the same seed and
    offset, would (element (r, c) of n viewed as [rows, D] at index offset + r D + c).
    rotation_block (keyword-only; per token or per tensor, not per group), random_signs keyed
    by seed: n rotated first, as hadamard(n, rotation_block, seed=...) then the same call would
    (per token: the scales of the rotated rows), either rounding; n as returned is unrotated.
    Without return_normed the library's workspace (rows D elements of x's type) is allocated
    for either."""
    return _fused_out(Op.RMSNORM_QUANTIZE, x, out_dtype, symmetric, group_size, return_normed, scale, zero_point,
                      quant_min, quant_max, stream, residual=residual, weight=weight, eps=eps,
                      scale_dtype=scale_dtype, rounding=rounding, seed=seed, offset=offset,
                      rotation_block=rotation_block, random_signs=random_signs)


def silu_and_mul_quant(x, symmetric=True, group_size=None, out_dtype="int8", return_act=False, scale=None,
                       zero_point=0, quant_min=None, quant_max=None, scale_dtype=None, stream=None, *,
                       rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """baracuda_quant.ops.silu_and_mul_quant on __dlpack__ arrays (x [..., 2 D]); rounding,
    seed, offset, rotation_block, random_signs as rms_norm_quant's."""
    return _fused_out(Op.GATED_QUANTIZE, x, out_dtype, symmetric, group_size, return_act, scale, zero_point,
                      quant_min, quant_max, stream, activation=Activation.SILU, scale_dtype=scale_dtype,
                      rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                      random_signs=random_signs)


def gelu_tanh_and_mul_quant(x, symmetric=True, group_size=None, out_dtype="int8", return_act=False, scale=None,
                            zero_point=0, quant_min=None, quant_max=None, scale_dtype=None, stream=None, *,
                            rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """baracuda_quant.ops.gelu_tanh_and_mul_quant on __dlpack__ arrays (x [..., 2 D]); rounding,
    seed, offset, rotation_block, random_signs as rms_norm_quant's."""
    return _fused_out(Op.GATED_QUANTIZE, x, out_dtype, symmetric, group_size, return_act, scale, zero_point,
                      quant_min, quant_max, stream, activation=Activation.GELU_TANH, scale_dtype=scale_dtype,
                      rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                      random_signs=random_signs)


def _linear(op, x, w, w_scales, bias, a_scales, out_dtype, stream, a_zero_points=None, w_sums=None,
            act_type=DType.S8, quant_min=None, quant_max=None, symmetric=True):
    with _Inputs(stream) as inp:
        xv = _rows_view(inp.get(x, "x"), "x")
        wv, sv, bv = inp.get(w, "w"), inp.get(w_scales, "w_scales"), inp.get(bias, "bias")
        a_scale = a_zero_point = None
        if isinstance(a_scales, (int, float)):  # per tensor: one host scale (and zero point)
            a_scale, a_scales = a_scales, None
            a_zero_point, a_zero_points = a_zero_points, None
        av = inp.get(a_scales, "a_scales")
        zv = inp.get(a_zero_points, "a_zero_points")
        if av is not None and av.numel == 1 and xv.shape[0] != 1:
            raise _lib.NotSupportedError("a_scales: a one-element array needs PyTorch here; pass one scale per "
                                         "row, or the per-tensor scale as a number", 2)
        av, zv, sv = [None if v is None else _core.View(v.ptr, (v.numel,), (1,), v.dtype, v.device)
                      for v in (av, zv, sv)]
        n = wv.shape[0] if len(wv.shape) == 2 else 0
        if out_dtype is None:  # QuantizedLinear: the activations' type
            out_dtype = xv.dtype
        asym = (not symmetric) if op == Op.QUANTIZED_LINEAR else (zv is not None or a_zero_point is not None)
        _set_device(xv.device)
        if asym and w_sums is None:
            w_sums = linear_weight_sums(_unowned(wv), stream)
        ws = inp.get(w_sums, "w_sums")
        out = DeviceArray.empty((xv.shape[0], n), out_dtype, xv.device, stream)
        out._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.linear(
            op, x=xv, w=wv, w_scales=sv, y=out.view(), a_scales=av, a_scale=a_scale, bias=bv, a_zero_points=zv,
            a_zero_point=a_zero_point or 0, w_sums=ws, act_type=act_type, qmin=quant_min, qmax=quant_max,
            asymmetric=asym, stream=st, alloc=alloc))) + ((w_sums,) if isinstance(w_sums, DeviceArray) else ())
        return out


def _unowned(v):
    """A view as a DeviceArray that does not own its memory."""
    return DeviceArray(v.ptr, v.shape, v.dtype, v.device, strides=v.strides)


def int8_linear(a, w, a_scales, w_scales, bias=None, out_dtype="float16", stream=None, *, a_zero_points=None,
                w_sums=None, quant_min=None, quant_max=None):
    """SmoothQuantLinear on [M, K] int8 or uint8 activations: per-token a_scales[M] (and
    int32 a_zero_points[M]: asymmetric), or numbers (per tensor); w_sums (int32 [N]) for
    asymmetric activations, computed when not given; output [M, N]."""
    return _linear(Op.SMOOTHQUANT_LINEAR, a, w, w_scales, bias, a_scales, _dtype(out_dtype, DType.F16), stream,
                   a_zero_points=a_zero_points, w_sums=w_sums, quant_min=quant_min, quant_max=quant_max)


def quantized_linear(x, w, w_scales, bias=None, stream=None, *, symmetric=True, dtype="int8", quant_min=None,
                     quant_max=None, w_sums=None):
    """QuantizedLinear on float [M, K] activations, quantized per token into dtype's [quant_min,
    quant_max] (asymmetric with symmetric=False: w_sums needed, computed when not given);
    output [M, N] of x's dtype."""
    return _linear(Op.QUANTIZED_LINEAR, x, w, w_scales, bias, None, None, stream, w_sums=w_sums,
                   act_type=_dtype(dtype, DType.S8), quant_min=quant_min, quant_max=quant_max, symmetric=symmetric)


def _scale_vector(v):
    """A scale array of at most one dimension longer than 1 as that 1-D view, its stride kept
    (so that _core's checks see a strided one)."""
    if v.numel <= 1:
        return _core.View(v.ptr, (v.numel,), (1,), v.dtype, v.device)
    stride = next(st for size, st in zip(v.shape, v.strides) if size != 1)
    return _core.View(v.ptr, (v.numel,), (stride,), v.dtype, v.device)


def fp8_linear(x, w, scale_a, scale_b, bias=None, out_dtype="bfloat16", stream=None):
    """FP8Linear (sm_89 and later): y = (x W^T) * scale_a * scale_b (+ bias) on FP8 tensor
    cores, as torch._scaled_mm(x, w.T, scale_a, scale_b, bias, out_dtype) computes it. x
    E4M3 or E5M2 [..., K] (its rows evenly strided), w E4M3 [N, K] (contiguous, nn.Linear's
    layout); float32 scales, tensorwise one element each, rowwise scale_a [M] or [M, 1]
    (a row of x.reshape(-1, K) each) and scale_b [N] or [1, N], or blockwise scale_a
    [M, ceil(K / 128)] (row-major or MN-major) and scale_b [ceil(N / 128), ceil(K / 128)]
    (or its transpose view); bias [N] of out_dtype (float32, float16 or bfloat16). Output
    [..., N] of out_dtype."""
    out_dtype = _dtype(out_dtype, DType.BF16)
    if out_dtype not in _core.FP8_LINEAR_OUT:
        raise invalid("out_dtype %s: float32, float16 or bfloat16" % out_dtype.name)
    for name, v in (("x", x), ("w", w), ("scale_a", scale_a), ("scale_b", scale_b)):
        if v is None:
            raise invalid("%s is required" % name)
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        x2 = _rows_view(xv, "x")
        wv, av, bv, biasv = inp.get(w, "w"), inp.get(scale_a, "scale_a"), inp.get(scale_b, "scale_b"), \
            inp.get(bias, "bias")
        if len(wv.shape) != 2:
            raise invalid("w: shape %s, expected (N, K)" % (wv.shape,))
        n = wv.shape[0]
        mode = _core.fp8_scales_mode(x2.shape[0], n, x2.shape[1], av.shape, bv.shape)
        if mode != "blockwise":
            av, bv = _scale_vector(av), _scale_vector(bv)
        _set_device(xv.device)
        out = DeviceArray.empty(tuple(xv.shape[:-1]) + (n,), out_dtype, xv.device, stream)
        out._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.fp8_linear(
            x=x2, w=wv, scale_a=av, scale_b=bv, y=_rows_view(out.view(), "y"), bias=biasv,
            rowwise=mode == "rowwise", blockwise=mode == "blockwise", stream=st, alloc=alloc)))
        return out


def fp8_quantized_linear(x, w, scale_b, bias=None, act_dtype="float8_e4m3fn", stream=None):
    """FP8 QuantizedLinear in one call (sm_89 and later): x float32, float16 or bfloat16
    [..., K] (its rows evenly strided) quantized on the GPU to act_dtype (E4M3 or E5M2), then
    multiplied by the E4M3 weight w [N, K] (contiguous). scale_b float32 [N] (or [1, N]): per
    channel, x per token; or [ceil(N / 128), K / 128]: the weight's 128 x 128 blocks, x per
    1 x 128 group (K a multiple of 128). bias [N] of x's type. Output [..., N] of x's type."""
    adt = _dtype(act_dtype, DType.E4M3)
    for name, v in (("x", x), ("w", w), ("scale_b", scale_b)):
        if v is None:
            raise invalid("%s is required" % name)
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        x2 = _rows_view(xv, "x")
        wv, bv, biasv = inp.get(w, "w"), inp.get(scale_b, "scale_b"), inp.get(bias, "bias")
        if len(wv.shape) != 2:
            raise invalid("w: shape %s, expected (N, K)" % (wv.shape,))
        n = wv.shape[0]
        blockwise = tuple(bv.shape) not in ((n,), (1, n))
        if not blockwise:
            bv = _scale_vector(bv)
        _set_device(xv.device)
        out = DeviceArray.empty(tuple(xv.shape[:-1]) + (n,), xv.dtype, xv.device, stream)
        out._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.fp8_quantized_linear(
            x=x2, w=wv, scale_b=bv, y=_rows_view(out.view(), "y"), bias=biasv, act_dtype=adt, blockwise=blockwise,
            stream=st, alloc=alloc)))
        return out


def linear_weight_sums(w, stream=None):
    """int32 [N] sums of the int8 weight w [N, K]'s rows (exact), for asymmetric activations."""
    with _Inputs(stream) as inp:
        wv = inp.get(w, "w")
        if len(wv.shape) != 2:
            raise invalid("w: shape %s, expected (N, K)" % (wv.shape,))
        _set_device(wv.device)
        out = DeviceArray.empty((wv.shape[0],), DType.S32, wv.device, stream)
        out._keep = tuple(_run(wv.device, stream, lambda st, alloc: _core.weight_sums(
            w=wv, y=out.view(), stream=st, alloc=alloc)))
        return out


# ---- fused producers emitting a microscaling format ------------------------------------------
def _fused_mx_out(op, x, dtype, group_size, scale_dtype, tensor_scale, scale_layout, scale_rule, return_values,
                  stream, residual=None, weight=None, eps=0.0, activation=0, rounding="nearest", seed=None, offset=0,
                  rotation_block=None, random_signs=False):
    # (the rounding's and the rotation's options, before any import)
    rot, rb, signs = _core.rot_fields(rotation_block, random_signs)
    _core.sr_fields(rounding, seed, offset, signs)
    if rot:
        _core.rotation_block_check(rb, rb)
    sr = dict(rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)
    dt = _dtype(dtype, DType.E2M1)
    layout = _mx_choice("scale_layout", scale_layout, _core.MX_LAYOUTS)
    rule = _mx_choice("scale_rule", scale_rule, _core.MX_RULES)
    sdt = _dtype(scale_dtype, DType.UE8M0)
    g = _core.integer("group_size", group_size)
    with _Inputs(stream) as inp:
        xv, x2, rv, wv, rows, d = _fused_inputs(inp, op, x, residual, weight)
        e2 = dt == DType.E2M1
        if op == Op.GATED_QUANTIZE and x2.shape[1] % 2:
            raise invalid("x shape %s: the gated op's last dimension holds the gate, then up: it must be even"
                          % (xv.shape,))
        if g < 1 or d % g:
            raise invalid("group_size (%d) must be >= 1 and divide the output's last dimension (%d)" % (g, d))
        if e2 and d % 2:
            raise invalid("x: E2M1 packs two codes a byte: the output's last dimension (%d) must be even" % d)
        q = DeviceArray.empty(tuple(xv.shape[:-1]) + ((d // 2,) if e2 else (d,)), DType.U8 if e2 else dt, xv.device,
                              stream)
        shape, strides, buf = _core.mx_scales_shape(layout, rows, d // g)
        sb = DeviceArray.empty(buf, sdt, xv.device, stream)
        s = DeviceArray(sb.ptr, shape, sdt, xv.device, owner=sb, strides=strides, stream=stream)
        ts = inp.get(tensor_scale, "tensor_scale") if tensor_scale is not None else None
        gt = DeviceArray.empty((1,), DType.F32, xv.device, stream) if sdt == DType.E4M3 and ts is None else None
        vals = DeviceArray.empty(tuple(xv.shape[:-1]) + (d,), xv.dtype, xv.device, stream) if return_values else None
        q._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.fused_mx(
            op, x=x2, codes=_rows_view(q.view(), "q"), scales=s.view(), elem=dt, group_size=g, layout=layout,
            rule=rule, tensor_scale=ts, out_tensor_scale=None if gt is None else gt.view(), residual=rv,
            norm_weight=wv, eps=eps, out=None if vals is None else _rows_view(vals.view(), "out"),
            activation=activation, stream=st, alloc=alloc, **sr)))
        out = (q, s, gt)
        return out + (vals,) if return_values else out


def rms_norm_mx_quant(x, weight, eps, residual=None, *, group_size=32, dtype="e2m1", scale_dtype=None,
                      tensor_scale=None, scale_layout="row", scale_rule="default", return_normed=False, stream=None,
                      rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """(residual add +) RMSNorm of x [..., K] emitting a microscaling format in the same pass:
    n dynamic quantized as mx_quant does it (dtype "e2m1", "float8_e4m3fn" or "float8_e5m2";
    scale_dtype "float8_e8m0fnu", the default, or "float8_e4m3fn" for NVFP4, whose tensor
    scale is computed in a first pass unless tensor_scale (one float32) is given;
    scale_layout and scale_rule as mx_quant takes them). Returns (q, scales, tensor scale or
    None[, n]); the residual (when given) receives h = x + residual in place.
    rounding="stochastic" (seed, offset), rotation_block and random_signs: as mx_quant takes
    them, bit for bit mx_quant of n (unrotated, as returned) with the same options; without
    return_normed the library's workspace (n) is allocated for them."""
    return _fused_mx_out(Op.RMSNORM_QUANTIZE, x, dtype, group_size, scale_dtype, tensor_scale, scale_layout,
                         scale_rule, return_normed, stream, residual=residual, weight=weight, eps=eps,
                         rounding=rounding, seed=seed, offset=offset, rotation_block=rotation_block,
                         random_signs=random_signs)


def silu_and_mul_mx_quant(x, *, group_size=32, dtype="e2m1", scale_dtype=None, tensor_scale=None,
                          scale_layout="row", scale_rule="default", return_act=False, stream=None, rounding="nearest",
                          seed=None, offset=0, rotation_block=None, random_signs=False):
    """SiLU(gate) * up of x [..., 2 D] emitting a microscaling format (rms_norm_mx_quant's
    options, rounding and rotation included, and return)."""
    return _fused_mx_out(Op.GATED_QUANTIZE, x, dtype, group_size, scale_dtype, tensor_scale, scale_layout,
                         scale_rule, return_act, stream, activation=Activation.SILU, rounding=rounding, seed=seed,
                         offset=offset, rotation_block=rotation_block, random_signs=random_signs)


def gelu_tanh_and_mul_mx_quant(x, *, group_size=32, dtype="e2m1", scale_dtype=None, tensor_scale=None,
                               scale_layout="row", scale_rule="default", return_act=False, stream=None,
                               rounding="nearest", seed=None, offset=0, rotation_block=None, random_signs=False):
    """GELU-tanh(gate) * up of x [..., 2 D] emitting a microscaling format (rms_norm_mx_quant's
    options, rounding and rotation included, and return)."""
    return _fused_mx_out(Op.GATED_QUANTIZE, x, dtype, group_size, scale_dtype, tensor_scale, scale_layout,
                         scale_rule, return_act, stream, activation=Activation.GELU_TANH, rounding=rounding,
                         seed=seed, offset=offset, rotation_block=rotation_block, random_signs=random_signs)


# ---- the Hadamard rotation ----------------------------------------------------------------------
def hadamard(x, block_size, *, inverse=False, seed=None, stream=None):
    """The block-diagonal Walsh-Hadamard rotation of x [..., K] along its last dimension in
    blocks of block_size (a power of two, 2 to 256, dividing K), normalized (orthonormal);
    seed (an int): times the random sign vector drawn from it first (a random Hadamard
    transform); inverse: the inverse (also the forward one's gradient). Returns x's shape and
    type (docs/numerics.md, "Rotation")."""
    with _Inputs(stream) as inp:
        xv = inp.get(x, "x")
        x2 = _rows_view(xv, "x")
        _set_device(xv.device)
        y = _new_like(xv, xv.dtype, stream)
        y._keep = tuple(_run(xv.device, stream, lambda st, alloc: _core.hadamard(
            x=x2, y=_rows_view(y.view(), "y"), block_size=block_size, inverse=inverse, seed=seed, stream=st,
            alloc=alloc)))
        return y
