"""ctypes binding of the baracuda_quant shared library: struct mirrors, errors, plans.

The shared object is the package's libbaracuda_quant_c.so, or the file named by the
environment variable BARACUDA_QUANT_PYLIB. Nothing here imports torch."""
import ctypes
import glob
import os
import sys
import threading

from ._enums import DType, Direction, Granularity, Status, DEVICE

BQ_MAX_RANK = 8


def _find_library():
    path = os.environ.get("BARACUDA_QUANT_PYLIB")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    # an installed wheel keeps it in its internal library folder, beside the package (or on
    # another entry of sys.path where a system keeps platform files apart); a build tree,
    # in the package folder itself
    found = []
    for d in [os.path.dirname(here)] + [p for p in sys.path if p]:
        found = sorted(glob.glob(os.path.join(d, ".baracuda_quant.mesonpy.libs", "libbaracuda_quant_c*.so*")))
        if found:
            break
    found = found or sorted(glob.glob(os.path.join(here, "libbaracuda_quant_c*.so*")))
    if not found:
        raise ImportError("baracuda_quant: libbaracuda_quant_c.so is not in %s; install the package "
                          "with `pip install .` or set BARACUDA_QUANT_PYLIB to the library's path" % here)
    return found[0]


LIBRARY_PATH = _find_library()
lib = ctypes.CDLL(LIBRARY_PATH)


# ---- struct mirrors (baracuda_quant.h; tests/test_layout.py compares them with the C side)
class Desc(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int),
        ("direction", ctypes.c_int),
        ("granularity", ctypes.c_int),
        ("float_type", ctypes.c_int),
        ("int_type", ctypes.c_int),
        ("qmin", ctypes.c_int),
        ("qmax", ctypes.c_int),
        ("scale_type", ctypes.c_int),
        ("device", ctypes.c_int),
        ("asymmetric", ctypes.c_int),
        ("out_type", ctypes.c_int),
        ("activation", ctypes.c_int),
        ("pow2_scales", ctypes.c_int),
        ("scale_layout", ctypes.c_int),
        ("scale_rule", ctypes.c_int),
        ("random_signs", ctypes.c_int),
        ("rounding", ctypes.c_int),
        ("rotation", ctypes.c_int),
    ]


