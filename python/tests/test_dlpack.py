"""DLPack import and export with ctypes, on the host (no GPU): the capsule protocol, the
struct layout (through numpy as the other side) and the deleters."""
import ctypes

import pytest

import baracuda_quant as bq
from baracuda_quant import dlpack
from baracuda_quant._enums import DType
from conftest import needs_numpy


def host_array(values, dtype, shape):
    ctype = {DType.F32: ctypes.c_float, DType.S8: ctypes.c_int8, DType.S32: ctypes.c_int32}[dtype]
    buf = (ctype * len(values))(*values)
    # device -1: exported as a CPU array, for a consumer on this machine
    return dlpack.DeviceArray(ctypes.addressof(buf), shape, dtype, -1, owner=buf)


def test_export_and_parse_own_capsule():
    arr = dlpack.DeviceArray(0x7000, (3, 5), DType.BF16, 0, strides=(8, 1))
    before = dlpack.live_exports()
    cap = arr.__dlpack__()
    assert dlpack.live_exports() == before + 1
    assert arr.__dlpack_device__() == (dlpack.kDLCUDA, 0)
    imp = dlpack.view_of_capsule(cap)
    v = imp.view
    assert (v.ptr, v.shape, v.strides, v.dtype, v.device) == (0x7000, (3, 5), (8, 1), DType.BF16, 0)
    with pytest.raises(bq.InvalidArgumentError, match="unconsumed"):
        dlpack.view_of_capsule(cap)  # renamed "used_dltensor": cannot be consumed twice
    imp.release()
    assert dlpack.live_exports() == before
    imp.release()  # once only
    with pytest.raises(BufferError):
        arr.__dlpack__(dl_device=(dlpack.kDLCUDA, 1))
    with pytest.raises(BufferError):
        arr.__dlpack__(copy=True)
    del cap
    assert dlpack.live_exports() == before


def test_unconsumed_capsule_releases_on_collection():
    arr = dlpack.DeviceArray(0x7000, (4,), DType.F32, 0)
    before = dlpack.live_exports()
    cap = arr.__dlpack__()
    assert dlpack.live_exports() == before + 1
    del cap
    assert dlpack.live_exports() == before


def test_struct_sizes():
    assert ctypes.sizeof(dlpack.DLTensor) == 48
    assert ctypes.sizeof(dlpack.DLManagedTensor) == 64
    assert dlpack.DLTensor.byte_offset.offset == 40


def test_import_rejects_host_arrays_before_asking_for_a_capsule():
    class HostOnly:
        asked = False

        def __dlpack_device__(self):
            return (dlpack.kDLCPU, 0)

        def __dlpack__(self, stream=None):
            HostOnly.asked = True
            raise AssertionError("not to be called")
    with pytest.raises(bq.InvalidArgumentError, match="CUDA device"):
        bq.quantize_per_tensor(HostOnly(), 0.5)
    assert not HostOnly.asked


def test_not_an_array():
    with pytest.raises(bq.InvalidArgumentError, match="__dlpack__"):
        bq.quantize_per_tensor([1.0, 2.0], 0.5)


def test_capsule_from_host_array_is_refused_and_released():
    arr = host_array([1, 2, 3], DType.F32, (3,))
    before = dlpack.live_exports()
    cap = arr.__dlpack__()
    with pytest.raises(bq.InvalidArgumentError, match="CUDA device"):
        dlpack.view_of_capsule(cap, "x")
    assert dlpack.live_exports() == before  # the deleter ran


@needs_numpy
def test_numpy_consumes_export():
    import numpy as np
    arr = host_array([1.5, -2.0, 3.25, 4.0, 5.0, 6.0], DType.F32, (2, 3))
    before = dlpack.live_exports()
    n = np.from_dlpack(arr)
    assert n.dtype == np.float32 and n.shape == (2, 3)
    assert n.tolist() == [[1.5, -2.0, 3.25], [4.0, 5.0, 6.0]]
    assert dlpack.live_exports() == before + 1
    del n
    import gc
    gc.collect()
    assert dlpack.live_exports() == before


@needs_numpy
def test_numpy_producer_is_refused():
    import numpy as np
    a = np.arange(24, dtype=np.int8).reshape(4, 6)[:, ::2]
    with pytest.raises(bq.InvalidArgumentError, match="CUDA device"):
        bq.quantize_per_tensor(a, 0.5)
    with pytest.raises(bq.InvalidArgumentError, match="CUDA device"):
        dlpack.view_of_capsule(a.__dlpack__(), "a")


@pytest.mark.parametrize("ndim", [-1, -2**31, 65])
def test_capsule_with_a_bad_ndim_is_refused_and_released(ndim):
    """A capsule whose DLTensor claims a negative (or absurd) number of dimensions is refused
    by name, not read as a 0-d array, and the producer's deleter still runs."""
    arr = dlpack.DeviceArray(0x7000, (3, 5), DType.F32, 0)
    before = dlpack.live_exports()
    cap = arr.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = ctypes.cast(get(cap, b"dltensor"), ctypes.POINTER(dlpack.DLManagedTensor)).contents
    managed.dl_tensor.ndim = ndim
    with pytest.raises(bq.InvalidArgumentError, match="x: DLPack ndim %d" % ndim):
        dlpack.view_of_capsule(cap, "x")
    del cap
    assert dlpack.live_exports() == before