class Args(ctypes.Structure):
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("dy", ctypes.c_void_p),
        ("dx", ctypes.c_void_p),
        ("numel", ctypes.c_int64),
        ("rank", ctypes.c_int),
        ("shape", ctypes.c_int64 * BQ_MAX_RANK),
        ("axis", ctypes.c_int),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("x_row_stride", ctypes.c_int64),
        ("y_row_stride", ctypes.c_int64),
        ("group_size", ctypes.c_int64),
        ("group_row_stride", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("zero_point", ctypes.c_int32),
        ("scales", ctypes.c_void_p),
        ("zero_points", ctypes.c_void_p),
        ("out_scales", ctypes.c_void_p),
        ("out_zero_points", ctypes.c_void_p),
        ("n", ctypes.c_int64),
        ("w", ctypes.c_void_p),
        ("w_scales", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("w_sums", ctypes.c_void_p),
        ("residual", ctypes.c_void_p),
        ("residual_row_stride", ctypes.c_int64),
        ("norm_weight", ctypes.c_void_p),
        ("eps", ctypes.c_double),
        ("out", ctypes.c_void_p),
        ("out_row_stride", ctypes.c_int64),
        ("amax_bound", ctypes.c_double),
        ("mask", ctypes.c_void_p),
        ("tensor_scale", ctypes.c_void_p),
        ("out_tensor_scale", ctypes.c_void_p),
        ("seed", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
        ("rotation_block", ctypes.c_int64),
    ]


class CacheStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("memory_hits", "disk_hits", "misses", "compiles", "corrupt", "write_failures")]


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_c = ctypes
bq_version = _fn("bq_version", _c.c_uint)
bq_version_string = _fn("bq_version_string", _c.c_char_p)
bq_last_error = _fn("bq_last_error", _c.c_char_p)
bq_status_name = _fn("bq_status_name", _c.c_char_p, _c.c_int)
bq_status_description = _fn("bq_status_description", _c.c_char_p, _c.c_int)
bq_plan_select = _fn("bq_plan_select", _c.c_int, _c.POINTER(Desc), _c.POINTER(_c.c_void_p))
bq_plan_can_implement = _fn("bq_plan_can_implement", _c.c_int, _c.c_void_p, _c.POINTER(Args))
bq_plan_run = _fn("bq_plan_run", _c.c_int, _c.c_void_p, _c.POINTER(Args), _c.c_void_p, _c.c_size_t, _c.c_void_p)
bq_plan_destroy = _fn("bq_plan_destroy", None, _c.c_void_p)
bq_plan_sku = _fn("bq_plan_sku", _c.c_char_p, _c.c_void_p)
bq_plan_precision_guarantee = _fn("bq_plan_precision_guarantee", _c.c_char_p, _c.c_void_p)
bq_cache_get_stats = _fn("bq_cache_get_stats", None, _c.POINTER(CacheStats))
bq_cache_directory = _fn("bq_cache_directory", _c.c_char_p)
bq_malloc = _fn("bq_malloc", _c.c_int, _c.POINTER(_c.c_void_p), _c.c_size_t)
bq_free = _fn("bq_free", _c.c_int, _c.c_void_p)
bq_memcpy_to_device = _fn("bq_memcpy_to_device", _c.c_int, _c.c_void_p, _c.c_void_p, _c.c_size_t)
bq_memcpy_to_host = _fn("bq_memcpy_to_host", _c.c_int, _c.c_void_p, _c.c_void_p, _c.c_size_t)
bq_synchronize = _fn("bq_synchronize", _c.c_int, _c.c_void_p)
bq_py_sizeof = _fn("bq_py_sizeof", _c.c_size_t, _c.c_char_p)
bq_py_offsetof = _fn("bq_py_offsetof", _c.c_size_t, _c.c_char_p, _c.c_char_p)
bq_py_enum = _fn("bq_py_enum", _c.c_int, _c.c_char_p)
bq_py_validate = _fn("bq_py_validate", _c.c_int, _c.POINTER(Desc), _c.POINTER(Args))
bq_py_all_descs = _fn("bq_py_all_descs", _c.c_int, _c.POINTER(Desc), _c.c_int)
bq_py_sku = _fn("bq_py_sku", _c.c_int, _c.POINTER(Desc), _c.c_char_p, _c.c_size_t)
bq_py_run_tensor = _fn("bq_py_run_tensor", _c.c_int, _c.c_void_p, _c.c_void_p, _c.c_void_p, _c.c_void_p,
                       _c.c_double, _c.c_int64, _c.c_void_p)
bq_py_run_rows = _fn("bq_py_run_rows", _c.c_int, _c.c_void_p, _c.c_void_p, _c.c_void_p, _c.c_void_p, _c.c_void_p,
                     _c.c_void_p, _c.c_void_p, _c.c_void_p, _c.c_void_p)

VERSION_NUMBER = bq_version()
VERSION = bq_version_string().decode()

# bq_status bq_plan_workspace_size(const bq_plan *plan, const bq_args *args, size_t *bytes)
bq_plan_workspace_size = _fn("bq_plan_workspace_size", _c.c_int, _c.c_void_p, _c.POINTER(Args),
                             _c.POINTER(_c.c_size_t))


def workspace_size(plan, args):
    n = ctypes.c_size_t(0)
    check(bq_plan_workspace_size(plan, ctypes.byref(args), ctypes.byref(n)))
    return n.value


# ---- errors
class Error(Exception):
    """A baracuda_quant status other than success; .status is the bq_status, the message is
    bq_last_error()'s (or the Python-side check's)."""

    def __init__(self, message, status=Status.ERROR_INVALID_ARGUMENT):
        super().__init__(message)
        self.status = Status(status)
        self.message = message

    @property
    def status_name(self):
        return "BQ_" + self.status.name


class InvalidArgumentError(Error, ValueError):
    """BQ_ERROR_INVALID_ARGUMENT: a descriptor, argument, dtype, shape or device is invalid."""


class NotSupportedError(Error, NotImplementedError):
    """BQ_ERROR_NOT_SUPPORTED: the combination is not offered."""


class DeviceError(Error, RuntimeError):
    """Every other status: no driver, no device, no NVRTC, a failed compile or CUDA call, out of memory."""


def error_for(status, message=None):
    if message is None:
        message = (bq_last_error() or b"").decode(errors="replace") or \
            bq_status_description(status).decode()
    if status == Status.ERROR_INVALID_ARGUMENT:
        return InvalidArgumentError(message, status)
    if status == Status.ERROR_NOT_SUPPORTED:
        return NotSupportedError(message, status)
    return DeviceError(message, status)


def check(status):
    if status:
        raise error_for(status)


def invalid(message):
    """An InvalidArgumentError raised by the Python-side checks, before any library call."""
    return InvalidArgumentError(message, Status.ERROR_INVALID_ARGUMENT)


# ---- plans, cached by (descriptor, device index); plans are immutable and thread-safe
_plans = {}
_plans_lock = threading.Lock()


def desc_key(op, direction=Direction.FORWARD, granularity=Granularity.DEFAULT, float_type=DType.DEFAULT,
             int_type=DType.DEFAULT, qmin=0, qmax=0, scale_type=DType.DEFAULT, asymmetric=0,
             out_type=DType.DEFAULT, activation=0, pow2_scales=0, scale_layout=0, scale_rule=0, random_signs=0,
             rounding=0, rotation=0):
    """The descriptor as a tuple of ints (the 0.2.0 values), in bq_desc's field order less device."""
    return (int(op), int(direction), int(granularity), int(float_type), int(int_type), int(qmin), int(qmax),
            int(scale_type), int(asymmetric), int(out_type), int(activation), int(pow2_scales), int(scale_layout),
            int(scale_rule), int(random_signs), int(rounding), int(rotation))


def make_desc(key, device_index):
    op, direction, gran, ft, it, qmin, qmax, st, asym, ot, act, pow2, layout, rule, signs, rounding, rotation = key
    return Desc(op=op, direction=direction, granularity=int(gran), float_type=ft, int_type=it, qmin=qmin, qmax=qmax,
                scale_type=st, device=DEVICE(device_index), asymmetric=asym, out_type=ot, activation=act,
                pow2_scales=pow2, scale_layout=layout, scale_rule=rule, random_signs=signs,
                rounding=rounding, rotation=rotation)


_NVRTC_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12")
_NVRTC_WHEEL_PATHS = ("nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
                      "nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia/cu12/lib/libnvrtc.so.12")
_nvrtc_checked = []


def ensure_nvrtc(search_path=None, loadable=None):
    """The library opens NVRTC by name. Where that name does not load and
    BARACUDA_QUANT_NVRTC is unset, point it at NVIDIA's NVRTC wheel (a dependency of CUDA
    builds of PyTorch) if one is installed. Returns the path chosen, else None."""
    if os.environ.get("BARACUDA_QUANT_NVRTC"):
        return None
    if loadable is None:
        def loadable(name):
            try:
                ctypes.CDLL(name)
                return True
            except OSError:
                return False
    if any(loadable(n) for n in _NVRTC_NAMES):
        return None
    for base in (sys.path if search_path is None else search_path):
        for rel in _NVRTC_WHEEL_PATHS:
            path = os.path.join(base or ".", rel)
            if os.path.isfile(path):
                os.environ["BARACUDA_QUANT_NVRTC"] = path
                return path
    return None


def plan_for(key, device_index):
    """The plan of a descriptor key on a device (selected once, then cached). The caller
    makes that device current first, so the plan binds its context."""
    plan = _plans.get((key, device_index))
    if plan is not None:
        return plan
    if not _nvrtc_checked:
        _nvrtc_checked.append(ensure_nvrtc())
    with _plans_lock:
        plan = _plans.get((key, device_index))
        if plan is None:
            p = ctypes.c_void_p()
            check(bq_plan_select(ctypes.byref(make_desc(key, device_index)), ctypes.byref(p)))
            plan = p.value
            _plans[(key, device_index)] = plan
    return plan


def validate(key, device_index, args):
    """The library's validation of a descriptor and one call's arguments, with no device
    (for tests): raises like a run would."""
    check(bq_py_validate(ctypes.byref(make_desc(key, device_index)), ctypes.byref(args)))


def all_descs():
    """Every kernel the library offers, one normalized Desc per SKU (its enumeration for
    `baracuda-quant warm --all`): what the package's coverage test walks."""
    n = bq_py_all_descs(None, 0)
    out = (Desc * max(n, 1))()
    bq_py_all_descs(out, n)
    return list(out[:n])


def sku(desc):
    """The SKU a descriptor compiles to, for sm_80 (no NVRTC, no device needed)."""
    buf = ctypes.create_string_buffer(256)
    check(bq_py_sku(ctypes.byref(desc), buf, 256))
    return buf.value.decode()


def cached_plan_keys():
    return list(_plans.keys())


def run(plan, args, workspace, workspace_bytes, stream):
    st = bq_plan_run(plan, ctypes.byref(args), workspace, workspace_bytes, stream)
    if st:
        raise error_for(st)


def plan_sku(plan):
    return bq_plan_sku(plan).decode()


def cache_stats():
    s = CacheStats()
    bq_cache_get_stats(ctypes.byref(s))
    return {n: getattr(s, n) for n, _ in CacheStats._fields_}
